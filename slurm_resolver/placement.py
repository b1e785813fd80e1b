"""Which node each rank runs on: computed from Slurm's layout, or learned from an exchange.

Slurm's ``block``, ``cyclic`` and ``plane=N`` distributions are computed exactly as Slurm
lays tasks out, from the per-node task counts; every task checks that the host computed
for its own rank is the node it runs on. ``arbitrary`` is read from its host file
(``SLURM_HOSTFILE``) where the task can read it. Other layouts (MPI launchers, ``arbitrary``
without a readable host file, het components of several tasks on several nodes) are never
guessed: the ranks exchange their nodes
([`Placement.from_hosts()`][slurm_resolver.placement.Placement.from_hosts]).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from itertools import accumulate, chain, repeat

from .errors import PlacementError
from .hostlists import DistinctHosts, collapse, collapse_counts
from .launchers.base import Launch
from .layout import Spread, same_count, total_tasks
from .values import PublicValue, fill

__all__ = ["Placement", "compute", "provisional", "block", "cyclic", "plane", "check_own", "describe", "unknown"]


def describe(layout: Sequence[tuple[str, int]], limit: int = 200) -> str:
    """A short text for a layout, as Slurm prints it: ``node[1-2] tasks 3,1``.

    >>> describe([("n1", 3), ("n2", 1)])
    'n[1-2] tasks 3,1'
    """
    nodes = collapse([n for n, _ in layout])  # in Slurm's order, as the counts
    text = f"{nodes} tasks {collapse_counts([c for _, c in layout])}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Placement(PublicValue, eq=False):
    """The node of every rank.

    Attributes:
        nodes: the distinct nodes, in Slurm's order.
        counts: the number of ranks on each of ``nodes``.
        hosts: the node of every rank; None for a block layout (the ranks fill the
            nodes in order), which is kept as nodes and counts only, so that a
            16,384-task job costs no per-rank work until a per-rank column is asked for.
        exact: False for a provisional placement, where only the caller's node is known
            and the rest is learned in the bootstrap's exchange (heterogeneous steps).
    """

    nodes: tuple[str, ...]
    counts: tuple[int, ...]
    hosts: tuple[str, ...] | None = None
    exact: bool = True

    def __init__(self, nodes: tuple[str, ...], counts: tuple[int, ...], hosts: tuple[str, ...] | None = None,
                 exact: bool = True) -> None:
        fill(self, nodes, counts, hosts, exact)

    @classmethod
    def from_hosts(cls, hosts: Sequence[str]) -> Placement:
        """The placement of ranks whose nodes are ``hosts`` (in rank order), e.g. from an exchange.

        >>> Placement.from_hosts(["a", "b", "a"]).counts
        (2, 1)
        """
        counts: dict[str, int] = {}
        for host in hosts:
            counts[host] = counts.get(host, 0) + 1
        return cls(tuple(counts), tuple(counts.values()), tuple(hosts))

    @cached_property
    def world_size(self) -> int:
        """Number of ranks."""
        return total_tasks(self.counts, self._same) if self.hosts is None else len(self.hosts)

    @cached_property
    def _same(self) -> int:
        """Tasks on every node where all nodes have as many; else 0."""
        return same_count(self.counts)

    @cached_property
    def most(self) -> int:
        """The most ranks on one node."""
        return self._same or max(self.counts)

    @cached_property
    def _uniform(self) -> int:
        """Tasks on every node of a block layout where all nodes have as many; else 0."""
        return self._same if self.hosts is None else 0

    @property
    def tasks_per_node(self) -> int:
        """Tasks on every node of a block layout where all nodes have as many (ranks ``n * k`` to ``n * k + k - 1``
        on node ``n``); 0 for any other layout."""
        return self._uniform

    @property
    def is_block(self) -> bool:
        """Whether the ranks fill the nodes in order (no per-rank list is kept)."""
        return self.hosts is None

    @cached_property
    def _starts(self) -> list[int]:
        return list(accumulate(self.counts, initial=0))

    @cached_property
    def _ranks_by_node(self) -> dict[str, list[int]]:
        assert self.hosts is not None
        groups: dict[str, list[int]] = {node: [] for node in self.nodes}
        for rank, host in enumerate(self.hosts):
            groups[host].append(rank)
        return groups

    def _check(self, rank: int) -> None:
        if not 0 <= rank < self.world_size:
            raise IndexError(f"rank {rank} is not in a job of {self.world_size} tasks (ranks 0-{self.world_size - 1})")

    def node_index(self, rank: int) -> int:
        """The position in `nodes` of the node of ``rank``."""
        self._check(rank)
        if self._uniform:
            return rank // self._uniform
        if self.hosts is None:
            from bisect import bisect_right  # here: only a block layout of unequal counts needs it

            return bisect_right(self._starts, rank) - 1
        return self._index[self.hosts[rank]]

    @cached_property
    def _index(self) -> dict[str, int]:
        return {node: i for i, node in enumerate(self.nodes)}

    def node_of(self, rank: int) -> str:
        """The node of ``rank``."""
        if self.hosts is None:
            return self.nodes[self.node_index(rank)]
        self._check(rank)
        return self.hosts[rank]

    def ranks_on(self, position: int) -> Sequence[int]:
        """The ranks on the node at ``position`` of `nodes`, in local-rank order."""
        if self._uniform:
            return range(position * self._uniform, (position + 1) * self._uniform)
        if self.hosts is None:
            return range(self._starts[position], self._starts[position + 1])
        return self._ranks_by_node[self.nodes[position]]

    def group(self, rank: int) -> tuple[str, Sequence[int]]:
        """The node of ``rank`` and every rank on that node, in local-rank order."""
        position = self.node_index(rank)
        return self.nodes[position], self.ranks_on(position)

    def local_rank(self, rank: int) -> int:
        """The index of ``rank`` among the ranks on its node."""
        if self._uniform:
            self._check(rank)
            return rank % self._uniform
        if self.hosts is None:
            return rank - self._starts[self.node_index(rank)]
        return self.local_ranks[rank]

    @cached_property
    def all_hosts(self) -> tuple[str, ...]:
        """The node of every rank."""
        return block(self.nodes, self.counts) if self.hosts is None else self.hosts

    @cached_property
    def local_ranks(self) -> tuple[int, ...]:
        """The local rank of every rank."""
        if self.hosts is None:
            return tuple(chain.from_iterable(map(range, self.counts)))
        seen: dict[str, int] = {}
        result = []
        for host in self.hosts:
            index = seen.get(host, 0)
            result.append(index)
            seen[host] = index + 1
        return tuple(result)


def block(nodes: Sequence[str], counts: Sequence[int]) -> tuple[str, ...]:
    """Fill each node in turn.

    >>> block(["n1", "n2"], [2, 1])
    ('n1', 'n1', 'n2')
    """
    if counts and counts.count(counts[0]) == len(counts):  # uniform: one C-level slice per local index
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


def _het(launch: Launch, provisional: bool) -> tuple[str, ...]:
    """The node of every rank of a het step: each component on its own nodes, its tasks
    numbered after the previous component's. A component whose layout depends on a
    distribution Slurm does not tell is laid out block-wise: a placeholder (``provisional``)."""
    hosts: list[str] = []
    for group in launch.groups:
        nodes = [launch.nodes[p] for p in group]
        counts = [launch.counts[p] for p in group]
        if not provisional and len(group) > 1 and max(counts) > 1:
            raise AssertionError("a het component that needs an exchange")  # pragma: no cover - needs_exchange
        hosts.extend(block(nodes, counts))
    return tuple(hosts)


def compute(launch: Launch) -> Placement | None:
    """The placement from the launch's layout, or None when only an exchange can tell."""
    if launch.needs_exchange:
        return None
    if launch.hosts:
        return Placement(launch.nodes, launch.counts, launch.hosts)
    if launch.groups:
        return Placement(launch.nodes, launch.counts, _het(launch, provisional=False))
    nodes, counts = launch.nodes, launch.counts
    spread = launch.distribution.spread
    if (spread is Spread.BLOCK or max(counts) == 1 or len(nodes) == 1) and \
            (isinstance(nodes, DistinctHosts) or len(set(nodes)) == len(nodes)):
        return Placement(nodes, counts)
    if spread is Spread.BLOCK:
        return Placement.from_hosts(block(nodes, counts))
    if spread is Spread.CYCLIC:
        return Placement.from_hosts(cyclic(nodes, counts))
    return Placement.from_hosts(plane(nodes, counts, launch.distribution.plane))


