from __future__ import annotations

import json

import pytest

from slurm_resolver import TFConfigClusterResolver
from slurm_resolver.errors import EnvironmentVariableError

CLUSTER = {"worker": ["w0:1", "w1:1"], "ps": ["p0:1"]}


def env(config: object) -> dict[str, str]:
    return {"TF_CONFIG": config if isinstance(config, str) else json.dumps(config)}


def test_reads_cluster_task_rpc_layer_and_environment() -> None:
    r = TFConfigClusterResolver(environ=env({"cluster": CLUSTER, "task": {"type": "worker", "index": 1},
                                             "rpc_layer": "grpc+verbs", "environment": "cloud"}))
    assert r.cluster_spec().as_dict() == CLUSTER
    assert (r.task_type, r.task_id, r.rpc_layer, r.environment) == ("worker", 1, "grpc+verbs", "cloud")
    assert r.master() == "grpc+verbs://w1:1"
    assert r.master("ps", 0, rpc_layer="grpc") == "grpc://p0:1"


def test_arguments_override_tf_config() -> None:
    r = TFConfigClusterResolver(task_type="ps", task_id=0, rpc_layer="grpc",
                                environ=env({"cluster": CLUSTER, "task": {"type": "worker", "index": 1}}))
    assert (r.task_type, r.task_id) == ("ps", 0)
    assert r.master() == "grpc://p0:1"


def test_unset_tf_config_is_an_empty_cluster() -> None:
    r = TFConfigClusterResolver(environ={})
    assert not r.cluster_spec() and r.master() == "" and r.task_type is None and r.environment is None


def test_round_trip_through_tf_config() -> None:
    r = TFConfigClusterResolver(environ=env({"cluster": CLUSTER, "task": {"type": "ps", "index": 0}}))
    again = TFConfigClusterResolver(environ={"TF_CONFIG": r.tf_config()})
    assert again.cluster_spec() == r.cluster_spec() and again.task_type == "ps"


@pytest.mark.parametrize(("config", "field"), [
    ("{not json", "JSON"),
    ("[1, 2]", "JSON object"),
    ({"cluster": {"worker": "w0:1"}}, "cluster"),
    ({"cluster": CLUSTER, "task": {"type": "chief", "index": 0}}, "task.type"),
    ({"cluster": CLUSTER, "task": {"type": "worker", "index": -1}}, "task.index"),
    ({"cluster": CLUSTER, "task": {"type": "worker", "index": 7}}, "task.index"),
    ({"cluster": CLUSTER, "task": "worker"}, "task"),
])
def test_malformed_tf_config_names_the_field(config: object, field: str) -> None:
    with pytest.raises(EnvironmentVariableError, match=rf"TF_CONFIG.*{field}") as info:
        TFConfigClusterResolver(environ=env(config)).cluster_spec()
    assert isinstance(info.value, ValueError) and "HINT" in str(info.value)
