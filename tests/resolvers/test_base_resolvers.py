from __future__ import annotations

import json

import pytest

from slurm_resolver import ClusterSpec, SimpleClusterResolver, UnionClusterResolver
from slurm_resolver.errors import ConfigurationError

SPEC = ClusterSpec({"worker": ["w0:2222", "w1:2222"], "ps": ["p0:2222"]})


def test_simple_resolver() -> None:
    r = SimpleClusterResolver(SPEC, master="m:1", task_type="worker", task_id=1, num_accelerators={"GPU": 2},
                              rpc_layer="grpc")
    assert r.cluster_spec() is SPEC
    assert r.master() == "grpc://m:1"
    assert r.master("ps", 0) == "grpc://p0:2222"
    assert r.master("ps", 0, rpc_layer="http") == "http://p0:2222"
    assert r.num_accelerators() == {"GPU": 2}
    assert (r.task_type, r.task_id, r.environment, r.rpc_layer) == ("worker", 1, "", "grpc")
    r.task_type, r.task_id = "ps", 0
    assert (r.task_type, r.task_id) == ("ps", 0)


def test_simple_resolver_defaults_and_type_checks() -> None:
    r = SimpleClusterResolver(SPEC)
    assert r.master() == "" and r.num_accelerators() == {} and r.task_type is None
    with pytest.raises(TypeError):
        SimpleClusterResolver("not a spec")
    with pytest.raises(TypeError):
        SimpleClusterResolver(SPEC, master=3)  # type: ignore[arg-type]


def test_union_concatenates_jobs_present_in_two_specs() -> None:
    a = SimpleClusterResolver(ClusterSpec({"worker": ["a:1", "b:1"]}), task_type="worker", task_id=0, rpc_layer="grpc")
    b = SimpleClusterResolver(ClusterSpec({"worker": ["c:1"], "ps": ["p:1"]}))
    union = UnionClusterResolver(a, b)
    assert union.cluster_spec().as_dict() == {"worker": ["a:1", "b:1", "c:1"], "ps": ["p:1"]}
    assert (union.task_type, union.task_id, union.rpc_layer) == ("worker", 0, "grpc")
    assert union.master("ps", 0) == "p:1"  # as TensorFlow: only the union's own rpc_layer applies
    assert union.master("ps", 0, rpc_layer="grpc") == "grpc://p:1"


def test_union_sparse_merge_and_duplicates() -> None:
    a = SimpleClusterResolver(ClusterSpec({"worker": {1: "a:1"}}))
    b = SimpleClusterResolver(ClusterSpec({"worker": {2: "c:1"}}))
    assert UnionClusterResolver(a, b).cluster_spec().as_dict() == {"worker": {1: "a:1", 2: "c:1"}}
    with pytest.raises(KeyError, match="Duplicate"):
        UnionClusterResolver(a, a).cluster_spec()


def test_union_errors() -> None:
    with pytest.raises(ValueError, match="At least one"):
        UnionClusterResolver()
    with pytest.raises(TypeError):
        UnionClusterResolver(object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="Unexpected kwargs"):
        UnionClusterResolver(SimpleClusterResolver(SPEC), colour="red")


def test_tf_config_of_any_resolver() -> None:
    r = SimpleClusterResolver(SPEC, task_type="worker", task_id=1, rpc_layer="grpc")
    assert json.loads(r.tf_config()) == {"cluster": SPEC.as_dict(), "task": {"type": "worker", "index": 1}}
    with pytest.raises(ConfigurationError):
        SimpleClusterResolver(SPEC).tf_config()
    with pytest.raises(ValueError, match="No task with index 9"):
        r.tf_config("worker", 9)
