"""``srun -m arbitrary`` on the real cluster, ranks out of node order (node2, node1, node2): the host file
read where the tasks can read it, the layout learned from every task where there is none."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .test_het_e2e import BOOTSTRAP

pytestmark = pytest.mark.slurm

TRUTH = ["node2", "node1", "node2"]

RESOLVER = textwrap.dedent("""
    import json, os
    from slurm_resolver import SlurmClusterResolver
    r = SlurmClusterResolver(check_port=False, auto_set_gpu=False)
    print(json.dumps({"rank": r.cluster.rank, "truth_rank": int(os.environ["SLURM_PROCID"]),
                      "node": r.cluster.me.node, "truth_node": os.environ["SLURMD_NODENAME"],
                      "nodes": list(r.cluster.nodes), "spec": r.cluster_spec().as_dict()}), flush=True)
""")


def agreed(rows: list[dict[str, Any]]) -> None:
    assert len(rows) == 3, rows
    for row in rows:
        assert row["rank"] == row["truth_rank"] and row["node"] == row["truth_node"] == TRUTH[row["rank"]]
        assert row["nodes"] == TRUTH  # every task knows where every other runs
    assert rows[0]["spec"]["worker"][0].startswith("node2:")  # rank 0 is on node2
    assert len({str(r["spec"]) for r in rows}) == 1


@pytest.mark.parametrize("code", [BOOTSTRAP, RESOLVER], ids=["bootstrap", "resolver"])
def test_a_host_file_with_ranks_out_of_node_order(run_tasks: Callable[..., list[dict[str, Any]]],
                                                  monkeypatch: pytest.MonkeyPatch, tmp_path: Path, code: str) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("\n".join(TRUTH) + "\n")
    monkeypatch.setenv("SLURM_HOSTFILE", str(hosts))
    agreed(run_tasks(["srun", "-m", "arbitrary", "-n3"], code))


@pytest.mark.parametrize("code", [BOOTSTRAP, RESOLVER], ids=["bootstrap", "resolver"])
def test_without_a_host_file_the_tasks_learn_the_layout(run_tasks: Callable[..., list[dict[str, Any]]],
                                                        monkeypatch: pytest.MonkeyPatch, code: str) -> None:
    monkeypatch.delenv("SLURM_HOSTFILE", raising=False)
    agreed(run_tasks(["srun", "-m", "arbitrary", "-w", ",".join(TRUTH), "-n3"], code))
