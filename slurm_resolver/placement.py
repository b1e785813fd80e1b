"""Which node each rank runs on: computed from Slurm's layout, or exchanged between ranks.

Slurm's ``block``, ``cyclic`` and ``plane=N`` distributions are computed exactly as Slurm
lays tasks out, from the per-node task counts; every task checks that the host computed
for its own rank is the node it runs on. Other layouts (``arbitrary``, MPI launchers)
are never guessed: the ranks exchange their nodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain, repeat

from .errors import PlacementError
from .hostlists import collapse, collapse_counts
from .launchers.base import Launch

__all__ = ["compute", "block", "cyclic", "plane", "check_own", "host_of", "describe"]


def describe(layout: Sequence[tuple[str, int]], limit: int = 200) -> str:
    """A short text for a layout, as Slurm prints it: ``node[1-2] tasks 3,1``.

    >>> describe([("n1", 3), ("n2", 1)])
    'n[1-2] tasks 3,1'
    """
    nodes = collapse([n for n, _ in layout]) if len({n for n, _ in layout}) == len(layout) \
        else ",".join(n for n, _ in layout)
    text = f"{nodes} tasks {collapse_counts([c for _, c in layout])}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def block(nodes: Sequence[str], counts: Sequence[int]) -> tuple[str, ...]:
    """Fill each node in turn.

    >>> block(["n1", "n2"], [2, 1])
    ('n1', 'n1', 'n2')
    """
    if counts and min(counts) == max(counts):  # uniform: one C-level slice per local index
        hosts: list[str] = [""] * (len(nodes) * counts[0])
        for i in range(counts[0]):
            hosts[i::counts[0]] = nodes
        return tuple(hosts)
    return tuple(chain.from_iterable(map(repeat, nodes, counts)))


def plane(nodes: Sequence[str], counts: Sequence[int], size: int) -> tuple[str, ...]:
    """Deal ``size`` consecutive ranks to each node in turn, as long as it has room.

    >>> plane(["n1", "n2"], [4, 2], 2)
    ('n1', 'n1', 'n2', 'n2', 'n1', 'n1')
    """
    left = list(counts)
    hosts: list[str] = []
    while any(left):
        for i, node in enumerate(nodes):
            take = min(size, left[i])
            hosts.extend([node] * take)
            left[i] -= take
    return tuple(hosts)


def cyclic(nodes: Sequence[str], counts: Sequence[int]) -> tuple[str, ...]:
    """Deal one rank to each node in turn, skipping nodes that are full.

    >>> cyclic(["n1", "n2"], [3, 1])
    ('n1', 'n2', 'n1', 'n1')
    """
    return plane(nodes, counts, 1)


def compute(launch: Launch) -> tuple[str, ...] | None:
    """The node of every rank, or None when only an exchange can tell."""
    nodes, counts = launch.nodes, launch.counts
    if not nodes or launch.world_size is None or sum(counts) != launch.world_size:
        return None
    if max(counts) == 1:
        return nodes
    kind = launch.distribution
    if kind == "block":
        return block(nodes, counts)
    if kind == "cyclic":
        return cyclic(nodes, counts)
    if kind.startswith("plane="):
        return plane(nodes, counts, int(kind.partition("=")[2]))
    return None


def host_of(launch: Launch, rank: int) -> str:
    """The node of ``rank`` in a block layout, without building the per-rank list.

    >>> host_of(Launch("srun", 3, 2, nodes=("n1", "n2"), counts=(2, 1)), 2)
    'n2'
    """
    first = 0
    for node, count in zip(launch.nodes, launch.counts):
        if rank < first + count:
            return node
        first += count
    raise IndexError(rank)


def check_own(launch: Launch, hosts: Sequence[str] | None = None) -> None:
    """Fail when the host computed for the calling rank is not the node it runs on.

    ``hosts`` is the node of every rank; None for a block layout.
    """
    if launch.rank is None or launch.node is None:
        return
    computed = host_of(launch, launch.rank) if hosts is None else hosts[launch.rank]
    if computed != launch.node:
        raise PlacementError(
            f"rank {launch.rank} runs on {launch.node}, but Slurm's {launch.distribution} layout "
            f"({describe(launch.layout)}) puts it on {computed}",
            "launch with srun --mpi=pmix (or pmi2) so that ranks exchange their nodes, "
            "or use the block distribution (-m block)",
        )
