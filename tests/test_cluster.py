"""The resolved cluster: each task as a value, how messages name it, its ports before and after the bootstrap,
the same cluster as another rank sees it, and the layout the tasks learned."""

from __future__ import annotations

import pytest

from slurm_resolver.errors import ConfigurationError, ResolutionError
from slurm_resolver.placement import Placement
from slurm_resolver.resolution import resolve
from slurm_resolver.rpc.simulation.simulate import srun_environ

CLUSTER = resolve(srun_environ(2, 2, rank=1), resolves=lambda name: True, port_base=29500)


def test_every_task_is_known_with_its_node_port_and_place() -> None:
    task = CLUSTER.task(3)
    assert (task.rank, task.node, task.local_rank, task.port) == (3, "node2", 1, 29501)
    assert CLUSTER.me is not None and CLUSTER.me.rank == 1 and CLUSTER.world_size == 4
    assert CLUSTER.nodes == ("node1", "node1", "node2", "node2") and CLUSTER.local_ranks == (0, 1, 0, 1)
    assert CLUSTER.label(2) == "worker:2 (rank 2) on node2" and CLUSTER.job_of(2) == "worker"
    assert CLUSTER.rank_of("worker", 3) == 3


@pytest.mark.parametrize("rank", [-1, 4, True, "1"])
def test_a_rank_outside_the_cluster_is_refused_naming_the_range(rank: object) -> None:
    with pytest.raises(ConfigurationError, match="ranks are 0-3"):
        CLUSTER.task(rank)  # type: ignore[arg-type]


def test_bound_ports_replace_the_planned_ones_and_must_cover_every_task() -> None:
    done = CLUSTER.with_ports([40000, 40001, 40002, 40003], [41000, 41001, 41002, 41003])
    assert done.ports == (40000, 40001, 40002, 40003) and done.task(2).spare_port == 41002
    assert done.spec().as_dict()["worker"][3].endswith(":40003") and CLUSTER.ports == (29500, 29501, 29500, 29501)
    with pytest.raises(ResolutionError, match="3 ports for a cluster of 4 tasks"):
        CLUSTER.with_ports([1, 2, 3], [1, 2, 3])


def test_a_ranks_server_is_found_by_one_rule_once_bootstrapped() -> None:
    """Every call to a task (the watch, its probes, Stacks) finds its server at its node's address and bound
    port, as its `Task` says; before the bootstrap there is none, said with the fix."""
    done = CLUSTER.with_ports([40000, 40001, 40002, 40003], [41000, 41001, 41002, 41003])
    assert [done.endpoint(r) for r in range(4)] == [(done.task(r).host, done.task(r).port) for r in range(4)]
    assert done.endpoint(3) == (done.task(3).host, 40003)
    with pytest.raises(ConfigurationError, match="not bootstrapped") as info:
        CLUSTER.endpoint(0)
    assert "bootstrap()" in str(info.value)


def test_another_rank_sees_the_same_cluster_from_its_own_task() -> None:
    other = CLUSTER.as_rank(2)
    assert other.rank == 2 and other.me is not None and other.me.node == "node2" and other.spec() == CLUSTER.spec()


def test_copies_of_a_cluster_skip_no_check() -> None:
    """`Cluster._evolve` and `as_rank` copy fields past the constructor (the simulation's bytecodes, issue 40
    item 6): that is the constructor's work only while neither type checks anything when made."""
    from slurm_resolver.cluster import Cluster
    from slurm_resolver.launchers.base import Launch

    assert not hasattr(Cluster, "__post_init__") and not hasattr(Launch, "__post_init__")
    other = CLUSTER.as_rank(2)
    assert other.launch.rank == 2 and other.launch.distribution is CLUSTER.launch.distribution


def test_a_learned_layout_must_keep_slurms_nodes_and_counts() -> None:
    learned = Placement(CLUSTER.placement.nodes, CLUSTER.placement.counts, ("node1", "node2", "node1", "node2"))
    assert CLUSTER.with_placement(learned).nodes == ("node1", "node2", "node1", "node2")
    with pytest.raises(ResolutionError, match="disagrees with Slurm's node list"):
        CLUSTER.with_placement(Placement(("node1", "node3"), (2, 2)))


def test_describe_is_plain_data() -> None:
    described = CLUSTER.describe()
    assert described["rank"] == 1 and described["world_size"] == 4 and described["node"] == "node1"
    assert described["cluster"] == {"worker": [f"{h}:{p}" for h, p in zip(
        [CLUSTER.hosts["node1"]] * 2 + [CLUSTER.hosts["node2"]] * 2, [29500, 29501, 29500, 29501])]}
