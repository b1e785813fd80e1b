"""Heterogeneous steps whose layout the environment does not tell: the tasks learn it from each other.

Three emulated nodes on this host (127.0.0.1-3, names that resolve to themselves). Component 0
runs 3 tasks on the first two nodes with a distribution nobody is told (cyclic here: ranks 0
and 2 on the first node, 1 on the second); component 1 runs 2 tasks on the third node.
"""

from __future__ import annotations

from typing import Any

import pytest

from slurm_resolver import SlurmClusterResolver
from slurm_resolver.errors import PlacementError
from slurm_resolver.resolution import resolve
from slurm_resolver.rpc.bootstrap import bootstrap
from slurm_resolver.rpc.bootstrapped import Bootstrapped

from ..conftest import in_threads

NODES = ("127.0.0.1", "127.0.0.2", "127.0.0.3")
TRUTH = ("127.0.0.1", "127.0.0.2", "127.0.0.1", "127.0.0.3", "127.0.0.3")  # the node of each rank


def env(rank: int, step: str = "0") -> dict[str, str]:
    node = TRUTH[rank]
    gtids = ",".join(str(r) for r, n in enumerate(TRUTH) if n == node)
    return {"SLURM_JOB_ID": "88", "SLURM_STEP_ID": step, "SLURM_PROCID": str(rank),
            "SLURM_LOCALID": str(gtids.split(",").index(str(rank))), "SLURMD_NODENAME": node,
            "SLURM_NODEID": str(NODES.index(node)), "SLURM_GTIDS": gtids, "SLURM_STEP_NUM_TASKS": "5",
            "SLURM_STEP_NODELIST": ",".join(NODES), "SLURM_STEP_TASKS_PER_NODE": "2,1,2",
            "SLURM_DISTRIBUTION": "block",  # the step's: neither component's
            "SLURM_HET_SIZE": "2", "SLURM_JOB_NODELIST_HET_GROUP_0": ",".join(NODES[:2]),
            "SLURM_JOB_NODELIST_HET_GROUP_1": NODES[2], "CUDA_VISIBLE_DEVICES": ""}


def every_task(run: Any) -> list[Any]:
    return in_threads(run, len(TRUTH))


def test_the_layout_is_not_guessed_where_nobody_can_learn_it() -> None:
    with pytest.raises(PlacementError, match="het component 0 of this step runs several tasks") as info:
        resolve(env(0), exchange="none", resolves=lambda n: True)
    assert "slurm_resolver.bootstrap()" in str(info.value.hint)


def test_bootstrap_learns_the_layout_in_its_own_exchange() -> None:
    results = every_task(lambda rank: bootstrap(environ=env(rank, "1"), timeout=20))
    try:
        assert all(isinstance(r, Bootstrapped) for r in results), results
        for r in results:
            assert r.cluster.placement.exact and r.cluster.nodes == TRUTH
            assert r.me.node == TRUTH[r.rank]
        assert len({str(r.cluster_spec().as_dict()) for r in results}) == 1
    finally:
        for r in results:
            if isinstance(r, Bootstrapped):
                r.stop(0)


def test_the_resolver_learns_it_too_and_packs_jobs_by_component() -> None:
    results = every_task(lambda rank: SlurmClusterResolver(jobs=["ps", "worker"], environ=env(rank, "2"),
                                                           check_port=False, auto_set_gpu=False))
    assert all(isinstance(r, SlurmClusterResolver) for r in results), results
    for rank, r in enumerate(results):
        assert r.cluster.nodes == TRUTH and r.cluster.placement.exact
        assert r.get_task_info() == (("ps", rank) if rank < 3 else ("worker", rank - 3))
    assert results[0].cluster_spec().as_dict() == {
        "ps": ["127.0.0.1:8888", "127.0.0.2:8888", "127.0.0.1:8889"], "worker": ["127.0.0.3:8888", "127.0.0.3:8889"]}
