"""`slurm-resolver run` on the real cluster: a step launched again in its own allocation.

A task SIGKILLed mid-training: the step runs again on the same nodes and the job completes with
the uninterrupted result. A node that loses power mid-training (its slurmd, its slurmstepd and its
tasks SIGKILLed at once: ``testcluster node-kill``): run ends the dead step itself, the next attempt
runs on the spare node within 15 s of the loss, though Slurm would mark the node DOWN only after
SlurmdTimeout (60 s here), and the job completes; the same where the node's processes are frozen
(``node-kill --silent``: no connection closes, and the frozen slurmd's kernel still completes a connection
to its port). An exception on every task: no restart, said once.
Restarts exhausted: every attempt's reason. Each restart's time from the death to the new step's
tasks bootstrapped is printed.
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

from .conftest import wait_until

pytestmark = pytest.mark.slurm

CLI = [sys.executable, "-m", "slurm_resolver"]
RESUMABLE = "slurm_resolver.training.resumable"
GOAL = 10.0
"""Seconds from a task's death to the next attempt's tasks bootstrapped, its node alive."""
LOST_GOAL = 15.0
"""The same from a node's power loss, whatever SlurmdTimeout is."""


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


def restart_time(out: Path, attempt: int, died: float, timeout: float = 120) -> float:
    """Seconds from ``died`` to rank 0 of ``attempt`` saying that every task bootstrapped (when the line is seen
    in the output: never sooner than it was written)."""
    wait_until(said(out, f"attempt {attempt}: every task bootstrapped"), timeout, f"attempt {attempt}")
    return time.time() - died


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
    took = restart_time(out, 2, died)
    wait_until(ended(job), 120, "the job's end")
    text = out.read_text()
    assert job_state(job) == "COMPLETED", text
    assert "worker:3 (rank 3) on node2: its command exited with signal 9 (SIGKILL); restart 1 of 3 on " \
           "node[1-2] (the same nodes)" in text, text
    assert "run 1, attempt 2: resuming at step" in text
    assert "finished: 60 steps, model 1770 (expected 1770), after 0 requeue(s) and 1 restart(s)" in text, text
    assert text.rstrip().splitlines()[-1].startswith("slurm-resolver run: completed: attempt 2 on node[1-2] (")
    assert not (tmp_path / f"checkpoints-{job}" / "attempts").exists(), "run's own records are not left behind"
    print(f"restart after a killed task: {took:.1f} s from the SIGKILL to the new step's tasks bootstrapped")
    assert took <= GOAL, text


def node2_address() -> str:
    """Where Slurm (and run's probe) reaches node2's slurmd: its NodeAddr (testcluster's SR_CLUSTER_NODEADDR)."""
    return os.environ.get("SR_CLUSTER_NODEADDR") or "127.0.1.2"


def slurmd_timeout() -> int:
    out = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, check=True).stdout
    return int(next(line.split("=")[1].split()[0] for line in out.splitlines() if line.startswith("SlurmdTimeout")))


@pytest.mark.parametrize("silent", [False, True], ids=["its sockets closed", "silent"])
def test_a_node_that_loses_power_is_replaced_by_the_spare_at_once(lose_node2: Callable[[bool], float],
                                                                  tmp_path: Path, silent: bool) -> None:
    """Silent: node2's tasks stop beating (patience 5 s) and its frozen slurmd's kernel still completes a
    connection to its port; run must still find it lost and never place the next attempt there."""
    assert slurmd_timeout() >= 4 * LOST_GOAL, "Slurm must not find the lost node before run does"
    job, out = submit(tmp_path, restarts="3", spare_nodes="1", program=RESUMABLE,
                      program_args="--steps 250 --step-time 0.1")
    wait_until(said(out, "run 1: starting"), 120, "the first attempt")
    time.sleep(1.5)
    assert [argv for _, argv in processes(job, SLURMD_NODENAME="node2")], "tasks on node2 to lose"
    died = lose_node2(silent)
    took = restart_time(out, 2, died, timeout=90)
    print(f"restart after a node's {'silent ' * silent}power loss: {took:.1f} s from the loss to the new step's "
          f"tasks bootstrapped on the spare (SlurmdTimeout {slurmd_timeout()} s)")
    wait_until(said(out, "slurm-resolver run: completed"), 120, "the second attempt's end")
    text = out.read_text()
    assert f"node2 (its slurmd does not answer at {node2_address()}:" in text, text
    assert "left behind, with spare node3" in text, text
    assert "run 1, attempt 2: resuming at step" in text, text
    assert "finished: 250 steps, model 31125 (expected 31125), after 0 requeue(s) and 1 restart(s)" in text, text
    assert "step creation temporarily disabled" not in text, text
    assert text.rstrip().splitlines()[-1].startswith("slurm-resolver run: completed: attempt 2 on node[1,3] (")
    wait_until(lambda: job_state(job) != "RUNNING", 30, "the job's end")
    assert job_state(job) in ("COMPLETED", "COMPLETING"), text  # COMPLETING: until Slurm hears from node2
    assert took <= LOST_GOAL, text


HOLD = """
import os, pathlib, time
if os.environ.get("SLURMD_NODENAME") == "node2" and os.environ.get("SLURM_RESOLVER_ATTEMPT") == "1" \\
        and b"bootstrap" in pathlib.Path("/proc/self/cmdline").read_bytes().split(b"\\0"):
    pathlib.Path(__file__).with_name("held-" + os.environ["SLURM_PROCID"]).touch()
    time.sleep(600)
"""
"""A sitecustomize that holds node2's tasks of the first attempt before their bootstrap starts."""
BOOTSTRAP_TIMEOUT = 60.0
"""The bootstrap's default timeout: how long the first attempt's tasks wait for node2's."""


