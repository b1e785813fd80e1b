"""The benchmark scripts run (their figures are in benchmarks/README.md, not asserted here)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]


def run_script(*argv: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """A benchmark script in a session of its own: where it outlives ``timeout``, its processes
    (spawned workers included) end with it."""
    with subprocess.Popen([sys.executable, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          cwd=ROOT, start_new_session=True) as process:
        try:
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            out, err = process.communicate()
            raise AssertionError(f"{argv[0]} ran past {timeout} s: {err[-2000:]}") from None
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def test_the_grpc_floor_runs_every_design_over_several_processes() -> None:
    done = run_script("benchmarks/grpc_floor.py", "--tasks", "32", "--procs", "2", "--repeat", "1", timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["design"] for r in rows] == ["tree", "table", "chain", "unchecked"]
    # 8 nodes of 4 tasks: 31 calls up (all but the root), and 24 (tree and table), 8 or no tasks asked who they are
    assert [r["connections_per_task"] for r in rows] == [round(55 / 32, 2), round(55 / 32, 2), round(39 / 32, 2),
                                                         round(31 / 32, 2)]
    assert all(r["procs"] == 2 and r["tasks"] == 32 and r["cpu_ms_per_task"] > 0 for r in rows)


def test_the_grpc_floor_says_why_when_a_process_fails() -> None:
    """A port taken (another run): the run ends at once, naming it, and leaves no process behind."""
    import socket

    with socket.socket() as squatter:
        squatter.bind(("127.77.0.1", 15000))  # node 0's leader (its first task), in process 0
        squatter.listen()
        done = run_script("benchmarks/grpc_floor.py", "--tasks", "16", "--procs", "2", "--repeat", "1",
                          "--designs", "tree", timeout=120)
    assert done.returncode != 0
    assert "port 15000 of 127.77.0.1 is taken" in done.stderr, done.stderr[-2000:]


def test_a_tasks_start_is_measured_beside_the_floor(slurm_cluster: dict[str, str]) -> None:
    """benchmarks/task_start.py on 2 nodes of 2 tasks, one round: the floor and this checkout, every phase timed."""
    done = run_script("benchmarks/task_start.py", "--nodes", "2", "--per-node", "2", "--rounds", "1", "--json",
                      timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert sorted(r["run"] for r in rows) == ["floor"] * 4 + ["slurm_resolver"] * 4
    ours = [r for r in rows if r["run"] == "slurm_resolver"]
    assert all(r["code"].endswith("/slurm_resolver/__init__.py") and r["total"] > r["our import"] > 0 for r in ours)
    assert all(r["exchange"] > 0 and r["total"] > r["grpc import"] > 0 for r in rows)
    assert "| floor |" in done.stdout and "| slurm_resolver |" in done.stdout


def test_the_stacks_are_gathered_in_process_and_over_real_sockets() -> None:
    """benchmarks/stacks.py, small: every task answers, and the merged answer is small."""
    for network in ("local", "grpc"):
        done = run_script("benchmarks/stacks.py", "--network", network, "--procs", "2", "--ranks", "64",
                          timeout=240)
        assert done.returncode == 0, done.stderr[-2000:]
        (row,) = [json.loads(line) for line in done.stdout.splitlines()]
        assert row["network"] == network and row["stacks_answered"] == 64 and 0 < row["stacks_bytes"] < 64 * 1024


def test_a_tasks_read_of_the_table_is_timed_uncached() -> None:
    done = run_script("benchmarks/table_read.py", "--tasks", "64", "4096", "--repeat", "1", "--json", timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["tasks"] for r in rows] == [64, 4096] and all(r["cpu_ms"] > 0 for r in rows)
    assert rows[1]["bytes"] < 4.1 * 4096  # 2 bytes a port and a spare port, and little else


def test_a_burst_of_deaths_is_measured_for_a_task_and_a_leader() -> None:
    """benchmarks/death_burst.py, small: one row for this checkout, a figure in each of its four cells."""
    done = run_script("benchmarks/death_burst.py", "--deaths", "32", "--tasks", "2", "--repeat", "1", "--rounds", "1",
                      timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    row = next(line for line in done.stdout.splitlines() if line.startswith("| this |"))
    assert all(float(cell) > 0 for cell in row.strip("| ").split(" | ")[1:]), row
