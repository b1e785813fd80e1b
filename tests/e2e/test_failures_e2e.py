"""Failure detection after the bootstrap, on the real cluster: a task killed with SIGKILL is named
to every other task within the bound, one that raises is named with its exception; a task that
ends normally is no failure. Under ``bootstrap -- COMMAND`` a death ends the whole step and is said
once for the job."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ..conftest import ROOT, json_objects
from .conftest import wait_until

pytestmark = pytest.mark.slurm

TASK = textwrap.dedent("""
    import json, os, signal, sys, threading, time
    from slurm_resolver import bootstrap
    victim = int(os.environ["TEST_VICTIM"])
    b = bootstrap(timeout=60, heartbeat=0.5, patience=3.0)
    start = time.monotonic()
    learned = threading.Event()
    found = {}
    def on_failure(rank, why):
        found[rank] = [round(time.monotonic() - start, 2), why]
        learned.set()
    b.on_failure(on_failure)
    if os.environ.get("TEST_HOW") == "after its leader left" and b.rank == victim - 1:
        time.sleep(0.5)
        b.stop()  # the victim's node leader ends its work early and normally: the victim takes its place
        sys.exit(0)
    if b.rank == victim:
        time.sleep(2.0 if os.environ.get("TEST_HOW") == "after its leader left" else 1.0)
        if os.environ.get("TEST_HOW") == "raise":
            raise ValueError("a bad batch")  # uncaught: a failure, though the interpreter exits normally
        os.kill(os.getpid(), signal.SIGKILL)
    if victim < 0 and b.rank == 1:
        b.stop()  # leaves normally, early
        sys.exit(0)
    learned.wait(15 if victim >= 0 else 4)
    print(json.dumps({"rank": b.rank, "failed": found, "query": {str(k): v for k, v in b.failures().items()}}),
          flush=True)
    b.stop()
