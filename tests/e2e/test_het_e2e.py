"""Heterogeneous steps on the real cluster: each component laid out on its own, learned where needed."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ..conftest import json_objects, sbatch_wait

pytestmark = pytest.mark.slurm

BOOTSTRAP = textwrap.dedent("""
    import json, os
    from slurm_resolver import bootstrap
    b = bootstrap(timeout=60)
    print(json.dumps({"rank": b.rank, "truth_rank": int(os.environ["SLURM_PROCID"]), "node": b.me.node,
                      "truth_node": os.environ["SLURMD_NODENAME"], "nodes": list(b.cluster.nodes),
                      "spec": b.cluster_spec().as_dict()}), flush=True)
    b.stop()
""")

RESOLVER = textwrap.dedent("""
    import json, os
    from slurm_resolver import SlurmClusterResolver
    r = SlurmClusterResolver(jobs=["ps", "worker"], check_port=False, auto_set_gpu=False)
    print(json.dumps({"rank": r.cluster.rank, "truth_rank": int(os.environ["SLURM_PROCID"]),
                      "node": r.cluster.me.node, "truth_node": os.environ["SLURMD_NODENAME"],
                      "nodes": list(r.cluster.nodes), "task": r.get_task_info(),
                      "spec": r.cluster_spec().as_dict()}), flush=True)
""")

SHAPES = ["-N1 -n2 : -N1 -n1", "-N2 -n4 -m cyclic : -N1 -n2", "-N2 -n3 : -N2 -n4 -m cyclic"]


def agreed(rows: list[dict[str, Any]], tasks: int) -> None:
    assert len(rows) == tasks, rows
    truth = [r["truth_node"] for r in sorted(rows, key=lambda r: r["truth_rank"])]
    for row in rows:
        assert row["rank"] == row["truth_rank"] and row["node"] == row["truth_node"]
        assert row["nodes"] == truth  # every task knows where every other runs
    assert len({str(r["spec"]) for r in rows}) == 1


@pytest.mark.parametrize("shape", SHAPES)
def test_bootstrap_in_mixed_het_steps(run_tasks: Callable[..., list[dict[str, Any]]], shape: str) -> None:
    rows = run_tasks(["srun", *shape.split()], BOOTSTRAP)
    agreed(rows, sum(int(p[2:]) for p in shape.split() if p.startswith("-n")))


@pytest.mark.parametrize("shape", SHAPES)
def test_the_resolver_in_mixed_het_steps_packs_jobs_by_component(run_tasks: Callable[..., list[dict[str, Any]]],
                                                                   shape: str) -> None:
    rows = run_tasks(["srun", *shape.split()], RESOLVER)
    counts = [int(p[2:]) for p in shape.split() if p.startswith("-n")]
    agreed(rows, sum(counts))
    for row in rows:
        job, index = row["task"]
        assert (job, index) == (("ps", row["rank"]) if row["rank"] < counts[0] else ("worker", row["rank"] - counts[0]))


def test_sbatch_hetjob_with_several_tasks_per_node(slurm_cluster: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "task.py").write_text(BOOTSTRAP)
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/bash\nsrun --het-group=0,1 {sys.executable} {tmp_path}/task.py\n")
    sbatch_wait(script, "-N2", "--ntasks-per-node=2", ":", "-N1", "-n2", "-o", str(tmp_path / "out"))
    agreed(json_objects((tmp_path / "out").read_text()), 6)


def test_a_lone_show_says_how_to_learn_the_layout(run_tasks: Callable[..., list[dict[str, Any]]]) -> None:
    import subprocess

    out = subprocess.run(["srun", "-N2", "-n4", "-m", "cyclic", ":", "-N1", "-n1", sys.executable, "-m",
                          "slurm_resolver", "show", "--exchange", "none"], capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "het component 0 of this step runs several tasks" in out.stderr
    assert "slurm_resolver.bootstrap()" in out.stderr
