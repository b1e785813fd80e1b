"""TensorFlow's resolver contract, as TensorFlow's own unit tests state it, held by ours.

The behaviours asserted by TensorFlow's ``slurm_cluster_resolver_test.py``,
``tfconfig_cluster_resolver_test.py``, ``cluster_resolver_test.py``,
``kubernetes_cluster_resolver_test.py`` and ``ClusterSpecTest`` (``server_lib_test.py``), written
again as tables over our classes (their code is not copied). Where we differ on purpose, the case
asserts our behaviour and names the row of the differences table in docs/tensorflow.md.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from slurm_resolver import (
    ClusterSpec,
    KubernetesClusterResolver,
    SimpleClusterResolver,
    SlurmClusterResolver,
    TFConfigClusterResolver,
    UnionClusterResolver,
    addresses,
    nvml,
)
from slurm_resolver.errors import EnvironmentVariableError
from slurm_resolver.hostlists import expand, expand_counts
from slurm_resolver.resolvers.kubernetes import ExecutableLocation, KubernetesExecutableLocation

from ..conftest import require
from ..fakes import fake_pynvml as fake

# -- SlurmClusterResolver ------------------------------------------------------------------------------

NODES = "t02n13,t02n41,t02n43"
STEP = {"SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "3", "SLURM_STEP_NODELIST": NODES}
FIVE = {"SLURM_PROCID": "1", "SLURM_STEP_NUM_TASKS": "5", "SLURM_STEP_TASKS_PER_NODE": "2(x2),1",
        "SLURM_STEP_NODELIST": NODES, "CUDA_VISIBLE_DEVICES": ""}
PS_WORKERS = {"ps": ["t02n13:8888"], "worker": ["t02n41:8888", "t02n43:8888"]}
FIVE_SPEC = {"ps": ["t02n13:8888"], "worker": ["t02n13:8889", "t02n41:8888", "t02n41:8889", "t02n43:8888"]}
TF_ARGS = {"jobs": {"ps": 1, "worker": 2}, "port_base": 8888, "gpus_per_node": 1, "gpus_per_task": 1,
           "auto_set_gpu": False}


@pytest.fixture
def names_resolve(monkeypatch: pytest.MonkeyPatch) -> None:
    """TensorFlow's tests name nodes (t02n13...) that do not exist here; ours checks that a node's name
    resolves (differences table: node names), so the check is told they do."""
    monkeypatch.setattr(addresses, "resolves", lambda name: True)


# environment, constructor arguments, ClusterSpec, CUDA_VISIBLE_DEVICES written (None: left as it was), GPUs
SLURM_CASES: list[tuple[str, dict[str, str], dict[str, Any], dict[str, Any], str | None, dict[str, int]]] = [
    ("the step's variables alone, no step id or job id",
     {**STEP, "SLURM_STEP_TASKS_PER_NODE": "1(x3)", "CUDA_VISIBLE_DEVICES": "0"}, {},
     {"worker": ["t02n13:8888", "t02n41:8888", "t02n43:8888"]}, "0", {"GPU": 1}),
    ("tasks_per_node= stands in for SLURM_STEP_TASKS_PER_NODE", dict(STEP), {**TF_ARGS, "tasks_per_node": 1},
     PS_WORKERS, None, {}),
    ("SLURM_STEP_TASKS_PER_NODE read when tasks_per_node is not given",
     {**STEP, "SLURM_STEP_TASKS_PER_NODE": "1(x3)"}, TF_ARGS, PS_WORKERS, None, {}),
    ("as many tasks as nodes: one on each, without SLURM_STEP_TASKS_PER_NODE", dict(STEP), TF_ARGS, PS_WORKERS,
     None, {}),
    ("several tasks per node, gpus_per_node declared though none is visible", dict(FIVE),
     {"jobs": {"ps": 1, "worker": 4}, "gpus_per_node": 2, "gpus_per_task": 1}, FIVE_SPEC, "1", {"GPU": 1}),
    ("two GPUs a task", dict(FIVE), {"jobs": {"ps": 1, "worker": 4}, "gpus_per_node": 4, "gpus_per_task": 2},
     FIVE_SPEC, "2,3", {"GPU": 2}),
]


@pytest.mark.parametrize(("env", "kwargs", "spec", "written", "gpus"), [c[1:] for c in SLURM_CASES],
                         ids=[c[0] for c in SLURM_CASES])
def test_slurm_resolves_what_tensorflow_resolves(names_resolve: None, env: dict[str, str], kwargs: dict[str, Any],
                                                 spec: dict[str, Any], written: str | None,
                                                 gpus: dict[str, int]) -> None:
    before = env.get("CUDA_VISIBLE_DEVICES")
    r = SlurmClusterResolver(**kwargs, environ=env, check_port=False)
    assert r.cluster_spec().as_dict() == spec
    assert ClusterSpec(r.cluster_spec().as_dict()) == r.cluster_spec()
    assert r.master("worker", 0, rpc_layer="grpc") == f"grpc://{spec['worker'][0]}"
    assert env.get("CUDA_VISIBLE_DEVICES") == (before if written is None else written)
    if kwargs.get("gpus_per_task") is None or kwargs.get("auto_set_gpu", True):
        assert r.num_accelerators() == gpus


def test_a_node_dict_stands_in_for_the_node_list(names_resolve: None) -> None:
    env = {"SLURM_PROCID": "1", "SLURM_STEP_NUM_TASKS": "3"}
    r = SlurmClusterResolver(tasks_per_node={"a": 2, "b": 1}, environ=env, check_port=False)
    assert r.cluster_spec().as_dict() == {"worker": ["a:8888", "a:8889", "b:8888"]} and r.task_id == 1
    r = SlurmClusterResolver(tasks_per_node={"node10": 1, "node9": 2}, environ=env, check_port=False)
    assert r.cluster_spec().as_dict() == {"worker": ["node10:8888", "node9:8888", "node9:8889"]}  # the dict's order


def test_slurm_task_and_rpc_layer_can_be_set(names_resolve: None) -> None:
    r = SlurmClusterResolver(**TF_ARGS, tasks_per_node=1, environ=dict(STEP), check_port=False)
    r.task_type, r.task_id = "worker", 1
    assert r.master() == "grpc://t02n43:8888"
    r.rpc_layer = "ab"
    assert r.master("ps", 0) == "ab://t02n13:8888"
    assert r.master("ps", 0, rpc_layer="test") == "test://t02n13:8888"


# a partial srun environment: either it resolves (above), or it is refused naming what is missing
PARTIAL: list[tuple[str, dict[str, str], dict[str, Any], str]] = [
    ("tasks on 2 nodes, counts unknown", {**STEP, "SLURM_STEP_NUM_TASKS": "5", "SLURM_STEP_NODELIST": "a,b"}, {},
     "SLURM_STEP_TASKS_PER_NODE"),
    ("a rank and nothing else", {"SLURM_PROCID": "1"}, {}, "SLURM_STEP_NODELIST"),
    ("a rank, a step id and no node list", {"SLURM_PROCID": "1", "SLURM_STEP_ID": "0"}, {}, "SLURM_STEP_NODELIST"),
    ("the step's layout without a rank", {"SLURM_STEP_NODELIST": "a,b", "SLURM_STEP_NUM_TASKS": "2"}, {},
     "SLURM_PROCID"),
    ("tasks_per_node does not give the node list", {"SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "2"},
     {"tasks_per_node": 1}, "SLURM_STEP_NODELIST"),
]


@pytest.mark.parametrize(("env", "kwargs", "variable"), [c[1:] for c in PARTIAL], ids=[c[0] for c in PARTIAL])
def test_a_partial_launch_is_refused_naming_the_missing_variable(names_resolve: None, env: dict[str, str],
                                                                  kwargs: dict[str, Any], variable: str) -> None:
    with pytest.raises(EnvironmentVariableError) as info:
        SlurmClusterResolver(**kwargs, environ=env, check_port=False)
    assert info.value.variable == variable and info.value.value is None and "HINT" in str(info.value)
    assert isinstance(info.value, ValueError)


def test_no_launcher_variable_at_all_is_one_process() -> None:
    r = SlurmClusterResolver(environ={}, check_port=False)
    assert r.cluster_spec().as_dict() == {"worker": ["localhost:8888"]} and r.get_task_info() == ("worker", 0)


@pytest.mark.parametrize(("text", "hosts"), [
    ("n1", ("n1",)), ("n[1,3]", ("n1", "n3")), ("n[1-3]", ("n1", "n2", "n3")),
    ("n[1-2],m5,o[3-4,6,7-9]", ("n1", "n2", "m5", "o3", "o4", "o6", "o7", "o8", "o9")),
    ("n[0001-0003],m5,o[009-011]", ("n0001", "n0002", "n0003", "m5", "o009", "o010", "o011")),
])
def test_host_lists_expand_as_tensorflow_expands_them(text: str, hosts: tuple[str, ...]) -> None:
    assert expand(text) == hosts


@pytest.mark.parametrize(("text", "counts"), [
    ("2", (2,)), ("2,1,3", (2, 1, 3)), ("3(x2),2,1", (3, 3, 2, 1)), ("3(x2),2,11(x4)", (3, 3, 2, 11, 11, 11, 11)),
    ("13(x10)", (13,) * 10),
])
def test_tasks_per_node_expand_as_tensorflow_expands_them(text: str, counts: tuple[int, ...]) -> None:
    assert expand_counts(text) == counts


# -- TFConfigClusterResolver ----------------------------------------------------------------------------

CLUSTER = {"ps": ["ps0:2222", "ps1:2222"], "worker": ["worker0:2222", "worker1:2222", "worker2:2222"]}


def tf_config(**fields: Any) -> dict[str, str]:
    return {"TF_CONFIG": json.dumps({"cluster": CLUSTER, "task": {"type": "ps", "index": 0}, **fields})}


# TF_CONFIG's fields, constructor arguments, what is read: (attribute or call, expected)
TF_CONFIG_CASES: list[tuple[str, dict[str, Any], dict[str, Any], list[tuple[str, Any]]]] = [
    ("the cluster", {}, {}, [("cluster", CLUSTER)]),
    ("master is the task's address", {}, {}, [("master", "ps0:2222")]),
    ("master of a named task", {}, {}, [("master:worker:1", "worker1:2222")]),
    ("session_master wins", {"session_master": "sessionmaster:2222"}, {}, [("master", "sessionmaster:2222")]),
    ("rpc_layer read", {"rpc_layer": "grpc"}, {}, [("master", "grpc://ps0:2222"), ("task_type", "ps"),
                                                   ("task_id", 0), ("rpc_layer", "grpc")]),
    ("arguments override", {"rpc_layer": "grpc", "task": {"type": "ps", "index": 1}},
     {"task_type": "ps", "task_id": 0}, [("master", "grpc://ps0:2222"), ("task_type", "ps"), ("task_id", 0)]),
    ("a numeric task type is a job name", {"cluster": {"123456": CLUSTER["ps"], "worker": CLUSTER["worker"]},
                                           "task": {"type": 123456, "index": 0}}, {}, [("task_type", "123456")]),
    ("a string task index is an int", {"task": {"type": "ps", "index": "1"}}, {},
     [("task_id", 1), ("master", "ps1:2222")]),
    ("task_id= wins over a string index", {"cluster": {"worker": CLUSTER["worker"][:2]},
                                           "task": {"type": "worker", "index": "0"}}, {"task_id": 1},
     [("task_id", 1)]),
    ("no cluster: no master", {"cluster": {}, "task": {}}, {}, [("master", "")]),
    ("one task: no master", {"cluster": {"worker": ["worker0:2222"]}, "task": {}}, {}, [("master", "")]),
]


def read(r: Any, what: str) -> Any:
    if what == "cluster":
        return r.cluster_spec().as_dict()
    if what.startswith("master"):
        _, *task = what.split(":")
        return r.master(task[0], int(task[1])) if task else r.master()
    return getattr(r, what)


@pytest.mark.parametrize(("fields", "kwargs", "expected"), [c[1:] for c in TF_CONFIG_CASES],
                         ids=[c[0] for c in TF_CONFIG_CASES])
def test_tf_config_reads_as_tensorflow_reads(fields: dict[str, Any], kwargs: dict[str, Any],
                                            expected: list[tuple[str, Any]]) -> None:
    r = TFConfigClusterResolver(**kwargs, environ=tf_config(**fields))
    assert [(what, read(r, what)) for what, _ in expected] == expected
    if r.task_type is not None and r.task_id is not None and r.cluster_spec():
        assert json.loads(r.tf_config())["task"] == {"type": r.task_type, "index": r.task_id}


def test_tf_config_overrides_can_be_set_later() -> None:
    r = TFConfigClusterResolver(task_type="ps", task_id=0, environ=tf_config(rpc_layer="grpc"))
    r.task_type, r.task_id, r.rpc_layer = "worker", 1, "test"
    assert (r.master(), r.task_type, r.task_id, r.rpc_layer) == ("test://worker1:2222", "worker", 1, "test")


# -- accelerators: every resolver reports the calling task's, as TensorFlow lists its local devices --------

@pytest.fixture
def four_nvml_gpus(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setitem(sys.modules, "pynvml", fake.make(fake.FOUR))
    monkeypatch.setattr(nvml, "driver_present", lambda: True)
    yield


@pytest.mark.parametrize(("variables", "gpus"), [
    ({"CUDA_VISIBLE_DEVICES": "0,1"}, {"GPU": 2}),
    ({"CUDA_VISIBLE_DEVICES": ""}, {}),
    ({"SLURM_STEP_GPUS": "2"}, {"GPU": 1}),  # Slurm's binding, where CUDA_VISIBLE_DEVICES is not set
    ({}, {"GPU": 4}),  # NVML's devices, where no variable names any
])
def test_tf_config_resolver_counts_the_task_gpus(four_nvml_gpus: None, variables: dict[str, str],
                                                 gpus: dict[str, int]) -> None:
    env = {**tf_config(task={"type": "worker", "index": 1}), **variables}
    r = TFConfigClusterResolver(environ=env)
    assert r.num_accelerators() == gpus
    assert r.num_accelerators("worker", 1) == gpus  # the task itself, named
    assert r.num_accelerators("worker", 2) == {}  # another task's devices are not listed here


def test_without_nvml_or_variables_no_gpu_is_invented(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nvml, "driver_present", lambda: False)
    assert TFConfigClusterResolver(environ=tf_config()).num_accelerators() == {}


def test_a_strategy_built_from_to_tensorflow_is_told_the_task_gpus(four_nvml_gpus: None) -> None:
    """MultiWorkerMirroredStrategy asks any resolver but TensorFlow's own TFConfigClusterResolver for
    ``num_accelerators().get('GPU', 0)`` and makes that many local devices: the code that reads it runs here."""
    require("tensorflow")
    import tensorflow as tf
    from tensorflow.python.distribute.collective_all_reduce_strategy import CollectiveAllReduceExtended

    env = {**tf_config(task={"type": "worker", "index": 1}), "CUDA_VISIBLE_DEVICES": "0,1"}
    converted = TFConfigClusterResolver(environ=env).to_tensorflow()
    assert not isinstance(converted, tf.distribute.cluster_resolver.TFConfigClusterResolver)
    assert converted.num_accelerators() == {"GPU": 2}
    devices, kind = CollectiveAllReduceExtended._initialize_local_devices(None, converted, "/job:worker/task:1")
    assert kind == "GPU" and devices == ("/job:worker/task:1/device:GPU:0", "/job:worker/task:1/device:GPU:1")

    r = SlurmClusterResolver(environ={"SLURM_PROCID": "0", "SLURM_STEP_NODELIST": "localhost",
                                      "SLURM_STEP_NUM_TASKS": "2", "CUDA_VISIBLE_DEVICES": "0,1,2,3"},
                             check_port=False)
    assert r.to_tensorflow().num_accelerators().get("GPU", 0) == 2  # the task's half of its node's four


# -- SimpleClusterResolver and UnionClusterResolver ------------------------------------------------------

def simple(spec: dict[str, Any], **kwargs: Any) -> SimpleClusterResolver:
    return SimpleClusterResolver(ClusterSpec(spec), **kwargs)


def test_simple_resolver_returns_what_it_was_given_and_can_be_changed() -> None:
    r = simple(CLUSTER, task_type="ps", task_id=1, environment="cloud", num_accelerators={"GPU": 8}, rpc_layer="grpc")
    assert (r.task_type, r.task_id, r.environment, r.num_accelerators(), r.rpc_layer) == \
        ("ps", 1, "cloud", {"GPU": 8}, "grpc")
    r.task_type, r.task_id, r.rpc_layer = "worker", 2, "http"
    assert (r.task_type, r.task_id, r.rpc_layer) == ("worker", 2, "http")
    plain = simple(CLUSTER)
    assert plain.master("worker", 0, rpc_layer="grpc") == "grpc://worker0:2222"
    assert plain.master("worker", 2, rpc_layer="grpc") == "grpc://worker2:2222"
    assert plain.master("worker", 2) == "worker2:2222"


def test_union_takes_the_first_resolver_properties_until_set() -> None:
    first = simple(CLUSTER, task_type="ps", task_id=1, environment="cloud", num_accelerators={"GPU": 8},
                   rpc_layer="grpc")
    second = simple({"ps": ["ps2:2222"], "worker": ["worker3:2222"]}, task_type="worker", task_id=2,
                    environment="local", num_accelerators={"GPU": 16}, rpc_layer="http")
    u = UnionClusterResolver(first, second)
    assert (u.task_type, u.task_id, u.environment, u.num_accelerators(), u.rpc_layer) == \
        ("ps", 1, "cloud", {"GPU": 8}, "grpc")
    u.task_type, u.task_id, u.rpc_layer = "worker", 2, "http"
    assert (u.task_type, u.task_id, u.rpc_layer) == ("worker", 2, "http")


# first cluster, second cluster (None: the first alone), merged (KeyError: refused)
UNIONS: list[tuple[str, dict[str, Any], dict[str, Any] | None, Any]] = [
    ("one resolver", CLUSTER, None, CLUSTER),
    ("jobs that do not overlap", {"ps": CLUSTER["ps"]}, {"worker": CLUSTER["worker"]}, CLUSTER),
    ("a job in both: appended", {"worker": ["worker4:2222", "worker5:2222"]}, {"worker": CLUSTER["worker"]},
     {"worker": ["worker4:2222", "worker5:2222", *CLUSTER["worker"]]}),
    ("sparse jobs sharing an index", {"worker": {7: "w4:2222", 9: "w5:2222"}},
     {"worker": {3: "w0:2222", 6: "w1:2222", 7: "w2:2222"}}, KeyError),
    ("a list and a dict sharing an index", {"worker": ["w4:2222", "w5:2222"]},
     {"worker": {1: "w0:2222", 2: "w1:2222", 3: "w2:2222"}}, KeyError),
    ("sparse jobs, distinct indices", {"worker": {5: "w4:2222", 9: "w5:2222"}},
     {"worker": {3: "w0:2222", 6: "w1:2222", 7: "w2:2222"}},
     {"worker": {3: "w0:2222", 5: "w4:2222", 6: "w1:2222", 7: "w2:2222", 9: "w5:2222"}}),
    ("a list and a dict, distinct indices", {"worker": ["w4:2222", "w5:2222"]},
     {"worker": {3: "w0:2222", 6: "w1:2222", 7: "w2:2222"}},
     {"worker": {0: "w4:2222", 1: "w5:2222", 3: "w0:2222", 6: "w1:2222", 7: "w2:2222"}}),
    ("a sparse job alone stays sparse", {"worker": {1: "w0:2222", 3: "w1:2222", 5: "w2:2222"}}, None,
     {"worker": {1: "w0:2222", 3: "w1:2222", 5: "w2:2222"}}),
]


@pytest.mark.parametrize(("first", "second", "merged"), [c[1:] for c in UNIONS], ids=[c[0] for c in UNIONS])
def test_union_merges_as_tensorflow_merges(first: dict[str, Any], second: dict[str, Any] | None,
                                          merged: Any) -> None:
    u = UnionClusterResolver(*[simple(c) for c in (first, second) if c is not None])
    if merged is KeyError:
        with pytest.raises(KeyError):
            u.cluster_spec()
        return
    assert u.cluster_spec() == ClusterSpec(merged)
    assert u.cluster_spec().as_dict() == merged


def test_union_master() -> None:
    u = UnionClusterResolver(simple({"ps": CLUSTER["ps"]}), simple({"worker": CLUSTER["worker"]}))
    assert (u.master(), u.master("worker", 1), u.master("worker", 1, rpc_layer="grpc")) == \
        ("", "worker1:2222", "grpc://worker1:2222")


# -- KubernetesClusterResolver --------------------------------------------------------------------------

def pods(*rows: tuple[str, str, str]) -> SimpleNamespace:
    return SimpleNamespace(items=[SimpleNamespace(metadata=SimpleNamespace(name=name, namespace="default"),
                                                  status=SimpleNamespace(phase=phase, pod_ip=ip, host_ip=ip))
                                  for name, phase, ip in rows])


class Client:
    def __init__(self, listed: dict[str, SimpleNamespace]) -> None:
        self.listed = listed

    def list_pod_for_all_namespaces(self, label_selector: str) -> SimpleNamespace:
        return self.listed[label_selector]


THREE = pods(("tensorflow-abc123", "Running", "10.1.2.3"), ("tensorflow-def456", "Running", "10.1.2.4"),
             ("tensorflow-999999", "Running", "10.1.2.5"))
K8S_CASES: list[tuple[str, dict[str, Any], dict[str, SimpleNamespace], dict[str, Any]]] = [
    ("one pod", {}, {"job-name=tensorflow": pods(("tensorflow-abc123", "Running", "10.1.2.3"))},
     {"worker": ["10.1.2.3:8470"]}),
    ("one pod, from within the cluster", {"executable_location": ExecutableLocation.WITHIN_CLUSTER},
     {"job-name=tensorflow": pods(("tensorflow-abc123", "Running", "10.1.2.3"))}, {"worker": ["10.1.2.3:8470"]}),
    ("sorted by name", {}, {"job-name=tensorflow": THREE},
     {"worker": ["10.1.2.5:8470", "10.1.2.3:8470", "10.1.2.4:8470"]}),
    ("several selectors and jobs", {"job_to_label_mapping": {"worker": ["job-name=worker1", "job-name=worker2"],
                                                             "ps": ["job-name=ps"]}},
     {"job-name=worker1": THREE,
      "job-name=worker2": pods(("tensorflow-abc124", "Running", "10.1.2.6"), ("tensorflow-def457", "Running",
                                                                               "10.1.2.7"),
                               ("tensorflow-999990", "Running", "10.1.2.8")),
      "job-name=ps": pods(("tensorflow-ps-1", "Running", "10.1.2.1"), ("tensorflow-ps-2", "Running", "10.1.2.2"))},
     {"worker": [f"10.1.2.{i}:8470" for i in (5, 3, 4, 8, 6, 7)], "ps": ["10.1.2.1:8470", "10.1.2.2:8470"]}),
    # differences table: a pod not Running is left out (TensorFlow fails the whole cluster), and later
    # tasks keep their indices
    ("a Failed pod is left out, the others keep their indices", {},
     {"job-name=tensorflow": pods(("w-0", "Running", "10.1.2.3"), ("w-1", "Failed", "10.1.2.4"),
                                  ("w-2", "Running", "10.1.2.5"))},
     {"worker": {0: "10.1.2.3:8470", 2: "10.1.2.5:8470"}}),
]


@pytest.mark.parametrize(("kwargs", "listed", "spec"), [c[1:] for c in K8S_CASES], ids=[c[0] for c in K8S_CASES])
def test_kubernetes_lists_pods_as_tensorflow_lists_them(kwargs: dict[str, Any], listed: dict[str, SimpleNamespace],
                                                        spec: dict[str, Any]) -> None:
    r = KubernetesClusterResolver(**kwargs, override_client=Client(listed))
    assert r.cluster_spec().as_dict() == spec


def test_kubernetes_master_with_the_task_set() -> None:
    listed = pods(("worker-0", "Running", "10.1.2.3"), ("worker-1", "Running", "10.1.2.4"),
                  ("worker-2", "Running", "10.1.2.5"))
    r = KubernetesClusterResolver(override_client=Client({"job-name=tensorflow": listed}))
    r.task_type, r.task_id = "worker", 0
    assert (r.task_type, r.task_id, r.master(), r.master("worker", 2)) == \
        ("worker", 0, "grpc://10.1.2.3:8470", "grpc://10.1.2.5:8470")


@pytest.mark.parametrize("location", [None, "WITHIN_CLUSTER", 0])
def test_an_invalid_executable_location_is_a_value_error(location: object) -> None:
    with pytest.raises(ValueError, match="executable location"):
        KubernetesClusterResolver(executable_location=location, override_client=Client({}))  # type: ignore[arg-type]


def test_tensorflow_executable_location_is_taken() -> None:
    require("tensorflow")
    import tensorflow as tf

    assert KubernetesExecutableLocation is ExecutableLocation
    if not hasattr(tf.distribute.cluster_resolver, "KubernetesExecutableLocation"):  # 2.16 (noxfile.py's oldest)
        pytest.skip(f"TensorFlow {tf.__version__}'s Kubernetes resolver takes no executable location")
    theirs = tf.distribute.cluster_resolver.KubernetesExecutableLocation.OFF_CLUSTER
    r = KubernetesClusterResolver(executable_location=theirs, override_client=Client({}))
    assert r._executable_location is ExecutableLocation.OFF_CLUSTER


# -- ClusterSpec ----------------------------------------------------------------------------------------

def test_cluster_spec_string() -> None:
    spec = ClusterSpec({"ps": ["ps0:1111"], "worker": ["worker0:3333", "worker1:4444"]})
    assert str(spec) == "ClusterSpec({'ps': ['ps0:1111'], 'worker': ['worker0:3333', 'worker1:4444']})"


@pytest.mark.parametrize("cluster", [CLUSTER, {"ps": CLUSTER["ps"], "worker": []}])
def test_cluster_spec_dict_def_and_spec_are_one_cluster(cluster: dict[str, Any]) -> None:
    require("tensorflow")
    import tensorflow as tf

    spec = ClusterSpec(cluster)
    expected = tf.train.ClusterSpec(cluster).as_cluster_def()
    for again in (spec, ClusterSpec(spec), ClusterSpec(spec.as_cluster_def()), ClusterSpec(spec.as_dict())):
        assert again.as_cluster_def() == expected
        assert tf.train.ClusterSpec(again.as_dict()).as_cluster_def() == expected


def test_cluster_spec_accessors() -> None:
    cluster = {**CLUSTER, "sparse": {0: "sparse0:2222", 3: "sparse3:2222"}}
    spec = ClusterSpec(cluster)
    assert spec.as_dict() == cluster
    assert [spec.num_tasks(j) for j in ("ps", "worker", "sparse")] == [2, 3, 2]
    assert (spec.task_address("ps", 0), spec.task_address("sparse", 0)) == ("ps0:2222", "sparse0:2222")
    assert [spec.task_indices(j) for j in ("ps", "worker", "sparse")] == [[0, 1], [0, 1, 2], [0, 3]]
    assert spec.job_tasks("sparse") == ["sparse0:2222", None, None, "sparse3:2222"]
    for call in (lambda: spec.num_tasks("unknown"), lambda: spec.task_address("unknown", 0),
                 lambda: spec.task_address("sparse", 2), lambda: spec.task_indices("unknown"),
                 lambda: spec.job_tasks("unknown")):
        with pytest.raises(ValueError):
            call()


def test_cluster_spec_truth_and_equality() -> None:
    assert not ClusterSpec({}) and ClusterSpec({"job": ["host:port"]})
    assert ClusterSpec({}) == ClusterSpec({})
    assert ClusterSpec({"job": ["host:2222"]}) == ClusterSpec({"job": ["host:2222"]}) == \
        ClusterSpec({"job": {0: "host:2222"}})
    for a, b in [({}, {"job": ["host:2223"]}), ({"job1": ["host:2222"]}, {"job2": ["host:2222"]}),
                 ({"job": ["host:2222"]}, {"job": ["host:2223"]}),
                 ({"job": ["host:2222", "host:2223"]}, {"job": ["host:2223", "host:2222"]})]:
        assert ClusterSpec(a) != ClusterSpec(b)
