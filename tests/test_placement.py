"""Placement: Slurm's distributions computed as Slurm computes them, and each rank's node."""

from __future__ import annotations

from dataclasses import replace

import pytest

from slurm_resolver.errors import PlacementError
from slurm_resolver.launchers.base import Launch
from slurm_resolver.layout import BLOCK, Distribution
from slurm_resolver.placement import (
    Placement,
    block,
    check_own,
    compute,
    cyclic,
    describe,
    plane,
    provisional,
    unknown,
)


@pytest.mark.parametrize("counts, expected_block, expected_cyclic", [
    ((1, 1, 1), "abc", "abc"),
    ((2, 2), "aabb", "abab"),
    ((3, 1), "aaab", "abaa"),
    ((1, 3), "abbb", "abbb"),
    ((2, 1, 3), "aabccc", "abcacc"),
])
def test_block_and_cyclic(counts: tuple[int, ...], expected_block: str, expected_cyclic: str) -> None:
    nodes = "abc"[:len(counts)]
    assert "".join(block(nodes, counts)) == expected_block
    assert "".join(cyclic(nodes, counts)) == expected_cyclic


@pytest.mark.parametrize("counts, size, expected", [((4, 2), 2, "aabbaa"), ((3, 3), 2, "aabbab"), ((5,), 3, "aaaaa")])
def test_plane(counts: tuple[int, ...], size: int, expected: str) -> None:
    assert "".join(plane("ab"[:len(counts)], counts, size)) == expected


def test_a_block_placement_keeps_no_per_rank_list() -> None:
    where = Placement(("n1", "n2", "n3"), (2, 1, 3))
    assert where.hosts is None and where.world_size == 6
    assert [where.node_of(r) for r in range(6)] == ["n1", "n1", "n2", "n3", "n3", "n3"]
    assert [where.local_rank(r) for r in range(6)] == [0, 1, 0, 0, 1, 2]
    assert where.group(4) == ("n3", range(3, 6)) and where.all_hosts == ("n1", "n1", "n2", "n3", "n3", "n3")
    uniform = Placement(("n1", "n2"), (4, 4))
    assert uniform.node_of(5) == "n2" and uniform.local_rank(5) == 1 and list(uniform.ranks_on(1)) == [4, 5, 6, 7]


def test_an_exchanged_placement_groups_ranks_by_node() -> None:
    where = Placement.from_hosts(["b", "a", "b", "a"])
    assert where.nodes == ("b", "a") and where.counts == (2, 2)
    assert where.group(3) == ("a", [1, 3]) and where.local_ranks == (0, 0, 1, 1) and where.node_index(1) == 1


@pytest.mark.parametrize("rank", [-1, 6, 100])
def test_a_rank_outside_the_job_names_the_range(rank: int) -> None:
    with pytest.raises(IndexError, match=f"rank {rank} is not in a job of 6 tasks \\(ranks 0-5\\)"):
        Placement(("n1", "n2"), (3, 3)).node_of(rank)


def test_compute_follows_the_distribution() -> None:
    def launch(distribution: str, counts: tuple[int, ...] = (2, 2)) -> Launch:
        return Launch("srun", sum(counts), 1, ("a", "b"), counts, node="b",
                      distribution=Distribution.parse(distribution), is_task=True)

    assert compute(launch("block")).all_hosts == ("a", "a", "b", "b")  # type: ignore[union-attr]
    assert compute(launch("cyclic")).all_hosts == ("a", "b", "a", "b")  # type: ignore[union-attr]
    assert compute(launch("plane=2")).all_hosts == ("a", "a", "b", "b")  # type: ignore[union-attr]
    assert compute(launch("arbitrary")) is None
    assert compute(launch("cyclic", (1, 1))) is not None  # one task per node: block, cyclic and plane agree
    assert compute(launch("arbitrary", (1, 1))) is None  # but -m arbitrary -w b,a puts rank 0 on b


def test_an_arbitrary_layout_comes_from_its_host_file_else_an_exchange_learns_it() -> None:
    listed = Launch("srun", 3, 1, ("a", "b"), (1, 2), node="a", distribution=Distribution.parse("arbitrary"),
                    hosts=("b", "a", "b"), node_index=0, gtids=(1,), is_task=True)
    where = compute(listed)
    assert where is not None and where.exact and where.all_hosts == ("b", "a", "b") and where.nodes == ("a", "b")
    guess = provisional(replace(listed, hosts=()))
    assert guess is not None and not guess.exact and guess.node_of(1) == "a" and guess.counts == (1, 2)
    assert unknown(listed) == "srun -m arbitrary, with no host file (SLURM_HOSTFILE) this task can read"


def test_check_own_names_the_rank_its_node_and_the_layout() -> None:
    wrong = Launch("srun", 4, 1, ("n1", "n2"), (2, 2), node="n2", distribution=BLOCK, is_task=True)
    with pytest.raises(PlacementError, match=r"rank 1 runs on n2, but Slurm's block layout \(n\[1-2\] tasks 2\(x2\)\)"):
        check_own(wrong, compute(wrong))  # type: ignore[arg-type]


def test_describe_stays_short() -> None:
    assert describe([("n1", 3), ("n2", 1)]) == "n[1-2] tasks 3,1"
    assert len(describe([(f"x{i}y", 1) for i in range(10_000)])) <= 200
