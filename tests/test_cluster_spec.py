from __future__ import annotations

import json

import pytest

from slurm_resolver import ClusterSpec
from slurm_resolver.errors import MissingDependencyError


def test_dense_and_sparse() -> None:
    spec = ClusterSpec({"worker": ["w0:1", "w1:1"], "ps": {0: "p0:1", 3: "p3:1"}})
    assert spec.jobs == ["worker", "ps"]  # the order given, as TensorFlow 2.21
    assert spec.num_tasks("ps") == 2
    assert spec.task_indices("ps") == [0, 3]
    assert spec.task_address("ps", 3) == "p3:1"
    assert spec.job_tasks("ps") == ["p0:1", None, None, "p3:1"]
    assert spec.as_dict() == {"worker": ["w0:1", "w1:1"], "ps": {0: "p0:1", 3: "p3:1"}}


def test_sparse_dict_that_is_dense_becomes_a_list() -> None:
    assert ClusterSpec({"w": {1: "b", 0: "a"}}).as_dict() == {"w": ["a", "b"]}


def test_copy_equality_truth() -> None:
    spec = ClusterSpec({"worker": ["a:1"]})
    assert ClusterSpec(spec) == spec
    assert spec == {"worker": ["a:1"]}
    assert spec != ClusterSpec({"worker": ["b:1"]})
    assert spec and not ClusterSpec({})


def test_unknown_job_and_task_name_what_exists() -> None:
    spec = ClusterSpec({"worker": ["a:1"], "ps": ["p:1"]})
    with pytest.raises(ValueError, match=r"No such job in cluster: 'chief' \(jobs in the cluster: 'worker', 'ps'\)"):
        spec.task_address("chief", 0)
    with pytest.raises(ValueError, match=r"No task with index 5 in job 'worker' \(indices: 0\)"):
        spec.task_address("worker", 5)


@pytest.mark.parametrize("bad", [{"w": "a:1"}, {"w": [1]}, {1: ["a"]}, ["a"], {"w": {"x": "a"}}])
def test_type_errors(bad: object) -> None:
    with pytest.raises(TypeError):
        ClusterSpec(bad)


def test_json_round_trip() -> None:
    spec = ClusterSpec({"worker": ["a:1", "b:1"], "ps": {2: "p:1"}})
    assert json.loads(spec.to_json()) == {"worker": ["a:1", "b:1"], "ps": {"2": "p:1"}}
    assert ClusterSpec.from_json(spec.to_json()) == spec


def test_repr() -> None:
    assert repr(ClusterSpec({"w": ["a:1"]})) == "ClusterSpec({'w': ['a:1']})"


def test_tensorflow_conversion_without_tensorflow_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "tensorflow", None)
    monkeypatch.setitem(sys.modules, "tensorflow.python.training.server_lib", None)
    with pytest.raises(MissingDependencyError, match=r"slurm_resolver\[tensorflow\]"):
        ClusterSpec({"w": ["a:1"]}).to_tensorflow()
