"""Which node each rank runs on: computed from Slurm's layout, or exchanged between ranks.

Slurm's ``block``, ``cyclic`` and ``plane=N`` distributions are computed exactly as Slurm
lays tasks out, from the per-node task counts; every task checks that the host computed
for its own rank is the node it runs on. Other layouts (``arbitrary``, MPI launchers)
are never guessed: the ranks exchange their nodes.
"""

from __future__ import annotations

from collections.abc import Sequence

from .errors import PlacementError
from .launchers.base import Launch

__all__ = ["compute", "block", "cyclic", "plane", "check_own"]


def block(layout: Sequence[tuple[str, int]]) -> tuple[str, ...]:
    """Fill each node in turn.

    >>> block([("n1", 2), ("n2", 1)])
    ('n1', 'n1', 'n2')
    """
    return tuple(node for node, count in layout for _ in range(count))


def plane(layout: Sequence[tuple[str, int]], size: int) -> tuple[str, ...]:
    """Deal ``size`` consecutive ranks to each node in turn, as long as it has room.

    >>> plane([("n1", 4), ("n2", 2)], 2)
    ('n1', 'n1', 'n2', 'n2', 'n1', 'n1')
    """
    left = [count for _, count in layout]
    hosts: list[str] = []
    while any(left):
        for i, (node, _) in enumerate(layout):
            take = min(size, left[i])
            hosts.extend([node] * take)
            left[i] -= take
    return tuple(hosts)


def cyclic(layout: Sequence[tuple[str, int]]) -> tuple[str, ...]:
    """Deal one rank to each node in turn, skipping nodes that are full.

    >>> cyclic([("n1", 3), ("n2", 1)])
    ('n1', 'n2', 'n1', 'n1')
    """
    return plane(layout, 1)


def compute(launch: Launch) -> tuple[str, ...] | None:
    """The node of every rank, or None when only an exchange can tell."""
    layout = launch.layout
    if not layout or launch.world_size is None or sum(c for _, c in layout) != launch.world_size:
        return None
    if all(count == 1 for _, count in layout):
        return tuple(node for node, _ in layout)
    kind = launch.distribution
    if kind == "block":
        return block(layout)
    if kind == "cyclic":
        return cyclic(layout)
    if kind.startswith("plane="):
        return plane(layout, int(kind.partition("=")[2]))
    return None


def check_own(hosts: Sequence[str], launch: Launch) -> None:
    """Fail when the host computed for the calling rank is not the node it runs on."""
    if launch.rank is None or launch.node is None:
        return
    if hosts[launch.rank] != launch.node:
        raise PlacementError(
            f"rank {launch.rank} runs on {launch.node}, but Slurm's {launch.distribution} layout "
            f"{list(launch.layout)} puts it on {hosts[launch.rank]}",
            "launch with srun --mpi=pmix (or pmi2) so that ranks exchange their nodes, "
            "or use the block distribution (-m block)",
        )
