"""Job arrays on the real cluster: every element is its own job with its own cluster, even on the
same nodes and the same rendezvous ports, and takes its own sweep entry."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from ..conftest import json_objects

CLI = [sys.executable, "-m", "slurm_resolver"]
# Each task reports when, then holds its server a while, so that two elements meet on the same nodes.
HOLD = 4
REPORT = ('sh -c \'echo "{\\"args\\": \\"$*\\", \\"element\\": $SLURM_ARRAY_TASK_ID, \\"at\\": $(date +%s.%N), '
          f'\\"task\\": $SLURM_RESOLVER_TASK}}"; sleep {HOLD}\' _')


def test_a_sweep_runs_disjoint_clusters_one_per_element(slurm_cluster: dict[str, str], tmp_path: Path) -> None:
    sets = {"nodes": "2", "tasks_per_node": "2", "program": "", "command": REPORT, "format": "shell",
            "sweep": "--lr 0.1;--lr 0.03;--lr 0.01", "output": str(tmp_path / "out-%A_%a"), "python": sys.executable,
            "extra_sbatch": "--nodelist=node1,node2"}
    # Every element tries the same ports on the same nodes (sbatch passes the variable on), two of them at
    # once (each takes half of both nodes' cores): only the launch key keeps them apart.
    env = {**os.environ, "SLURM_RESOLVER_RENDEZVOUS_PORTS": "30101,30102,30103,30104"}
    out = subprocess.run([*CLI, "submit", "sweep", *[f"--set={k}={v}" for k, v in sets.items()], "--wait",
                          "--timeout", "180"], capture_output=True, text=True, timeout=240, env=env)
    assert out.returncode == 0, out.stderr + out.stdout
    assert "array: " in out.stderr and "3 COMPLETED" in out.stderr
    rows = json_objects(out.stdout)
    assert len(rows) == 12, out.stdout
    by_element: dict[int, list[dict[str, Any]]] = {}
    for row in rows:
        by_element.setdefault(int(row["element"]), []).append(row)
    assert sorted(by_element) == [0, 1, 2]
    clusters = []
    for element in range(3):
        tasks = by_element[element]
        assert {t["args"] for t in tasks} == {["--lr 0.1", "--lr 0.03", "--lr 0.01"][element]}
        specs = {json.dumps(t["task"]["cluster"], sort_keys=True) for t in tasks}
        assert len(specs) == 1 and sorted(t["task"]["rank"] for t in tasks) == [0, 1, 2, 3]
        clusters.append(specs.pop())
    addresses = [set(a for job in json.loads(c).values() for a in job) for c in clusters]
    # Every task of an element is up from its report on for HOLD seconds: elements up at the same time
    # must never share an address; one that came after another ended may take its ports again.
    up = [(max(t["at"] for t in by_element[e]), min(t["at"] for t in by_element[e]) + HOLD)
          for e in range(3)]
    at_once = [(a, b) for a in range(3) for b in range(a + 1, 3) if up[a][0] < up[b][1] and up[b][0] < up[a][1]]
    assert at_once, up  # two elements shared both nodes at once ...
    for a, b in at_once:
        assert not addresses[a] & addresses[b], (a, b, addresses)
    assert any(a.endswith(":30102") for a in set().union(*addresses))  # ... and a leader met another's port


def test_an_array_beyond_its_sweep_is_refused_before_submission() -> None:
    out = subprocess.run([*CLI, "render", "sweep", "--set=array=0-5", "--set=sweep=--lr 1;--lr 2"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "beyond the sweep's 2 entries" in out.stderr and "Traceback" not in out.stderr
