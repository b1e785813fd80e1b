"""Launchers below srun on the real cluster: one srun task a node runs torchrun, which starts the workers.

Each worker resolves (SlurmClusterResolver) and bootstraps, and prints what it got next to
torchrun's and Slurm's ground truth: every worker must be a task of its own (its rank, its node,
a port of its own) and all must agree on one cluster. A worker spawned below the task without a
known launcher is refused, on every worker, in one line.
"""

from __future__ import annotations

import socket
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slurm

Run = Callable[..., list[dict[str, Any]]]

WORKER = textwrap.dedent("""
    import json, os
    import slurm_resolver
    resolver = slurm_resolver.SlurmClusterResolver(check_port=False, auto_set_gpu=False)
    b = slurm_resolver.bootstrap(timeout=60)
    print(json.dumps({
        "rank": b.rank, "world_size": b.world_size, "node": b.me.node, "address": b.me.address,
        "local_rank": b.me.local_rank, "cluster": b.cluster_spec().as_dict(),
        "resolved": resolver.cluster_spec().as_dict(), "task": list(resolver.get_task_info()),
        "launcher": b.cluster.launcher,
        "truth_rank": int(os.environ["RANK"]), "truth_local": int(os.environ["LOCAL_RANK"]),
        "truth_node": os.environ["SLURMD_NODENAME"], "truth_world": int(os.environ["WORLD_SIZE"])}), flush=True)
    b.stop()
""")

TORCHRUN = str(Path(sys.executable).with_name("torchrun"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def torchrun_per_node(nodes: int, workers: int) -> list[str]:
    """srun's one task a node runs torchrun; the first node hosts its c10d rendezvous (told with is_host:
    the test cluster's nodes share one host name, which torchrun's own guess reads)."""
    script = (f"exec {TORCHRUN} --nnodes={nodes} --nproc-per-node={workers} --rdzv-backend=c10d "
              f'--rdzv-endpoint=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1):{free_port()} '
              '--rdzv-conf=is_host=$((SLURM_NODEID == 0)) --no-python "$@"')
    return ["srun", f"-N{nodes}", "--ntasks-per-node=1", "bash", "-c", script, "torchrun"]


def check(rows: list[dict[str, Any]], world: int) -> None:
    assert len(rows) == world, rows
    assert len({str(r["cluster"]) for r in rows}) == 1 and len({str(r["resolved"]) for r in rows}) == 1
    assert len({r["address"] for r in rows}) == world  # a port of its own each
    for row in rows:
        assert row["launcher"] == "torchrun" and row["world_size"] == row["truth_world"] == world
        assert (row["rank"], row["local_rank"], row["node"]) == (row["truth_rank"], row["truth_local"],
                                                                 row["truth_node"])
        assert row["address"].startswith(row["truth_node"] + ":")
        assert row["task"] == ["worker", row["truth_rank"]]
        assert row["resolved"]["worker"][row["rank"]].startswith(row["truth_node"] + ":")


def test_torchrun_on_several_nodes(run_tasks: Run) -> None:
    rows = run_tasks(torchrun_per_node(2, 2), WORKER, timeout=240)
    check(rows, 4)
    assert sorted({r["node"] for r in rows}) == ["node1", "node2"]


def test_torchrun_standalone_on_one_node(run_tasks: Run) -> None:
    rows = run_tasks(["srun", "-N1", "-n1", TORCHRUN, "--standalone", "--nproc-per-node=3", "--no-python"], WORKER,
                     timeout=240)
    check(rows, 3)
    assert rows[0]["cluster"] == {"worker": [f"{rows[0]['node']}:{port}" for port in _ports(rows)]}


def _ports(rows: list[dict[str, Any]]) -> list[str]:
    return [r["address"].rpartition(":")[2] for r in rows]


REFUSED = textwrap.dedent("""
    import json, os
    import slurm_resolver
    try:
        slurm_resolver.bootstrap(timeout=30)
    except slurm_resolver.SlurmResolverError as exc:
        print(json.dumps({"truth_rank": int(os.environ["RANK"]), "error": exc.one_line()}), flush=True)
    else:
        print(json.dumps({"truth_rank": int(os.environ["RANK"]), "error": None}), flush=True)
""")


def test_two_torchrun_agents_on_a_node_are_refused_on_every_worker(run_tasks: Run) -> None:
    script = (f"exec {TORCHRUN} --nnodes=2 --nproc-per-node=2 --rdzv-backend=c10d "
              f"--rdzv-endpoint=$(hostname -s 2>/dev/null || echo localhost):{free_port()} "
              '--rdzv-conf=is_host=$((SLURM_LOCALID == 0)) --no-python "$@"')
    rows = run_tasks(["srun", "-N1", "-n2", "bash", "-c", script, "torchrun"], REFUSED, timeout=240)
    assert len(rows) == 4 and all(r["error"] for r in rows), rows
    for row in rows:
        assert "torchrun runs 2 times on" in row["error"] and "--ntasks-per-node=1" in row["error"]


SPAWNER = textwrap.dedent("""
    import json, multiprocessing, os

    def worker(local):
        os.environ["LOCAL_RANK"] = str(local)  # as Lightning does for the devices it spawns
        import slurm_resolver
        try:
            slurm_resolver.SlurmClusterResolver(check_port=False)
        except slurm_resolver.SlurmResolverError as exc:
            print(json.dumps({"truth_rank": local, "error": exc.one_line()}), flush=True)
        else:
            print(json.dumps({"truth_rank": local, "error": None}), flush=True)

    if __name__ == "__main__":
        processes = [multiprocessing.get_context("spawn").Process(target=worker, args=(i,)) for i in (1, 2)]
        for p in processes:
            p.start()
        for p in processes:
            p.join()
""")


def test_workers_spawned_below_the_task_are_refused_on_every_worker(run_tasks: Run) -> None:
    rows = run_tasks(["srun", "-N1", "-n1"], SPAWNER, timeout=120)
    assert len(rows) == 2 and all(r["error"] for r in rows), rows
    for row in rows:
        assert f"LOCAL_RANK={row['truth_rank']}, but SLURM_LOCALID=0" in row["error"]
        assert "torchrun" in row["error"] and "\n" not in row["error"]


def test_torchrun_started_by_mpirun_is_refused_on_every_worker(run_tasks: Run) -> None:
    """mpirun's rank is torchrun's agent: both its workers inherit it, so both are refused, naming the fix."""
    rows = run_tasks(["salloc", "-N1", "-n1", "mpirun", "--allow-run-as-root", "-np", "1", TORCHRUN, "--standalone",
                      "--nproc-per-node=2", "--no-python"], REFUSED, timeout=240)
    assert len(rows) == 2 and all(r["error"] for r in rows), rows
    for row in rows:
        assert "torchrun started this worker below the openmpi rank" in row["error"] and "srun -N" in row["error"]
