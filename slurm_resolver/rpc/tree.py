"""The shape of the bootstrap's tree, each task's place in it, and when each member gives up: pure functions.

Nodes are numbered by their position in Slurm's node order (position 0 holds rank 0).
Each node's leader is its lowest rank; the leaders form a k-ary tree over positions
(the parent of ``p`` is ``(p - 1) // k``), so no server hears from more than ``k`` leaders
and its own node's tasks, whatever the size of the job.

Deadlines are fractions of the round's timeout, measured from when each task started the
round. A leader that still misses contributions reports what it has *earlier* the deeper
it sits, so that its report reaches rank 0 before rank 0 reports; it waits for its
parent's answer *longer* the deeper it sits, so that a failure found above reaches it
before it gives up on its own.
"""

from __future__ import annotations

import enum
from functools import lru_cache
from typing import TYPE_CHECKING

from ..errors import ConfigurationError
from ..values import Value, fill
from .messages import Source

if TYPE_CHECKING:  # pragma: no cover
    from ..cluster import Cluster

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)

DEFAULT_FANOUT = 8


class Tree(Value):
    """A k-ary tree over ``size`` node positions.

    >>> t = Tree(10, 3)
    >>> t.parent(4), list(t.children(1)), t.depth(9), t.height
    (1, [4, 5, 6], 2, 2)
    """

    __slots__ = ("size", "fanout")
    size: int
    fanout: int

    def __init__(self, size: int, fanout: int = DEFAULT_FANOUT) -> None:
        fill(self, size, fanout)
        if self.size < 1 or self.fanout < 1:
            raise ValueError(f"a tree needs at least one node and a fan-out of 1 or more, not {self}")

    def parent(self, position: int) -> int | None:
        """The parent of ``position``; None for the root."""
        return None if position == 0 else (position - 1) // self.fanout

    def children(self, position: int) -> range:
        """The children of ``position``."""
        first = self.fanout * position + 1
        return range(min(first, self.size), min(first + self.fanout, self.size))

    def depth(self, position: int) -> int:
        """The number of edges between ``position`` and the root."""
        depth = 0
        while position:
            position = (position - 1) // self.fanout
            depth += 1
        return depth

    @property
    def height(self) -> int:
        """The depth of the deepest position."""
        return self.depth(self.size - 1)

    def subtree(self, position: int) -> list[int]:
        """``position`` and every position below it, level by level.

        >>> Tree(10, 3).subtree(1)
        [1, 4, 5, 6]
        """
        found: list[int] = []
        level = range(position, position + 1)
        while len(level):
            found.extend(level)
            level = range(min(self.fanout * level[0] + 1, self.size), min(self.fanout * level[-1] + self.fanout + 1,
                                                                           self.size))
        return found

    def report_at(self, position: int) -> float:
        """The fraction of the timeout after which a leader reports an incomplete subtree.

        >>> Tree(100, 3).report_at(0), round(Tree(100, 3).report_at(99), 2)
        (0.8, 0.5)
        """
        return 0.8 - 0.3 * self.depth(position) / max(1, self.height)

    def check_until(self, position: int) -> float:
        """The fraction of the timeout until which a leader's checks of its sources' servers may run:
        a moment past its report, still well before its parent reports (or, at the root, before
        anyone gives up).

        >>> t = Tree(100, 3)
        >>> t.report_at(5) < t.check_until(5) < t.report_at(t.parent(5)), t.check_until(0) < t.give_up_at(1)
        (True, True)
        """
        return self.report_at(position) + min(0.02, 0.1 / max(1, self.height))

    def give_up_at(self, position: int) -> float:
        """The fraction of the timeout after which a leader stops waiting for its parent.

        >>> Tree(100, 3).give_up_at(1) > Tree(100, 3).report_at(0)
        True
        """
        return 0.85 + 0.1 * self.depth(position) / max(1, self.height)


class Plan(Value):
    """Where one task sits in the tree."""

    __slots__ = ("tree", "position", "leader", "sources", "rank")
    tree: Tree
    position: int
    """Its node's position in Slurm's node order."""
    leader: int
    """The rank of its node's leader (the node's lowest rank)."""
    sources: frozenset[Source]
    """Who joins rounds at this task (leaders only): its node's other tasks, and its child nodes'
    leaders (known by their node's position)."""
    rank: int
    """The task itself."""

    def __init__(self, tree: Tree, position: int, leader: int, sources: frozenset[Source], rank: int) -> None:
        fill(self, tree, position, leader, sources, rank)

    @property
    def is_leader(self) -> bool:
        """Whether this task leads its node."""
        return self.rank == self.leader


