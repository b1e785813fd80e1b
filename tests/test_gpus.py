from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurm_resolver import SlurmClusterResolver, gpus
from slurm_resolver.diagnostics import Level, run_checks
from slurm_resolver.errors import EnvironmentVariableError, ResolutionError, SlurmResolverError
from slurm_resolver.gpus import Share, format_devices, parse_devices, parse_reported, split, visible
from slurm_resolver.resolution import resolve

from .conftest import captured
from .fakes import fake_pynvml as fake

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


# Rule 4: where an even split gives each task none, GPUs the job did not ask for (NVML's) go to no task;
# GPUs Slurm gave are an error that says how to ask for enough. (shape, environment edits, NVML's GPUs,
# each task's GPUs or the error, the rule) over the four tasks of one node.
NO_GPU_VARIABLES = ("CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS",
                    "SLURM_GPUS_ON_NODE", "SLURMD_TRES_BIND", "SLURM_GPU_BIND", "SLURM_GPUS_PER_TASK")
H200 = tuple(g.uuid for g in fake.H200)
EIGHT = tuple(g.uuid for g in fake.EIGHT)
SHAPES = [
    ("srun_n4_nvml_sees_1", {}, H200, [()] * 4, Share.UNASKED),
    ("srun_n4_nvml_sees_8", {}, EIGHT, [EIGHT[0:2], EIGHT[2:4], EIGHT[4:6], EIGHT[6:8]], Share.SPLIT),
    ("srun_n4_nvml_sees_none", {}, (), [()] * 4, Share.NONE_VISIBLE),  # a device cgroup hides the node's GPUs
    ("gres_gpu_1_n4", {"CUDA_VISIBLE_DEVICES": "0", "SLURM_STEP_GPUS": "0"}, None,
     "4 tasks on node1 share 1 GPUs: an even split gives each task none", None),
    ("gres_gpu_4_n4", {"CUDA_VISIBLE_DEVICES": "0,1,2,3", "SLURM_STEP_GPUS": "0,1,2,3"}, None,
     [("0",), ("1",), ("2",), ("3",)], Share.SPLIT),
    # ConstrainDevices: the cgroup's devices are CUDA's 0..3, Slurm's own indices are 4..7
    ("device_cgroup_gres_gpu_4_n4", {"CUDA_VISIBLE_DEVICES": "0,1,2,3", "SLURM_STEP_GPUS": "4,5,6,7"}, None,
     [("0",), ("1",), ("2",), ("3",)], Share.SPLIT),
    ("gpus_per_task_1", {"CUDA_VISIBLE_DEVICES": "0", "SLURM_STEP_GPUS": "0", "SLURMD_TRES_BIND": "gpu:per_task:1",
                         "SLURM_GPUS_PER_TASK": "1"}, None, [("0",)] * 4, Share.BOUND),
]


def four_tasks(**edits: str) -> list[dict[str, str]]:
    """The four tasks of ``srun -N1 -n4`` (tests/data/env) without any GPU variable, then ``edits``."""
    return without_gpus("srun_gres2_n4", **edits)


def without_gpus(case: str, **edits: str) -> list[dict[str, str]]:
    """The tasks of a captured launch without any GPU variable (a step that asked for none), then ``edits``."""
    return [dict({k: v for k, v in env.items() if k not in NO_GPU_VARIABLES}, **edits) for env in captured(case)]


def asked_nvml(ids: tuple[str, ...] | None) -> Callable[[], tuple[str, ...] | None]:
    def devices() -> tuple[str, ...] | None:
        assert ids is not None, "NVML was asked, though a variable names the task's GPUs"
        return ids
    return devices


@pytest.mark.parametrize(("edits", "nvml_ids", "expected", "share"), [s[1:] for s in SHAPES],
                         ids=[s[0] for s in SHAPES])
def test_what_each_task_gets_by_the_rule_that_holds(edits: dict[str, str], nvml_ids: tuple[str, ...] | None,
                                                    expected: list[tuple[str, ...]] | str, share: Share | None) -> None:
    for rank, env in enumerate(four_tasks(**edits)):
        if isinstance(expected, str):
            with pytest.raises(ResolutionError, match=expected) as info:
                resolve(env, gpu_devices=asked_nvml(nvml_ids))
            assert "--gres=gpu:N" in str(info.value) and "gpus_per_task=0" in str(info.value)
            assert resolve(env, gpus_per_task=0).me.gpus == ()  # type: ignore[union-attr]
            continue
        cluster = resolve(env, gpu_devices=asked_nvml(nvml_ids))
        assert cluster.me and cluster.me.gpus == expected[rank]
        assert cluster.gpu_plan.decision()[0] is share
        if share is Share.UNASKED:
            assert cluster.device_env() == {"CUDA_VISIBLE_DEVICES": ""}  # none: TensorFlow's resolver writes ''