def provisional(launch: Launch) -> Placement | None:
    """A placeholder placement of a step whose layout only an exchange can tell (a het step, or
    ``-m arbitrary`` without its host file): the caller's node exact (its ranks are
    ``SLURM_GTIDS``, or the workers of a launcher below srun), the rest to be learned; None where it
    cannot help."""
    if not launch.learnable or launch.node_index is None or launch.world_size is None \
            or sum(launch.counts) != launch.world_size:
        return None
    hosts = list(_het(launch, provisional=True) if launch.groups else block(launch.nodes, launch.counts))
    own = launch.nodes[launch.node_index]
    for rank in launch.gtids:
        if rank >= len(hosts):
            return None
    mine = set(launch.gtids)
    others = [r for r in range(len(hosts)) if hosts[r] == own and r not in mine]
    movable = [r for r in mine if hosts[r] != own]
    for rank, other in zip(movable, others):  # keep the counts: swap the guess for what Slurm says
        hosts[rank], hosts[other] = own, hosts[rank]
    return Placement(launch.nodes, launch.counts, tuple(hosts), exact=False)


def unknown(launch: Launch) -> str:
    """Why the environment does not tell the step's layout, for messages.

    >>> from slurm_resolver.layout import Distribution
    >>> unknown(Launch("srun", 3, 0, ("n1", "n2"), (1, 2), distribution=Distribution.parse("arbitrary")))
    'srun -m arbitrary, with no host file (SLURM_HOSTFILE) this task can read'
    """
    if launch.below:
        return f"{launch.below}'s workers on several nodes, in {launch.below}'s own order"
    if launch.groups:
        return "a het component with several tasks on each of several nodes"
    if launch.arbitrary:
        return "srun -m arbitrary, with no host file (SLURM_HOSTFILE) this task can read"
    return f"distribution {str(launch.distribution)!r}"


def check_own(launch: Launch, placement: Placement) -> None:
    """Fail when the node computed for the calling rank is not the node it runs on."""
    if launch.rank is None or launch.node is None:
        return
    computed = placement.node_of(launch.rank)
    if computed != launch.node and launch.hosts:
        raise PlacementError(
            f"rank {launch.rank} runs on {launch.node}, but the host file SLURM_HOSTFILE puts it on {computed}: "
            "the file changed since srun read it, or it is not the file srun read",
            "keep the host file as it was at launch, or unset SLURM_HOSTFILE in the tasks so that they learn "
            "the layout from each other")
    if computed != launch.node:
        raise PlacementError(
            f"rank {launch.rank} runs on {launch.node}, but Slurm's {launch.distribution} layout "
            f"({describe(launch.layout)}) puts it on {computed}",
            "launch with srun --mpi=pmix so that ranks exchange their nodes, "
            "or use the block distribution (-m block)",
        )