""")


@pytest.mark.parametrize("victim", [1, 2], ids=["a task", "a node leader"])
def test_a_killed_task_is_named_to_every_other_within_the_bound(run_tasks: Callable[..., list[dict[str, Any]]],
                                                                monkeypatch: pytest.MonkeyPatch, victim: int) -> None:
    """-N2 -n4: node1 holds ranks 0 (the root) and 1; node2 holds 2 (its leader) and 3."""
    monkeypatch.setenv("TEST_VICTIM", str(victim))
    rows = run_tasks(["srun", "-N2", "-n4", "--ntasks-per-node=2"], TASK, check=False)
    assert sorted(r["rank"] for r in rows) == [r for r in range(4) if r != victim], rows
    for row in rows:
        learned_at, why = row["failed"][str(victim)]
        assert learned_at - 1.0 < 10, row  # killed at +1 s; learned within the default bound
        assert f"(rank {victim})" in why and "died" in why
        assert str(victim) in row["query"]


def test_a_task_that_raises_is_a_failure_named_with_its_exception(run_tasks: Callable[..., list[dict[str, Any]]],
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_VICTIM", "3")
    monkeypatch.setenv("TEST_HOW", "raise")
    rows = run_tasks(["srun", "-N2", "-n4", "--ntasks-per-node=2"], TASK, check=False)
    assert sorted(r["rank"] for r in rows) == [0, 1, 2], rows
    for row in rows:
        learned_at, why = row["failed"]["3"]
        assert learned_at - 1.0 < 3, row  # told at once, not after the patience
        assert "(rank 3) on node" in why and "raised ValueError: a bad batch" in why, row


def test_a_task_killed_after_its_node_leader_left_is_still_named(run_tasks: Callable[..., list[dict[str, Any]]],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """-N2 -n4: node2's leader (rank 2) leaves normally at +0.5 s; rank 3 watches in its place, and
    its death at +2 s is known on node1."""
    monkeypatch.setenv("TEST_VICTIM", "3")
    monkeypatch.setenv("TEST_HOW", "after its leader left")
    rows = run_tasks(["srun", "-N2", "-n4", "--ntasks-per-node=2"], TASK, check=False)
    assert sorted(r["rank"] for r in rows) == [0, 1], rows
    for row in rows:
        learned_at, why = row["failed"]["3"]
        assert learned_at - 2.0 < 10 and "(rank 3)" in why and "died" in why, row
        assert "2" not in row["failed"], row  # the leader that left is no failure


def test_a_task_that_ends_normally_is_no_failure(run_tasks: Callable[..., list[dict[str, Any]]],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_VICTIM", "-1")
    rows = run_tasks(["srun", "-N2", "-n3"], TASK)
    assert sorted(r["rank"] for r in rows) == [0, 2] and all(r["failed"] == {} for r in rows), rows


@pytest.mark.parametrize("tasks", [4, 8])
def test_the_bootstrap_command_ends_the_whole_step_naming_the_dead_task_once(slurm_cluster: dict[str, str],
                                                                               tasks: int) -> None:
    """Every surviving task ends, but the death is said once for the job, by the lowest live rank: the
    lines said do not grow with the task count."""
    victim = tasks - 1
    command = ("import os, signal, time; rank = int(os.environ['SLURM_PROCID']); time.sleep(2); "
               f"os.kill(os.getpid(), signal.SIGKILL) if rank == {victim} else time.sleep(120)")
    start = time.monotonic()
    out = subprocess.run(["srun", "-N2", f"-n{tasks}", sys.executable, "-m", "slurm_resolver", "bootstrap", "--",
                          sys.executable, "-c", command], capture_output=True, text=True, timeout=120)
    assert time.monotonic() - start < 30, "the others were left waiting"
    assert out.returncode != 0
    ours = [line for line in out.stderr.splitlines() if line.startswith("slurm-resolver")]
    assert len(ours) == 1, out.stderr
    assert ours[0].startswith(f"slurm-resolver: error: rank 0: bootstrap: worker:{victim} (rank {victim}) on node2: "
                              "its command exited with signal 9"), out.stderr
    assert not json_objects(out.stdout)


@pytest.mark.parametrize("tasks", [4, 8])
def test_a_command_no_task_can_start_is_said_once(slurm_cluster: dict[str, str], tasks: int) -> None:
    """``bootstrap -- /no/such/command``: every task fails alike, and the lowest rank says it for the job."""
    out = subprocess.run(["srun", "-N2", f"-n{tasks}", sys.executable, "-m", "slurm_resolver", "bootstrap", "--",
                          "/no/such/command"], capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    ours = [line for line in out.stderr.splitlines() if line.startswith("slurm-resolver")]
    assert ours == ["slurm-resolver: error: rank 0: cannot run '/no/such/command': No such file or directory "
                    "(hint: check the command and PATH)"], out.stderr


def test_a_death_stops_every_child_of_the_other_tasks_shell_scripts(slurm_cluster: dict[str, str],
                                                                      tmp_path: Path) -> None:
    """Issue 22: rank 3's script is SIGKILLed 3 s in, the others' scripts wait for `sleep 90`. SIGTERM to
    the shells alone left the sleeps (and the step) running for 74 s; the whole group is stopped now."""
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\n"
                      "if [ \"$SLURM_PROCID\" = 3 ]; then sleep 3; kill -9 $$; fi\n"
                      f"sleep 90.{os.getpid()}\n")  # a length that names this test's sleeps
    script.chmod(0o755)
    start = time.monotonic()
    out = subprocess.run(["srun", "-N2", "-n4", sys.executable, "-m", "slurm_resolver", "bootstrap", "--",
                          str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    took = time.monotonic() - start
    assert out.returncode != 0
    assert took < 3 + 6, f"the step lasted {took:.1f} s after a death at 3 s:\n{out.stderr}"
    named = [l for l in out.stderr.splitlines() if "(rank 3) on node2: its command exited with signal 9" in l]
    assert len(named) == 1 and named[0].startswith("slurm-resolver: error: rank 0: "), out.stderr  # said once
    left = subprocess.run(["pgrep", "-f", f"sleep 90.{os.getpid()}"], capture_output=True, text=True)
    assert not left.stdout.strip(), "a child of a script outlived its step"


QUIET = textwrap.dedent("""
    import ctypes, json, os, signal, time
    from slurm_resolver import bootstrap
    b = bootstrap(timeout=60, heartbeat=0.5, patience=2.0)
    how, held = os.environ["TEST_HOW"], [int(r) for r in os.environ["TEST_RANKS"].split(",")]
    b.barrier("watching", timeout=60)  # every call up made: what follows happens after the bootstrap
    time.sleep(1.0)
    if b.rank in held:
        if how == "gil":  # one C call that keeps the GIL for six patiences: libc's sleep through PyDLL
            ctypes.PyDLL(None).sleep(12)
        else:  # stopped (SIGSTOP) for six patiences, by a process of its own, then continued
            import subprocess
            subprocess.Popen(["sh", "-c", f"sleep 0.2; kill -STOP {os.getpid()}; sleep 12; kill -CONT {os.getpid()}"])
            time.sleep(13)
    else:
        time.sleep(15)
    print(json.dumps({"rank": b.rank, "failed": {str(k): v for k, v in b.failures().items()}}), flush=True)
    if how == "gil":
        b.barrier("after", timeout=60)
    b.stop()