def test_a_job_that_asked_for_no_gpu_runs_on_a_gpu_node(monkeypatch: pytest.MonkeyPatch,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    """``srun -n4 python train.py`` on a node of one H200 (NVML sees it, Slurm names none): every task
    runs without a GPU, as TensorFlow's resolver runs it; said once under -v, and by check as a warning."""
    fake.install(monkeypatch, fake.H200)
    monkeypatch.setattr(gpus, "_said", set())
    caplog.set_level(logging.INFO, "slurm_resolver")
    for env in four_tasks():
        r = SlurmClusterResolver(environ=env)
        assert r.num_accelerators() == {} and env["CUDA_VISIBLE_DEVICES"] == ""
    said = [m for m in caplog.messages if m.startswith("GPUs:")]
    assert said == [f"GPUs: {H200[0]} (from NVML: no variable names a GPU), fewer than node1's 4 tasks: no task "
                    f"gets one (CUDA_VISIBLE_DEVICES=''), it runs on CPUs ({gpus.ASK_SLURM})"]
    check = next(c for c in run_checks(four_tasks()[0]) if c.name == "gpus")
    assert check.level is Level.WARN and "no task gets one" in check.detail and check.hint == gpus.ASK_SLURM


def test_check_names_the_rule_and_what_this_task_gets(monkeypatch: pytest.MonkeyPatch) -> None:
    fake.install(monkeypatch, fake.EIGHT)
    lines = {c.name: c for c in run_checks(four_tasks()[1])}
    assert lines["gpus"].level is Level.OK
    assert lines["gpus"].detail == (f"{','.join(EIGHT)} (from NVML: no variable names a GPU): this task gets "
                                    f"{','.join(EIGHT[2:4])}, an even split among node1's 4 tasks")
    bound = four_tasks(**dict(SHAPES[-1][1]))[2]  # type: ignore[arg-type]
    assert next(c for c in run_checks(bound) if c.name == "gpus").detail == \
        "0 (from CUDA_VISIBLE_DEVICES, bound by Slurm): the task keeps the GPUs Slurm bound to it"
    refused = next(c for c in run_checks(four_tasks(CUDA_VISIBLE_DEVICES="0")[0]) if c.name == "resolution")
    assert refused.level is Level.FAIL and "share 1 GPUs" in refused.detail


def test_gpus_asked_for_by_argument_are_an_error_even_when_only_nvml_sees_them() -> None:
    """``gpus_per_node`` or ``gpus_per_task`` ask for GPUs: NVML's, too few, are then refused, not dropped."""
    env = four_tasks()[0]
    with pytest.raises(ResolutionError, match="4 tasks on node1 share 1 GPUs"):
        resolve(env, gpus_per_node=1, gpu_devices=lambda: H200).me  # noqa: B018
    with pytest.raises(ResolutionError, match="request 4 GPUs, but node1 has 1 visible"):
        resolve(env, gpus_per_task=1, gpu_devices=lambda: H200).me  # noqa: B018


def test_a_task_given_no_gpu_by_gpus_per_task_is_no_case_of_rule_4() -> None:
    ps, worker = (resolve(env, jobs={"ps": 1, "worker": 1}, gpus_per_task={"ps": 0}, gpu_devices=lambda: EIGHT[:2])
                  for env in without_gpus("srun_gres3_n2"))
    assert ps.me.gpus == () and worker.me.gpus == EIGHT[:2]  # type: ignore[union-attr]
    assert ps.gpu_plan.decision() == (Share.SPLIT, f"{','.join(EIGHT[:2])} (from NVML: no variable names a GPU): "
                                      "this task gets none, gpus_per_task={'ps': 0} among node1's 2 tasks")


def test_nvml_is_read_once_for_every_caller_of_a_plan() -> None:
    calls: list[int] = []

    def devices() -> tuple[str, ...]:
        calls.append(1)
        return EIGHT

    cluster = resolve(four_tasks()[0], gpu_devices=devices)
    assert [cluster.gpu_plan.for_caller(r).ids(r) for r in range(4)][3] == EIGHT[6:8] and len(calls) == 1
