"""Classes of identical stacks with the ranks in each: what a leader sends up for its whole subtree.

Every thread's stack of every task is one item; identical stacks (the same frames; a task's main
thread apart from its other threads) make one class, with the set of ranks that hold it. Merging
two subtrees' classes adds their rank sets: what a message carries grows with the number of
distinct stacks, and each is bounded (`MOST_CLASSES` classes, `MOST_RANGES` ranges of ranks a
class, `capture.MOST_FRAMES` frames a stack), never with the job's size.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from ..values import Value, fill
from .capture import Frame, ThreadStack

__all__ = ["Ranks", "StackClass", "Stacks", "MOST_CLASSES", "MOST_RANGES"]

MOST_CLASSES = 256
"""Distinct stacks kept (the rarest: the odd ones are the news); the others are counted."""
MOST_RANGES = 64
"""Ranges of ranks kept a class (the lowest); its count stays exact."""


class Ranks(Value):
    """A set of ranks as ranges, ``(first, last)`` inclusive, in order: at most `MOST_RANGES` kept
    (``count`` is exact whatever was left out).

    >>> str(Ranks.of([0, 1, 2, 5, 7, 8])), len(Ranks.of([0, 1, 2, 5, 7, 8]))
    ('0-2,5,7-8', 6)
    """

    __slots__ = ("ranges", "count")

    ranges: tuple[tuple[int, int], ...]
    count: int

    def __init__(self, ranges: tuple[tuple[int, int], ...] = (), count: int = 0) -> None:
        fill(self, ranges, count)

    @classmethod
    def of(cls, ranks: Iterable[int]) -> Ranks:
        """The ranks given (each once)."""
        found: list[tuple[int, int]] = []
        for rank in sorted(set(ranks)):
            if found and found[-1][1] == rank - 1:
                found[-1] = (found[-1][0], rank)
            else:
                found.append((rank, rank))
        total = sum(last - first + 1 for first, last in found)
        return cls(tuple(found[:MOST_RANGES]), total)

    def __or__(self, other: Ranks) -> Ranks:
        """The ranks of both: counted exactly where both are whole, else as disjoint (the classes of two
        subtrees are: every task is in one)."""
        merged: list[tuple[int, int]] = []
        for first, last in sorted(self.ranges + other.ranges):
            if merged and first <= merged[-1][1] + 1:
                merged[-1] = (merged[-1][0], max(last, merged[-1][1]))
            else:
                merged.append((first, last))
        exact = self.complete and other.complete and len(merged) <= MOST_RANGES
        count = sum(last - first + 1 for first, last in merged) if exact else self.count + other.count
        return Ranks(tuple(merged[:MOST_RANGES]), count)

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[int]:
        for first, last in self.ranges:
            yield from range(first, last + 1)

    @property
    def first(self) -> int:
        """The lowest rank."""
        return self.ranges[0][0] if self.ranges else -1

    @property
    def complete(self) -> bool:
        """Whether every rank is in ``ranges`` (none was left out)."""
        return sum(last - first + 1 for first, last in self.ranges) == self.count

    def __str__(self) -> str:
        text = ",".join(str(first) if first == last else f"{first}-{last}" for first, last in self.ranges)
        return text if self.complete else f"{text},..."


NO_RANKS = Ranks()
"""No ranks: the default of a field of ranks (one shared: a `Ranks` is immutable)."""


class StackClass(Value):
    """One distinct stack, and the ranks whose thread holds it (``main``: the task's main thread)."""

    __slots__ = ("frames", "main", "thread", "ranks", "skipped")

    frames: tuple[Frame, ...]
    main: bool
    thread: str
    """The name of the thread (as the lowest rank of the class calls it)."""
    ranks: Ranks
    skipped: int
    """Outer frames left out (the stack was deeper than `capture.MOST_FRAMES`)."""

    def __init__(self, frames: tuple[Frame, ...], main: bool, thread: str, ranks: Ranks, skipped: int = 0) -> None:
        fill(self, frames, main, thread, ranks, skipped)

    @property
    def key(self) -> tuple[bool, tuple[Frame, ...]]:
        """What makes two stacks one class."""
        return self.main, self.frames


class Stacks(Value):
    """Every class of a set of tasks, the tasks that did not answer, and those left out.

    Attributes:
        classes: the distinct stacks, the main threads' first, then the other threads', each rarest first
            (at most `MOST_CLASSES`: a task of many threads never crowds out the job's main stacks).
        silent: tasks that did not answer (dead, or holding the GIL in C code the whole time).
        answered: tasks that answered.
        others: the tasks whose main thread's stack was left out (beyond `MOST_CLASSES` distinct
            stacks, the commonest are: the odd ones out are the news).
        dropped: distinct stacks of other threads left out (a task's own beyond `MOST_CLASSES`, and
            the commonest beyond a merge's or an answer's bound).
    """

    __slots__ = ("classes", "silent", "answered", "others", "dropped")

    classes: tuple[StackClass, ...]
    silent: Ranks
    answered: int
    others: Ranks
    dropped: int

    def __init__(self, classes: tuple[StackClass, ...] = (), silent: Ranks = NO_RANKS, answered: int = 0,
                 others: Ranks = NO_RANKS, dropped: int = 0) -> None:
        fill(self, classes, silent, answered, others, dropped)

    @classmethod
    def of_task(cls, rank: int, threads: Iterable[ThreadStack]) -> Stacks:
        """One task's stacks (threads whose stacks are identical, a pool's idle workers, are one), at most
        `MOST_CLASSES`: beyond them the main thread's and the rarest (held by the fewest threads) are kept,
        and the others counted in ``dropped``.

        >>> many = [ThreadStack("main", (Frame("a.py", 1, "main"),))]
        >>> many += [ThreadStack(f"t{i}", (Frame("a.py", i, "work"),)) for i in range(300)]
        >>> mine = Stacks.of_task(0, many)
        >>> len(mine.classes), mine.dropped, mine.classes[0].main
        (256, 45, True)
        """
        one = Ranks.of([rank])
        found: dict[tuple[bool, tuple[Frame, ...]], StackClass] = {}
        held: dict[tuple[bool, tuple[Frame, ...]], int] = {}
        for t in threads:
            stack = StackClass(t.frames, t.thread == "main", t.thread, one, t.skipped)
            found.setdefault(stack.key, stack)
            held[stack.key] = held.get(stack.key, 0) + 1
        if len(found) <= MOST_CLASSES:
            return cls(tuple(found.values()), answered=1)
        kept = sorted(found, key=lambda key: (not key[0], held[key]))[:MOST_CLASSES]  # stable: threads' order
        return cls(tuple(found[key] for key in kept), answered=1, dropped=len(found) - MOST_CLASSES)

    @classmethod
    def silent_tasks(cls, ranks: Iterable[int]) -> Stacks:
        """Tasks that did not answer."""
        return cls(silent=Ranks.of(ranks))

    def __or__(self, other: Stacks) -> Stacks:
        """The classes of both sets of tasks, identical stacks merged."""
        merged: dict[tuple[bool, tuple[Frame, ...]], StackClass] = {}
        for one in self.classes + other.classes:
            known = merged.get(one.key)
            if known is None:
                merged[one.key] = one
            else:
                lower = known if known.ranks.first <= one.ranks.first else one
                merged[one.key] = StackClass(one.frames, one.main, lower.thread, known.ranks | one.ranks,
                                             max(known.skipped, one.skipped))
        rarest = sorted(merged.values(), key=_kept_first)
        others, dropped = self.others | other.others, self.dropped + other.dropped
        for left in rarest[MOST_CLASSES:]:
            if left.main:
                others = others | left.ranks
            else:
                dropped += 1
        return Stacks(tuple(rarest[:MOST_CLASSES]), self.silent | other.silent, self.answered + other.answered,
                      others, dropped)

    @property
    def tasks(self) -> int:
        """Tasks counted: those that answered and those that did not."""
        return self.answered + len(self.silent)


def _kept_first(one: StackClass) -> tuple[bool, int, int]:
    """The order classes are kept in: main threads' first, then the rarest (the odd ones out are the news)."""
    return not one.main, len(one.ranks), one.ranks.first