""")


@pytest.mark.parametrize("held", ["1", "2"], ids=["a task", "a node leader"])
def test_a_task_holding_the_gil_in_a_long_c_call_is_not_declared_dead(
        run_tasks: Callable[..., list[dict[str, Any]]], monkeypatch: pytest.MonkeyPatch, held: str) -> None:
    """-N2 -n4 (node1: ranks 0, 1; node2: 2, its leader, and 3), patience 2 s: rank 1 (or rank 2, which node2's
    task and the root watch) holds the GIL in one C call for 12 s. Its process runs and its gRPC core answers
    the pings: nobody declares it dead, and the job goes on (a barrier after)."""
    monkeypatch.setenv("TEST_HOW", "gil")
    monkeypatch.setenv("TEST_RANKS", held)
    rows = run_tasks(["srun", "-N2", "-n4", "--ntasks-per-node=2"], QUIET, timeout=150)
    assert sorted(r["rank"] for r in rows) == [0, 1, 2, 3], rows
    assert all(r["failed"] == {} for r in rows), rows


@pytest.mark.parametrize("held", ["3", "2"], ids=["a task", "a node leader"])
def test_a_stopped_task_is_declared_dead_by_what_its_watchers_see(
        run_tasks: Callable[..., list[dict[str, Any]]], monkeypatch: pytest.MonkeyPatch, held: str) -> None:
    """The same job, rank 3 (or node2's leader, rank 2) stopped with SIGSTOP for 12 s: its node's leader (or
    its node's task) reads it stopped in the kernel, the root finds node2's leader lost over the network (its
    core's pings unanswered); every task that runs on hears of it, within the patience and a few seconds."""
    monkeypatch.setenv("TEST_HOW", "stop")
    monkeypatch.setenv("TEST_RANKS", held)
    rows = run_tasks(["srun", "-N2", "-n4", "--ntasks-per-node=2"], QUIET, timeout=150, check=False)
    others = [r for r in rows if str(r["rank"]) != held]
    assert sorted(r["rank"] for r in others) == [r for r in range(4) if str(r) != held], rows
    for row in others:
        assert "stopped answering" in row["failed"][held], row
    witness = {"3": 2, "2": 3}[held]  # the task of its node that reads its state in the kernel
    assert "its process is stopped" in next(r for r in rows if r["rank"] == witness)["failed"][held], rows


POWER = textwrap.dedent("""
    import json, os, pathlib, time
    from slurm_resolver import bootstrap
    b = bootstrap(timeout=60, heartbeat=0.5, patience=2.0)
    b.barrier("watching", timeout=60)  # every call up made
    here = pathlib.Path(os.environ["TEST_DIR"])
    (here / f"ready-{b.rank}").touch()
    deadline = time.monotonic() + 45
    while time.monotonic() < deadline and len(b.failures()) < 2:
        time.sleep(0.1)
    time.sleep(1.0)  # no other death comes
    (here / f"failed-{b.rank}.json").write_text(json.dumps({str(k): v for k, v in b.failures().items()}))
    time.sleep(600)  # until the test ends the step
""")


def test_a_node_that_loses_power_is_named_whole_to_the_tasks_left(lose_node2: Callable[[bool], float],
                                                                     tmp_path: Path) -> None:
    """-N2 -n4 (node1: ranks 0, 1; node2: 2, its leader, and 3), patience 2 s; node2 loses power silently (its slurmd
    and tasks frozen: no FIN, no RST; its kernel still completes a connection). The root finds rank 2 silent over the
    network, then rank 3 (`Watch._bereft`): both of node1's tasks name both (before, rank 2 alone: nobody watched
    rank 3 but its leader)."""
    (tmp_path / "task.py").write_text(POWER)
    name = f"power-{os.getpid()}"
    srun = subprocess.Popen(["srun", "-J", name, "-N2", "-n4", "--ntasks-per-node=2", "-w", "node[1-2]",
                             sys.executable, str(tmp_path / "task.py")], cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT), "TEST_DIR": str(tmp_path)})
    try:
        wait_until(lambda: all((tmp_path / f"ready-{r}").exists() for r in range(4)) or srun.poll() is not None, 90,
                   "every task watching")
        assert srun.poll() is None, srun.communicate()[1]
        lost = lose_node2(True)
        wait_until(lambda: all((tmp_path / f"failed-{r}.json").exists() for r in (0, 1)), 60, "node1's findings")
        took = time.time() - lost
    finally:
        subprocess.run(["scancel", "-n", name], capture_output=True)
        srun.kill()
        srun.communicate()
    for rank in (0, 1):
        failed = json.loads((tmp_path / f"failed-{rank}.json").read_text())
        assert set(failed) == {"2", "3"}, (rank, failed)
        assert "stopped answering" in failed["2"] and "more of node2's tasks stopped answering with" in failed["3"], \
            failed
    assert took < 30, took  # a patience or two, a probe, and the tasks' own second


STOPPED_WITH_LEADER = textwrap.dedent("""
    import json, os, pathlib, signal, subprocess, time
    from slurm_resolver import bootstrap
    b = bootstrap(timeout=60, heartbeat=0.5, patience=2.0)
    held, here = [int(r) for r in os.environ["TEST_RANKS"].split(",")], pathlib.Path(os.environ["TEST_DIR"])
    b.barrier("watching", timeout=60)  # every call up made: what follows happens after the bootstrap
    time.sleep(1.0)
    if b.rank in held:  # stopped together (a debugger holding both) until the test ends the step
        os.kill(os.getpid(), signal.SIGSTOP)
    deadline = time.monotonic() + 100  # a successor after a stopped lower task: gRPC's bound for a first connection
    while time.monotonic() < deadline and not set(held) <= set(b.failures()):
        time.sleep(0.1)
    named = {str(k): v for k, v in b.failures().items()}
    if b.rank == 1:  # then a death on node1: heard on node2 only where its living task still watches
        time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGKILL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and 1 not in b.failures():
        time.sleep(0.1)
    later = {str(k): v for k, v in b.failures().items()}
    (here / f"failed-{b.rank}.json").write_text(json.dumps({"named": named, "later": later}))
    time.sleep(600)  # until the test ends the step
""")


@pytest.mark.parametrize("held, living", [("3,5", 4), ("3,4", 5)], ids=["a higher task", "the lower task"])
def test_a_leader_stopped_with_another_task_of_its_node_leaves_both_named_and_the_third_watching(
        slurm_cluster: dict[str, str], tmp_path: Path, held: str, living: int) -> None:
    """-N2 -n6 (node1: ranks 0-2; node2: 3, its leader, 4 and 5), patience 2 s: node2's leader and one other task are
    stopped together (SIGSTOP). The third task of node2 takes the leader's place and every living task names both:
    where the stopped one is above it, the successor names it (`Watch._mute`: it never called there, and makes no gRPC
    connection within gRPC's bound for a first one, 60 s; before, nobody named it); where the stopped one is below it,
    the root names it (`Watch._bereft`) and the third task takes the place once that one did not take its call within
    that bound (`Heartbeat._succeed`; before, it watched nobody from then on). Then rank 1 is killed, and node2's
    living task hears of it."""
    (tmp_path / "task.py").write_text(STOPPED_WITH_LEADER)
    name = f"stopped-{os.getpid()}"
    srun = subprocess.Popen(["srun", "-J", name, "-N2", "-n6", "--ntasks-per-node=3", "-w", "node[1-2]",
                             sys.executable, str(tmp_path / "task.py")], cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT), "TEST_DIR": str(tmp_path), "TEST_RANKS": held})
    alive = [0, 2, living]
    try:
        wait_until(lambda: all((tmp_path / f"failed-{r}.json").exists() for r in alive) or srun.poll() is not None,
                   200, "the living tasks' findings")
        assert all((tmp_path / f"failed-{r}.json").exists() for r in alive), srun.communicate()[1]
    finally:
        subprocess.run(["scancel", "-s", "KILL", "-n", name], capture_output=True)
        srun.kill()
        srun.communicate()
    stopped = set(held.split(","))
    for rank in alive:
        found = json.loads((tmp_path / f"failed-{rank}.json").read_text())
        assert set(found["named"]) - {"1"} == stopped, (rank, found)  # (a task that watched late: rank 1 too)
        assert set(found["later"]) == stopped | {"1"}, (rank, found)
    if living == 4:
        named = json.loads((tmp_path / "failed-4.json").read_text())["named"]["5"]
        assert "never watched at rank 4" in named, named
