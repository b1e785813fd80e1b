"""Time limits and preemption on the real cluster: warned, the job checkpoints, requeues itself,
resumes from its checkpoint and completes with the expected final state."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slurm

CLI = [sys.executable, "-m", "slurm_resolver"]


def state(job: str) -> tuple[str, int]:
    out = subprocess.run(["scontrol", "show", "job", "-o", job], capture_output=True, text=True).stdout
    fields = dict(part.split("=", 1) for part in out.split() if "=" in part)
    return fields.get("JobState", ""), int(fields.get("Restarts", "0") or 0)


def wait_until(predicate: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.25)
    raise AssertionError(f"{what} did not happen within {timeout} s")


def test_warned_job_checkpoints_requeues_itself_and_resumes(slurm_cluster: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    submitted = subprocess.run([*CLI, "submit", "data_parallel", "--set=nodes=2", "--set=tasks_per_node=1",
                                "--set=program=slurm_resolver.training.resumable",
                                "--set=program_args=--steps 60 --step-time 0.1", f"--set=output={out}",
                                f"--set=python={sys.executable}"],
                               capture_output=True, text=True, cwd=tmp_path, check=True)
    job = submitted.stdout.strip()
    wait_until(lambda: out.exists() and "run 1: starting" in out.read_text(), 120, "the first run")
    # Slurm's warning before the time limit, sent as Slurm sends it (to the batch script: B:).
    subprocess.run(["scancel", "--batch", "--signal=USR2", job], check=True)
    wait_until(lambda: state(job)[1] == 1 and state(job)[0] != "RUNNING", 60, "the requeue")
    # Slurm holds a requeued job for its credentials' lifetime (AuthInfo=cred_expire: 120 s by
    # default, 10 s on the test cluster) before it may start again on nodes that revoked them.
    wait_until(lambda: state(job)[0] in ("COMPLETED", "FAILED", "CANCELLED", ""), 180, "the second run's end")
    text = out.read_text()
    assert state(job)[0] in ("COMPLETED", ""), text
    # The template appends (--open-mode=append): the first run's lines are still in the file.
    assert "run 1: starting" in text and "warned (SIGUSR2): checkpoint at step" in text and "requeueing" in text
    assert "run 2: resuming at step" in text
    assert "finished: 60 steps, model 1770 (expected 1770), after 1 requeue(s)" in text
    assert (tmp_path / f"checkpoints-{job}" / "state.json").is_file()


def test_a_failed_requeue_ends_every_task_with_the_reason(slurm_cluster: dict[str, str], tmp_path: Path) -> None:
    """An srun job cannot be requeued (only batch jobs can): every task says so and exits 1, at once."""
    proc = subprocess.Popen(["srun", "-N2", "-n2", sys.executable, "-m", "slurm_resolver.training.resumable",
                             "--steps", "600", "--step-time", "0.05"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, cwd=tmp_path)
    assert proc.stdout is not None
    lines = [proc.stdout.readline()]
    assert "run 1: starting" in lines[0], lines
    job = lines[0].split("checkpoints-")[1].split(")")[0]
    subprocess.run(["scancel", "--signal=USR2", job], check=True)
    lines += proc.stdout.readlines()
    assert proc.wait(timeout=60) == 1
    text = "".join(lines)
    assert "FAILED: the requeue failed: scontrol requeue" in text and "Only batch jobs" in text, text
    assert text.count("FAILED: the requeue failed") == 2, text  # both tasks, the same way
    assert (tmp_path / f"checkpoints-{job}" / "state.json").is_file()
