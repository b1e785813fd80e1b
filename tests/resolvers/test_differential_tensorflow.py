"""Differential test: the same cases through TensorFlow 2.21's classes and ours.

Documented deliberate differences: our ValueError messages append what exists (TensorFlow's
message is kept as the prefix); malformed TF_CONFIG is our EnvironmentVariableError (a
ValueError) where TensorFlow raises whatever json or KeyError gives; TFConfigClusterResolver
also reads TF_CONFIG's ``environment``; ClusterResolver's base num_accelerators() counts the GPUs the
calling task sees (CUDA_VISIBLE_DEVICES, Slurm's GPU variables, NVML) instead of opening a session. The
whole list, with reasons: the differences table of docs/tensorflow.md.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any
from unittest import mock

import pytest

import slurm_resolver as ours

from ..conftest import captured, require

SPECS: list[dict[str, Any]] = [
    {"worker": ["w0:1", "w1:1"]},
    {"worker": ["w0:1"], "ps": ["p0:1", "p1:1"], "chief": ["c:1"]},
    {"worker": {0: "w0:1", 3: "w3:1"}},
    {"ps": {1: "p1:1"}, "worker": ["a:1"]},
    {"evaluator": [], "worker": ["a:1"]},
]


def outcome(fn: Callable[[], Any]) -> tuple[str, Any]:
    try:
        value = fn()
    except Exception as exc:  # noqa: BLE001 - the kind of failure is what is compared
        kind = "ValueError" if isinstance(exc, ValueError) else type(exc).__name__
        return ("raises", (kind, str(exc).split(" (")[0]))
    if hasattr(value, "as_dict"):
        value = value.as_dict()
    return ("returns", value)


def spec_calls(module: Any, spec: dict[str, Any]) -> list[tuple[str, Any]]:
    s = module(spec)
    calls: list[Callable[[], Any]] = [
        lambda: s.as_dict(), lambda: s.jobs, lambda: bool(s), lambda: s == module(spec),
        lambda: s.num_tasks("worker"), lambda: s.task_indices("worker"), lambda: s.job_tasks("worker"),
        lambda: s.task_address("worker", 0), lambda: s.task_address("worker", 1), lambda: s.task_address("nope", 0),
        lambda: s.num_tasks("nope"), lambda: module(s).as_dict(),
    ]
    return [outcome(c) for c in calls]


@pytest.mark.parametrize("spec", SPECS, ids=range(len(SPECS)))
def test_cluster_spec(spec: dict[str, Any]) -> None:
    require("tensorflow")
    import tensorflow as tf

    assert spec_calls(ours.ClusterSpec, spec) == spec_calls(tf.train.ClusterSpec, spec)


def resolver_calls(resolver: Any) -> list[tuple[str, Any]]:
    calls: list[Callable[[], Any]] = [
        lambda: resolver.cluster_spec(), lambda: resolver.master(), lambda: resolver.master("worker", 0),
        lambda: resolver.master("worker", 0, rpc_layer="http"), lambda: resolver.task_type,
        lambda: resolver.task_id, lambda: resolver.rpc_layer, lambda: resolver.environment,
        lambda: resolver.master("worker", 9),
    ]
    return [outcome(c) for c in calls]


def simple(module: Any, cluster: Any, spec: dict[str, Any], **kw: Any) -> Any:
    return module.SimpleClusterResolver(cluster(spec), **kw)


@pytest.mark.parametrize("kwargs", [
    {}, {"master": "m:1"}, {"task_type": "worker", "task_id": 1, "rpc_layer": "grpc"},
    {"num_accelerators": {"GPU": 2}, "environment": "google"},
])
def test_simple_resolver(kwargs: dict[str, Any]) -> None:
    require("tensorflow")
    import tensorflow as tf
    tfcr = tf.distribute.cluster_resolver

    spec = {"worker": ["w0:1", "w1:1"], "ps": ["p:1"]}
    a = simple(ours, ours.ClusterSpec, spec, **kwargs)
    b = tfcr.SimpleClusterResolver(tf.train.ClusterSpec(spec), **kwargs)
    assert resolver_calls(a) == resolver_calls(b)
    assert a.num_accelerators() == b.num_accelerators()


@pytest.mark.parametrize(("first", "second", "kw"), [
    ({"worker": ["a:1", "b:1"]}, {"worker": ["c:1"], "ps": ["p:1"]}, {}),
    ({"worker": {1: "a:1"}}, {"worker": {2: "c:1"}}, {"rpc_layer": "grpc"}),
    ({"worker": {1: "a:1"}}, {"worker": {1: "c:1"}}, {}),
    ({"worker": ["a:1"]}, {"ps": ["p:1"]}, {"task_type": "ps", "task_id": 0}),
])
def test_union_resolver(first: dict[str, Any], second: dict[str, Any], kw: dict[str, Any]) -> None:
    require("tensorflow")
    import tensorflow as tf
    tfcr = tf.distribute.cluster_resolver

    a = ours.UnionClusterResolver(ours.SimpleClusterResolver(ours.ClusterSpec(first), task_type="worker", task_id=0),
                                  ours.SimpleClusterResolver(ours.ClusterSpec(second)), **kw)
    b = tfcr.UnionResolver(tfcr.SimpleClusterResolver(tf.train.ClusterSpec(first), task_type="worker", task_id=0),
                           tfcr.SimpleClusterResolver(tf.train.ClusterSpec(second)), **kw)
    assert resolver_calls(a) == resolver_calls(b)


TF_CONFIGS = [
    {"cluster": {"worker": ["w0:1", "w1:1"]}, "task": {"type": "worker", "index": 1}},
    {"cluster": {"worker": ["w0:1"], "ps": ["p:1"]}, "task": {"type": "ps", "index": 0}, "rpc_layer": "grpc"},
    {"cluster": {"worker": ["w0:1"]}, "environment": "google"},
    {"cluster": {"chief": ["c:1"], "worker": ["w0:1"]}, "task": {"type": "chief", "index": 0}},
    {},
]


@pytest.mark.parametrize("config", TF_CONFIGS, ids=range(len(TF_CONFIGS)))
def test_tf_config_resolver(config: dict[str, Any]) -> None:
    require("tensorflow")
    import tensorflow as tf

    tfcr = tf.distribute.cluster_resolver

    text = json.dumps(config)
    with mock.patch.dict(os.environ, {"TF_CONFIG": text}):
        theirs = resolver_calls(tfcr.TFConfigClusterResolver())
    mine = resolver_calls(ours.TFConfigClusterResolver(environ={"TF_CONFIG": text}))
    if "environment" in config:  # deliberate: we read TF_CONFIG's environment, TensorFlow 2.21 ignores it
        assert mine[7] == ("returns", config["environment"]) and theirs[7] == ("returns", None)
        mine[7] = theirs[7]
    assert mine == theirs


def test_every_resolver_becomes_a_genuine_tensorflow_resolver() -> None:
    require("tensorflow")
    import tensorflow as tf

    tfcr = tf.distribute.cluster_resolver

    resolvers = [
        ours.SimpleClusterResolver(ours.ClusterSpec({"worker": ["a:1"]}), task_type="worker", task_id=0),
        ours.TFConfigClusterResolver(environ={"TF_CONFIG": json.dumps(TF_CONFIGS[0])}),
        ours.SlurmClusterResolver(environ=dict(captured("srun_cpu_only")[0]), check_port=False),
    ]
    for resolver in resolvers:
        converted = resolver.to_tensorflow()
        assert isinstance(converted, tfcr.ClusterResolver)
        assert converted.cluster_spec().as_dict() == resolver.cluster_spec().as_dict()
        assert (converted.task_type, converted.task_id) == (resolver.task_type, resolver.task_id)
        assert json.loads(resolver.tf_config())["task"]["type"] == resolver.task_type
