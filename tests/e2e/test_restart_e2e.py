"""`slurm-resolver run` on the real cluster: a step launched again in its own allocation.

A task SIGKILLed mid-training: the step runs again on the same nodes and the job completes with
the uninterrupted result. A node lost mid-training (its slurmd stopped, its tasks killed): the
next attempt runs on the spare node, and the job survives Slurm marking the node DOWN
(``--no-kill``). An exception on every task: no restart. Restarts exhausted: every attempt's
reason. Each restart's time from the death to the new step's tasks bootstrapped is printed
(goal: 10 s at most).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from slurm_resolver.outcome import bootstrapped_at

from ..conftest import TESTCLUSTER

pytestmark = pytest.mark.slurm

CLI = [sys.executable, "-m", "slurm_resolver"]
RESUMABLE = "slurm_resolver.training.resumable"
GOAL = 10.0


def submit(tmp_path: Path, **values: str) -> tuple[str, Path]:
    """Submit the data_parallel template with ``values``; its job id and output file."""
    out = tmp_path / "out.txt"
    sets = [f"--set={k}={v}" for k, v in {"nodes": "2", "tasks_per_node": "2", **values, "output": str(out),
                                          "python": sys.executable}.items()]
    job = subprocess.run([*CLI, "submit", "data_parallel", *sets], capture_output=True, text=True, cwd=tmp_path,
                         check=True).stdout.strip()
    return job, out


def job_state(job: str) -> str:
    out = subprocess.run(["scontrol", "show", "job", "-o", job], capture_output=True, text=True).stdout
    return next((p.split("=", 1)[1] for p in out.split() if p.startswith("JobState=")), "")


def wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"{what} did not happen within {timeout} s")


def said(out: Path, text: str) -> Callable[[], bool]:
    return lambda: out.exists() and text in out.read_text()


def ended(job: str) -> Callable[[], bool]:
    return lambda: job_state(job) not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING")


def processes(job: str, **variables: str) -> Iterator[tuple[int, list[bytes]]]:
    """The pid and command line of every process of ``job`` whose environment has ``variables``."""
    wanted = [f"{k}={v}".encode() for k, v in {"SLURM_JOB_ID": job, **variables}.items()]
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if all(w in environ for w in wanted):
            yield int(pid), command


def restart_time(tmp_path: Path, job: str, attempt: int, died: float) -> float:
    """Seconds from ``died`` to the tasks of ``attempt`` bootstrapped (rank 0 records it)."""
    up = bootstrapped_at(tmp_path / f"checkpoints-{job}" / "attempts" / str(attempt))
    assert up is not None, "rank 0 of the attempt recorded no bootstrap"
    return up - died


def test_a_task_killed_mid_training_is_restarted_on_the_same_nodes(slurm_cluster: dict[str, str],
                                                                    tmp_path: Path) -> None:
    job, out = submit(tmp_path, restarts="3", program=RESUMABLE, program_args="--steps 60 --step-time 0.1")
    wait_until(said(out, "run 1: starting"), 120, "the first attempt")
    time.sleep(1.5)
    command = [pid for pid, argv in processes(job, SLURM_PROCID="3", SLURM_RESOLVER_ATTEMPT="1")
               if argv[1:3] == [b"-m", RESUMABLE.encode()]]
    assert len(command) == 1, "rank 3's training process"
    died = time.time()
    os.kill(command[0], signal.SIGKILL)
    wait_until(ended(job), 120, "the job's end")
    text = out.read_text()
    assert job_state(job) == "COMPLETED", text
    assert "worker:3 (rank 3) on node2: its command exited with signal 9 (SIGKILL); restart 1 of 3 on " \
           "node[1-2] (the same nodes)" in text, text
    assert "run 1, attempt 2: resuming at step" in text
    assert "finished: 60 steps, model 1770 (expected 1770), after 0 requeue(s) and 1 restart(s)" in text, text
    took = restart_time(tmp_path, job, 2, died)
    print(f"restart after a killed task: {took:.1f} s from the SIGKILL to the new step's tasks bootstrapped")
    assert took <= GOAL, text


@pytest.fixture
def lose_node2(slurm_cluster: dict[str, str]) -> Iterator[Callable[[str], float]]:
    """A function that loses node2 for a job (its slurmd stopped, the job's processes there SIGKILLed) and
    returns when; node2 comes back after the test, whatever happens (slurmd started, node resumed)."""

    def lose(job: str) -> float:
        subprocess.run([str(TESTCLUSTER), "node-stop", "node2"], check=True, capture_output=True)
        died = time.time()
        for pid, _ in list(processes(job, SLURMD_NODENAME="node2")):
            os.kill(pid, signal.SIGKILL)
        return died

    try:
        yield lose
    finally:
        subprocess.run([str(TESTCLUSTER), "node-start", "node2"], check=True, capture_output=True)


def test_a_node_lost_mid_training_is_replaced_by_the_spare(lose_node2: Callable[[str], float],
                                                           tmp_path: Path) -> None:
    job, out = submit(tmp_path, restarts="3", spare_nodes="1", program=RESUMABLE,
                      program_args="--steps 100 --step-time 0.1")
    wait_until(said(out, "run 1: starting"), 120, "the first attempt")
    time.sleep(1.5)
    died = lose_node2(job)
    wait_until(said(out, "attempt 2: every task bootstrapped"), 60, "the second attempt")
    # What Slurm does once node2 misses SlurmdTimeout (60 s here): the job keeps its other nodes (--no-kill).
    subprocess.run(["scontrol", "update", "nodename=node2", "state=down", "reason=test: lost"], check=True)
    wait_until(said(out, "slurm-resolver run: completed"), 120, "the second attempt's end")
    text = out.read_text()
    assert "node2 (its slurmd does not answer at 127.0.1.2:" in text and "left behind, with spare node3" in text
    assert "attempt 2 on node[1,3]:" in text and "run 1, attempt 2: resuming at step" in text, text
    assert "finished: 100 steps, model 4950 (expected 4950), after 0 requeue(s) and 1 restart(s)" in text, text
    wait_until(lambda: job_state(job) != "RUNNING", 30, "the job's end")
    assert job_state(job) in ("COMPLETED", "COMPLETING"), text  # COMPLETING: until node2's slurmd says it ended
    took = restart_time(tmp_path, job, 2, died)
    print(f"restart after a lost node: {took:.1f} s from the loss to the new step's tasks bootstrapped on the spare")
    assert took <= GOAL, text


def test_an_exception_on_every_task_is_not_restarted(slurm_cluster: dict[str, str], tmp_path: Path) -> None:
    job, out = submit(tmp_path, restarts="3", command=f"{sys.executable} -c 'raise ValueError(\"a bad batch\")'")
    wait_until(ended(job), 120, "the job's end")
    text = out.read_text()
    assert job_state(job) == "FAILED", text
    assert "slurm-resolver run: attempt 1 on" in text and "attempt 2" not in text, text
    assert "every task's command exited with code 1: ValueError: a bad batch" in text, text
    assert "not restarted: the program failed on every task" in text


def test_exhausted_restarts_list_every_attempts_reason(slurm_cluster: dict[str, str], tmp_path: Path) -> None:
    job, out = submit(tmp_path, restarts="2", command="bash -c 'if [ $SLURM_PROCID = 1 ]; then sleep 1; "
                                                      "kill -9 $$; fi; sleep 60'")
    wait_until(ended(job), 180, "the job's end")
    text = out.read_text()
    assert job_state(job) == "FAILED", text
    final = [line for line in text.splitlines() if line.startswith("slurm-resolver: error: the step failed 3 time")]
    assert len(final) == 1, text
    for number in (1, 2, 3):
        assert f"attempt {number} on node[1-2] (" in final[0]
    assert final[0].count("worker:1 (rank 1) on node1: its command exited with signal 9 (SIGKILL)") == 3
    assert "restarts exhausted (--restarts 2)" in final[0]
    times = [float(t) for t in re.findall(r"restarted in ([\d.]+) s", final[0])]
    print(f"restarts after a killed task, each: {times} s")
    assert len(times) == 2 and max(times) <= GOAL