def test_a_node_lost_during_the_bootstrap_is_replaced_by_the_spare(lose_node2: Callable[[bool], float],
                                                                   tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                                   ) -> None:
    """node2 is lost (silently) while its tasks have not joined the bootstrap: node1's tasks fail theirs
    after its timeout, and the next attempt runs on the spare within the goal of that, though node2's
    slurmstepd never says that its tasks ended and Slurm would mark node2 DOWN only after SlurmdTimeout."""
    hold = tmp_path / "hold"
    hold.mkdir()
    (hold / "sitecustomize.py").write_text(HOLD)
    monkeypatch.setenv("PYTHONPATH", str(hold))
    job, out = submit(tmp_path, restarts="3", spare_nodes="1", program=RESUMABLE,
                      program_args="--steps 30 --step-time 0.1")
    wait_until(lambda: len(list(hold.glob("held-*"))) == 2, 120, "node2's tasks held before their bootstrap")
    died = lose_node2(True)
    took = restart_time(out, 2, died, timeout=BOOTSTRAP_TIMEOUT + 90)
    print(f"restart after a node's silent power loss in the bootstrap: {took:.1f} s from the loss to the new "
          f"step's tasks bootstrapped on the spare (bootstrap timeout {BOOTSTRAP_TIMEOUT:g} s)")
    wait_until(said(out, "slurm-resolver run: completed"), 120, "the second attempt's end")
    text = out.read_text()
    assert "worker:2 (rank 2) on node2 never answered in the bootstrap" in text, text
    assert re.search(rf"restart 1 of 3 on node\[1,3\]: node2 \((its slurmd does not answer at "
                     rf"{re.escape(node2_address())}:|Slurm marks it [\w+]+NOT_RESPONDING).* left behind, with spare "
                     r"node3", text), text
    assert "step creation temporarily disabled" not in text and "cannot cancel" not in text, text
    assert text.rstrip().splitlines()[-1].startswith("slurm-resolver run: completed: attempt 2 on node[1,3] (")
    assert took <= BOOTSTRAP_TIMEOUT + LOST_GOAL, text


def test_tasks_that_never_answer_the_bootstrap_are_recorded_by_the_root(slurm_cluster: dict[str, str],
                                                                         tmp_path: Path) -> None:
    """Under run, node2's tasks never bootstrap (as where node2 is lost before): rank 0, whose round waited
    for them, records them as deaths heard on node2 (run then asks node2); rank 1 only heard it."""
    from slurm_resolver.outcome import Recording, bootstrapped_step, read_all

    skip = f"if [ $SLURM_NODEID = 0 ]; then {' '.join(CLI)} bootstrap --timeout 4 -- true; fi"
    env = {**os.environ, **Recording(tmp_path, 1).variables()}
    out = subprocess.run(["srun", "-N2", "-n4", "--ntasks-per-node=2", "bash", "-c", skip], capture_output=True,
                         text=True, timeout=120, env=env)
    assert out.returncode == 1, out.stderr
    outcomes = read_all(tmp_path)
    assert list(outcomes) == [0], out.stderr
    second = outcomes[0].heard[0].node if outcomes[0].heard else ""  # node2, where the cluster was idle
    assert [(d.rank, d.node) for d in outcomes[0].heard] == [(2, second), (3, second)], outcomes
    assert second and second != outcomes[0].fault.node, outcomes
    assert outcomes[0].heard[0].words == f"worker:2 (rank 2) on {second} never answered in the bootstrap"
    assert bootstrapped_step(tmp_path) is not None, "the step to cancel"


def test_an_exception_on_every_task_is_not_restarted_and_said_once(slurm_cluster: dict[str, str], tmp_path: Path
                                                                     ) -> None:
    job, out = submit(tmp_path, restarts="3", command=f"{sys.executable} -c 'raise ValueError(\"a bad batch\")'")
    wait_until(ended(job), 120, "the job's end")
    text = out.read_text()
    assert job_state(job) == "FAILED", text
    ours = [line for line in text.splitlines() if line.startswith("slurm-resolver")]
    assert len(ours) == 1 and ours[0].startswith("slurm-resolver: error: attempt 1 on node[1-2] ("), text
    assert "every task's command exited with code 1: ValueError: a bad batch" in ours[0], text
    assert "; not restarted: the program's own error" in ours[0] and ours[0].count("a bad batch") == 1
    assert len(ours[0]) < 250 and not (tmp_path / f"checkpoints-{job}").exists(), text


def test_exhausted_restarts_list_every_attempts_reason(slurm_cluster: dict[str, str], tmp_path: Path) -> None:
    job, out = submit(tmp_path, restarts="2", command="bash -c 'if [ $SLURM_PROCID = 1 ]; then sleep 1; "
                                                      "kill -9 $$; fi; sleep 60'")
    wait_until(ended(job), 180, "the job's end")
    text = out.read_text()
    assert job_state(job) == "FAILED", text
    final = [line for line in text.splitlines() if line.startswith("slurm-resolver: error: the step failed 3 times")]
    assert len(final) == 1, text
    for number in (1, 2, 3):
        assert f"attempt {number} on node[1-2] (" in final[0]
    assert final[0].count("worker:1 (rank 1) on node1: its command exited with signal 9 (SIGKILL)") == 3
    assert "restarts exhausted (--restarts 2)" in final[0]
    times = [float(t) for t in re.findall(r"restarted in ([\d.]+) s", final[0])]
    print(f"restarts after a killed task, each: {times} s")
    assert len(times) == 2 and max(times) <= GOAL
