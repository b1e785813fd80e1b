"""Progress marks of a set of tasks, and when they say that a job hangs.

A task marks progress with a number that grows (a training step). What one beat carries up for
a whole subtree is its `Marks`: the lowest mark and the ranks at it (bounded as every rank set of
a message), the highest, and how many tasks marked; merging two subtrees' marks is exact for
those four, so the root holds the job's at the cost of one small message a beat, whatever the
job's size. `HangWatch`, fed the job's marks as they come, says once when the job hangs: no
mark advanced for the time given (the job stands still: the stacks say where), or the lowest
mark stood still that long while others advanced (those tasks lag: they are named).
"""

from __future__ import annotations

import enum

from ..values import Value, fill
from .classes import NO_RANKS, Ranks

__all__ = ["Marks", "Hang", "HangKind", "HangWatch"]


class Marks(Value):
    """The progress marks of a set of tasks (those that marked; ``tasks`` of them).

    >>> str(Marks.of_task(3, 7) | Marks.of_task(5, 9) | Marks.of_task(4, 7))
    '7 (ranks 3-4) to 9 (3 tasks)'
    """

    __slots__ = ("lowest", "behind", "highest", "tasks")

    lowest: int
    behind: Ranks
    """The ranks whose mark is ``lowest``."""
    highest: int
    tasks: int

    def __init__(self, lowest: int = 0, behind: Ranks = NO_RANKS, highest: int = 0, tasks: int = 0) -> None:
        fill(self, lowest, behind, highest, tasks)

    @classmethod
    def of_task(cls, rank: int, mark: int) -> Marks:
        """One task's mark."""
        return cls(mark, Ranks.of([rank]), mark, 1)

    def __or__(self, other: Marks) -> Marks:
        """The marks of both sets of tasks (disjoint: every task is in one subtree)."""
        if not other.tasks:
            return self
        if not self.tasks:
            return other
        if self.lowest == other.lowest:
            behind = self.behind | other.behind
        else:
            behind = self.behind if self.lowest < other.lowest else other.behind
        return Marks(min(self.lowest, other.lowest), behind, max(self.highest, other.highest),
                     self.tasks + other.tasks)

    def __str__(self) -> str:
        if not self.tasks:
            return "no marks"
        return f"{self.lowest} (ranks {self.behind}) to {self.highest} ({self.tasks} tasks)"


class HangKind(enum.Enum):
    """How a job hangs."""

    STILL = "no task marked progress"
    """No mark advanced: the whole job stands still."""
    LAGGING = "some tasks' progress stands still while the others' advances"
    """The lowest mark stood still while the highest advanced: the tasks at it lag."""


class Hang(Value):
    """A hang, as `HangWatch` saw it."""

    __slots__ = ("kind", "seconds", "marks")

    kind: HangKind
    seconds: float
    """How long nothing advanced (the lowest mark, where ``kind`` is LAGGING)."""
    marks: Marks

    def __init__(self, kind: HangKind, seconds: float, marks: Marks) -> None:
        fill(self, kind, seconds, marks)

    def __str__(self) -> str:
        if self.kind is HangKind.LAGGING:
            behind = self.marks.behind
            who = f"rank {behind.first}" if len(behind) == 1 else f"ranks {behind} ({len(behind):,} tasks)"
            return (f"{who} stayed at progress mark {self.marks.lowest} for {self.seconds:.0f} s while others "
                    f"reached {self.marks.highest}")
        if not self.marks.tasks:
            return f"no task marked progress in {self.seconds:.0f} s since the bootstrap"
        return f"no task's progress mark advanced for {self.seconds:.0f} s (the highest is {self.marks.highest})"


class HangWatch:
    """Says once when a job's marks stood still for ``after`` seconds (the first marks seen are the
    start: the time of the bootstrap's end, with no marks yet).

    Args:
        after: seconds without progress that make a hang.
        now: the time the watch starts (a monotonic clock's).
    """

    def __init__(self, after: float, now: float) -> None:
        if after <= 0:
            raise ValueError(f"a hang is after a positive time, not {after}")
        self.after = after
        self._marks = Marks()
        self._highest_since = now
        self._lowest_since = now
        self.found: Hang | None = None

    def see(self, marks: Marks, now: float) -> Hang | None:
        """The job's marks now: a hang the first time one is found (None before, and after)."""
        if self.found is not None:
            return None
        before = self._marks
        if marks.tasks != before.tasks or marks.highest != before.highest:
            self._highest_since = now
        if marks.tasks != before.tasks or marks.lowest != before.lowest:
            self._lowest_since = now
        self._marks = marks
        return self.check(now)

    def check(self, now: float) -> Hang | None:
        """A hang the first time one is found at ``now``, the marks as last seen."""
        if self.found is not None:
            return None
        marks = self._marks
        if now - self._highest_since >= self.after:
            self.found = Hang(HangKind.STILL, now - self._highest_since, marks)
        elif marks.lowest < marks.highest and now - self._lowest_since >= self.after:
            self.found = Hang(HangKind.LAGGING, now - self._lowest_since, marks)
        return self.found
