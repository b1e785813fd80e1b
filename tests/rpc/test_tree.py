"""The tree of node leaders: its shape, and the deadlines that let failures travel."""

from __future__ import annotations

import pytest

from slurm_resolver.rpc.tree import Tree


@pytest.mark.parametrize("size, fanout", [(1, 8), (2, 8), (9, 8), (10, 3), (4096, 8), (1000, 2), (7, 1)])
def test_every_position_but_the_root_has_one_parent_that_lists_it(size: int, fanout: int) -> None:
    tree = Tree(size, fanout)
    for position in range(size):
        for child in tree.children(position):
            assert tree.parent(child) == position
        assert len(tree.children(position)) <= fanout
    assert sorted(tree.subtree(0)) == list(range(size))
    assert tree.parent(0) is None


def test_deeper_leaders_report_sooner_and_wait_longer() -> None:
    tree = Tree(4096, 8)
    deepest = 4095
    assert tree.height == 4 and tree.depth(deepest) == 4
    assert tree.report_at(deepest) < tree.report_at(1) < tree.report_at(0) < tree.give_up_at(1) < tree.give_up_at(
        deepest) < 1.0


def test_a_tree_needs_a_node_and_a_fanout() -> None:
    with pytest.raises(ValueError):
        Tree(0)
    with pytest.raises(ValueError):
        Tree(3, 0)
