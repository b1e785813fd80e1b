"""GPUs on the real cluster: Slurm binds fake GRES devices; each task must keep its own."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable
from typing import Any

import pytest

pytestmark = pytest.mark.slurm

TASK = textwrap.dedent("""
    import json, os
    from slurm_resolver import SlurmClusterResolver, SlurmResolverError
    per_task = json.loads(os.environ.get("TEST_GPUS_PER_TASK", "null"))
    before = os.environ.get("CUDA_VISIBLE_DEVICES")
    try:
        r = SlurmClusterResolver(gpus_per_task=per_task)
    except SlurmResolverError as exc:
        print(json.dumps({"error": str(exc), "truth_rank": int(os.environ["SLURM_PROCID"])}))
        raise SystemExit(0)
    d = r.cluster.describe()
    d.update(before=before, after=os.environ.get("CUDA_VISIBLE_DEVICES"), accel=r.num_accelerators(),
             truth_rank=int(os.environ["SLURM_PROCID"]))
    print(json.dumps(d), flush=True)
""")

Run = Callable[..., list[dict[str, Any]]]


def test_gpus_per_task_keeps_slurms_binding(run_tasks: Run) -> None:
    rows = run_tasks(["srun", "-N2", "-n4", "--gpus-per-task=1"], TASK)
    for row in rows:
        assert row["gpus"] == [row["before"]] and row["after"] == row["before"] and row["accel"] == {"GPU": 1}


def test_gres_shared_by_two_tasks_is_split(run_tasks: Run) -> None:
    rows = run_tasks(["srun", "-N1", "-n2", "--gres=gpu:3"], TASK)
    assert [r["before"] for r in rows] == ["0,1,2", "0,1,2"]
    assert [r["gpus"] for r in rows] == [["0"], ["1"]] and [r["after"] for r in rows] == ["0", "1"]


def test_job_bound_to_gpus_2_3_while_another_holds_0_1(run_tasks: Run) -> None:
    holder = subprocess.Popen(["srun", "--job-name=sr-gpu-holder", "-w", "node2", "-N1", "-n1", "--gres=gpu:2",
                               "bash", "-c", "echo held $CUDA_VISIBLE_DEVICES; sleep 60"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout and holder.stdout.readline().split() == ["held", "0,1"]
        rows = run_tasks(["srun", "-w", "node2", "-N1", "-n2", "--gres=gpu:2"], TASK)
        assert [r["before"] for r in rows] == ["2,3", "2,3"]
        assert [r["after"] for r in rows] == ["2", "3"]  # Slurm's indices, never renumbered from 0
    finally:
        subprocess.run(["scancel", "--name", "sr-gpu-holder"], capture_output=True)
        holder.terminate()
        holder.wait(timeout=30)


def test_more_tasks_than_gpus(run_tasks: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = run_tasks(["srun", "-N1", "-n4", "--gres=gpu:2"], TASK)
    assert all("4 tasks on node" in r["error"] and "gpus_per_task=0" in r["error"] for r in rows)
    monkeypatch.setenv("TEST_GPUS_PER_TASK", "0")
    rows = run_tasks(["srun", "-N1", "-n4", "--gres=gpu:2"], TASK)
    assert all(r["gpus"] == [] and r["accel"] == {} and r["after"] == "" for r in rows)


def test_cpu_only_step(run_tasks: Run) -> None:
    rows = run_tasks(["srun", "-N2", "-n2"], TASK)
    assert all(r["gpus"] == [] and r["accel"] == {} for r in rows)


def test_show_reports_each_tasks_gpus(slurm_cluster: dict[str, str]) -> None:
    out = subprocess.run(["srun", "-N1", "-n2", "--gres=gpu:2", sys.executable, "-m", "slurm_resolver", "show"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    assert "0  " in out or "gpus" in out
    lines = [l.split() for l in out.splitlines() if l[:1].isdigit()]
    assert {tuple(l[-1:]) for l in lines} == {("0",), ("1",)}
