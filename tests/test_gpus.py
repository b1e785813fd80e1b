from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurm_resolver import SlurmClusterResolver
from slurm_resolver.errors import EnvironmentVariableError, ResolutionError, SlurmResolverError
from slurm_resolver.gpus import format_devices, parse_devices, parse_reported, split, visible

from .conftest import captured

UUID = "GPU-8d1e3f3a-1c2b-4c5d-9e8f-0a1b2c3d4e5f"
MIG = "MIG-8d1e3f3a-1c2b-4c5d-9e8f-0a1b2c3d4e5f"


@pytest.mark.parametrize(("text", "ids"), [
    ("0", ("0",)), ("2,3", ("2", "3")), ("", ()), ("NoDevFiles", ()), (UUID, (UUID,)),
    (f"{UUID},{MIG}", (UUID, MIG)), ("MIG-GPU-8d1e3f3a/1/0", ("MIG-GPU-8d1e3f3a/1/0",)),
])
def test_parse_round_trip(text: str, ids: tuple[str, ...]) -> None:
    assert parse_devices(text) == ids
    if text != "NoDevFiles":
        assert format_devices(ids) == text


@pytest.mark.parametrize("text", ["0,,1", "a", "0,0", "-1", "GPU-", "0;1"])
def test_parse_rejects(text: str) -> None:
    with pytest.raises(EnvironmentVariableError, match="CUDA_VISIBLE_DEVICES"):
        parse_devices(text)


@given(st.lists(st.integers(0, 64), unique=True, max_size=16))
def test_round_trip_property(indices: list[int]) -> None:
    ids = tuple(map(str, indices))
    assert parse_devices(format_devices(ids)) == ids


@given(st.text(max_size=30))
def test_malformed_lists_only_raise_our_errors(text: str) -> None:
    try:
        parse_devices(text, "SLURM_STEP_GPUS")
    except SlurmResolverError:
        pass


def test_a_table_of_reported_gpus_is_parsed_once_and_a_malformed_one_refused() -> None:
    """The tasks of one process that hold one table share its parse (a simulation's thousands); another
    table is parsed anew, and a malformed list names what it came from."""
    table = {rank: str(rank % 4) for rank in range(64)}
    first = parse_reported(table)
    assert first[5] == ("1",) and parse_reported(table) is first
    assert parse_reported(dict(table)) == first and parse_reported(dict(table)) is not first
    with pytest.raises(EnvironmentVariableError, match="GPUs reported by a peer"):
        parse_reported({0: "0", 1: "0,,1"})


def test_visible_order_of_sources() -> None:
    assert visible({"CUDA_VISIBLE_DEVICES": "1", "SLURM_STEP_GPUS": "2"}).ids == ("1",)
    assert visible({"SLURM_STEP_GPUS": "2,3", "SLURM_JOB_GPUS": "0,1,2,3"}).source == "SLURM_STEP_GPUS"
    assert visible({"GPU_DEVICE_ORDINAL": "0"}).ids == ("0",)
    assert visible({}, nvml_ids=[UUID]).source == "NVML"
    assert visible({"CUDA_VISIBLE_DEVICES": ""}).ids == ()


def test_split_rules() -> None:
    assert split("n1", ["2", "3"], ["w", "w"]) == [("2",), ("3",)]  # Slurm's indices kept
    assert split("n1", ["0", "1", "2"], ["w", "w"]) == [("0",), ("1",)]
    assert split("n1", ["0", "1", "2", "3"], ["ps", "w", "w"], {"ps": 0}) == [(), ("0", "1"), ("2", "3")]
    assert split("n1", [], ["w", "w"]) == [(), ()]
    with pytest.raises(ResolutionError, match=r"request 6 GPUs, but n1 has 4 visible"):
        split("n1", ["0", "1", "2", "3"], ["w", "w", "w"], 2)
    with pytest.raises(ResolutionError, match="4 tasks on n1 share 2 GPUs"):
        split("n1", ["0", "1"], ["w"] * 4)


def test_bound_per_task_keeps_exactly_slurms() -> None:
    envs = captured("srun_gpus_per_task1")
    for env in envs:
        r = SlurmClusterResolver(environ=dict(env))
        assert r.cluster.me and r.cluster.me.gpus == (env["CUDA_VISIBLE_DEVICES"],)
        assert r.num_accelerators() == {"GPU": 1}
        assert r.num_accelerators("worker", 3 - r.task_id) == {"GPU": 1}  # type: ignore[operator]


def test_shared_gres_is_split_and_written_in_slurms_form() -> None:
    results = []
    for env in captured("srun_gres3_n2"):
        target = dict(env)
        r = SlurmClusterResolver(environ=target)
        results.append(target["CUDA_VISIBLE_DEVICES"])
        assert r.num_accelerators() == {"GPU": 1}
    assert results == ["0", "1"]


def test_job_bound_to_gpus_2_and_3_keeps_them() -> None:
    envs = [dict(e, CUDA_VISIBLE_DEVICES="2,3", SLURM_STEP_GPUS="2,3") for e in captured("srun_gres2_n4")[:2]]
    env = dict(envs[1], SLURM_STEP_NUM_TASKS="2", SLURM_STEP_TASKS_PER_NODE="2", SLURM_NTASKS="2")
    r = SlurmClusterResolver(environ=env)
    assert env["CUDA_VISIBLE_DEVICES"] == "3" and r.cluster.task(0).gpus == ("2",)


def test_more_tasks_than_gpus() -> None:
    env = captured("srun_gres2_n4")[0]
    with pytest.raises(ResolutionError, match="4 tasks on node1 share 2 GPUs") as info:
        SlurmClusterResolver(environ=dict(env))
    assert "gpus_per_task=0" in str(info.value)
    cpu = dict(env)
    assert SlurmClusterResolver(gpus_per_task=0, environ=cpu).num_accelerators() == {}
    assert cpu["CUDA_VISIBLE_DEVICES"] == ""
    r = SlurmClusterResolver(jobs={"ps": 2, "worker": 2}, gpus_per_task={"ps": 0, "worker": 1}, environ=dict(env))
    assert [r.cluster.task(i).gpus for i in range(4)] == [(), (), ("0",), ("1",)]
    with pytest.raises(ResolutionError, match="request 8 GPUs, but node1 has 2 visible"):
        SlurmClusterResolver(gpus_per_task=2, environ=dict(env))


def test_cpu_only_step_has_no_gpu_and_writes_nothing() -> None:
    env = dict(captured("srun_cpu_only")[0], CUDA_VISIBLE_DEVICES="")
    r = SlurmClusterResolver(environ=env)
    assert r.num_accelerators() == {} and r.num_accelerators("worker", 1) == {}


def test_gpus_per_node() -> None:
    env = dict(captured("srun_gres3_n2")[0])
    assert SlurmClusterResolver(gpus_per_node=2, environ=env).cluster.me.gpus == ("0",)  # type: ignore[union-attr]
    with pytest.raises(ResolutionError, match="gpus_per_node=4, but this node has 3 GPUs visible"):
        SlurmClusterResolver(gpus_per_node=4, environ=dict(captured("srun_gres3_n2")[0]))
    declared = dict(captured("srun_cpu_only")[0])
    r = SlurmClusterResolver(gpus_per_node=2, environ=declared, auto_set_gpu=False)
    assert r.num_accelerators() == {"GPU": 2}  # with nothing visible, the caller's declaration is used
