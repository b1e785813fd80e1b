"""The benchmark scripts run (their figures are in benchmarks/README.md, not asserted here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]


def test_the_grpc_floor_runs_every_design_over_several_processes() -> None:
    done = subprocess.run([sys.executable, "benchmarks/grpc_floor.py", "--tasks", "32", "--procs", "2",
                           "--repeat", "1"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["design"] for r in rows] == ["tree", "chain", "unchecked"]
    # 8 nodes of 4 tasks: 31 calls up (all but the root), and 24, 8 or no tasks asked who they are
    assert [r["connections_per_task"] for r in rows] == [round(55 / 32, 2), round(39 / 32, 2), round(31 / 32, 2)]
    assert all(r["procs"] == 2 and r["tasks"] == 32 and r["cpu_ms_per_task"] > 0 for r in rows)
