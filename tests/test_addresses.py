"""Node addresses: a node's own name where names resolve, Slurm's NodeAddr (asked once) where they do not;
the same rule for a task of the job and for a client outside it."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from slurm_resolver.addresses import abridged, address_map, node_address
from slurm_resolver.errors import AddressError

NODES = ["node1", "node1", "node2", "node3"]


class Slurm:
    """Answers NodeAddr questions and counts them."""

    def __init__(self, known: dict[str, str]) -> None:
        self.known = known
        self.asked: list[list[str]] = []

    def __call__(self, names: Sequence[str]) -> dict[str, str]:
        self.asked.append(list(names))
        return {n: self.known[n] for n in names if n in self.known}


def test_names_that_resolve_are_their_own_addresses_without_asking_slurm() -> None:
    slurm = Slurm({})
    hosts = address_map(NODES, {"node1": True}, slurm)
    assert [hosts[n] for n in NODES] == NODES and slurm.asked == []


def test_names_that_do_not_resolve_are_asked_of_slurm_once_for_all() -> None:
    slurm = Slurm({"node1": "10.0.0.1", "node2": "10.0.0.2", "node3": "10.0.0.3"})
    hosts = address_map(NODES, {"node1": False}, slurm)
    assert [hosts[n] for n in NODES] == ["10.0.0.1", "10.0.0.1", "10.0.0.2", "10.0.0.3"]
    assert slurm.asked == [["node1", "node2", "node3"]]  # the unchecked ones too: one naming scheme


@pytest.mark.parametrize("known", [{}, {"node1": "node1"}], ids=["no NodeAddr", "NodeAddr is the name"])
def test_a_node_without_any_address_is_named_with_the_fix(known: dict[str, str]) -> None:
    with pytest.raises(AddressError, match=r"node node1 has no reachable address") as info:
        address_map(["node1"], {"node1": False}, Slurm(known))
    assert "/etc/hosts" in (info.value.hint or "")


def test_messages_show_a_bounded_number_of_items() -> None:
    assert abridged([f"n{i}" for i in range(10_000)]) == "n0, n1, n2, n3, n4, n5, n6, n7 and 9992 more"


# A site whose Slurm reaches its nodes on one network (NodeAddr) while their names resolve to another.
ELSEWHERE = {"node1": "10.1.0.1", "node2": "10.1.0.2", "node3": "10.1.0.3"}


@pytest.mark.parametrize(("resolving", "expected"), [
    (True, "node1"),  # the name: the tasks bind its address, whatever NodeAddr says
    (False, "10.1.0.1"),  # Slurm's NodeAddr, where the name does not resolve
], ids=["name resolves", "name does not resolve"])
def test_a_client_outside_the_job_finds_a_node_where_the_jobs_tasks_are(resolving: bool, expected: str) -> None:
    """``slurm-resolver stacks`` (node_address) and the bootstrap's map (address_map, from the tasks' checks)
    give the same address: one rule."""
    slurm = Slurm(ELSEWHERE)
    outside = node_address("node1", resolves=lambda name: resolving, node_addresses=slurm)
    inside = address_map(NODES, {"node1": resolving, "node2": resolving}, Slurm(ELSEWHERE))
    assert outside == inside["node1"] == expected
    assert slurm.asked == ([] if resolving else [["node1"]])


def test_a_client_is_told_of_a_node_without_any_address() -> None:
    with pytest.raises(AddressError, match=r"node node9 has no reachable address"):
        node_address("node9", resolves=lambda name: False, node_addresses=Slurm(ELSEWHERE))