def plan_of(cluster: Cluster, rank: int, fanout: int) -> Plan:
    """The tree position of ``rank`` in ``cluster``, with a ``fanout``-ary tree of node leaders.

    Only the caller's own node must be known: where the layout is learned in the exchange
    (a provisional placement), its node's ranks are Slurm's ``SLURM_GTIDS``.
    """
    where = cluster.placement
    tree = _tree(len(where.nodes), fanout)
    if where.exact or cluster.launch.node_index is None:
        position = where.node_index(rank)
        local = tuple(where.ranks_on(position))
    else:
        position, local = cluster.launch.node_index, tuple(sorted(cluster.launch.gtids))
    leader = local[0]
    sources = _NOBODY
    if rank == leader:
        sources = frozenset([*map(Source.task, local[1:]), *map(Source.node, tree.children(position))])
    return Plan(tree, position, leader, sources, rank)


_tree = lru_cache(maxsize=16)(Tree)
"""The tree of a size and fan-out, one value shared by every task that asks (a simulation's thousands)."""
_NOBODY: frozenset[Source] = frozenset()
"""The sources of a task that leads nothing, shared (each empty frozenset is an object of 216 bytes)."""


class Checking(enum.Enum):
    """How servers are checked (``verify=``)."""

    ONCE = "once"
    """Every server by one peer: in the tree, by the leader it joins (which verifies the whole table)."""
    ALL = "all"
    """Every pair, after the table."""
    NONE = "none"
    """Nobody."""
    NEXT = "next"
    """Each task its next ranks, after the table (a count of them)."""


VERIFY_WORDS = tuple(how.value for how in Checking if how is not Checking.NEXT)
"""The words of ``verify=`` (a count of next ranks is the other choice)."""
_WORDS = {**{word: Checking(word) for word in VERIFY_WORDS}, "ring": Checking.ONCE}  # once's older name


class Verify(Value):
    """``verify=``: how servers are checked, and for `Checking.NEXT` how many next ranks.

    >>> Verify.parse("ring"), str(Verify.parse(3)), Verify.parse("all").after_table
    (Verify(how=<Checking.ONCE: 'once'>, count=0), '3', True)
    """

    __slots__ = ("how", "count")
    how: Checking
    count: int

    def __init__(self, how: Checking, count: int = 0) -> None:
        fill(self, how, count)

    @classmethod
    def parse(cls, value: object, source: str = "verify") -> Verify:
        """One of `VERIFY_WORDS` (``'ring'`` is ``'once'``'s older name), or a count of next ranks (a
        number, or its digits as the command line gives it); a `ConfigurationError` naming ``source``
        and the words for anything else.

        >>> Verify.parse("2"), Verify.parse("none").how
        (Verify(how=<Checking.NEXT: 'next'>, count=2), <Checking.NONE: 'none'>)
        """
        if isinstance(value, Verify):
            return value
        if isinstance(value, str) and value.isdigit():
            value = int(value)
        if isinstance(value, str) and value in _WORDS:
            return cls(_WORDS[value])
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return cls(Checking.NEXT, value)
        raise ConfigurationError(f"{source}={value!r} is not known",
                                 f"use {', '.join(repr(w) for w in VERIFY_WORDS)} or a count of next ranks")

    @property
    def after_table(self) -> bool:
        """Whether servers are checked after the table, even in the tree (then a last round carries
        the verdict)."""
        return self.how in (Checking.ALL, Checking.NEXT)

    def __str__(self) -> str:
        return str(self.count) if self.how is Checking.NEXT else self.how.value


ONCE = Verify(Checking.ONCE)
"""The default: every server checked once."""


def checked_peers(rank: int, size: int, verify: Verify) -> list[int]:
    """The peers whose servers ``rank`` checks after the table (under MPI, or where asked for more
    than the tree's checks): the next rank in a ring for ``'once'`` (every server checked once,
    which verifies the whole table); ``k``: the next k; ``'all'``: every other; ``'none'``: nobody.

    >>> checked_peers(4, 5, ONCE), checked_peers(1, 5, Verify.parse(2)), checked_peers(1, 3, Verify.parse("all"))
    ([0], [2, 3], [0, 2])
    """
    if verify.how is Checking.NONE or size == 1:
        return []
    if verify.how is Checking.ALL:
        return [r for r in range(size) if r != rank]
    if verify.how is Checking.ONCE:
        return [(rank + 1) % size]
    return sorted({(rank + d) % size for d in range(1, verify.count + 1)} - {rank})
