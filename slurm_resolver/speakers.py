"""Who speaks for the job: which task of a launch says an error that several of its tasks raise.

Every error carries its `Speaker` (`SlurmResolverError.speaker`), and the command line prints it
where the speaker is the task itself (`Speaker.says`): the others end without a word. Two choices
are the raiser's, which knows them: an error every task computes alike from what they share (the
command line, the step's size) is `Speaker.FIRST`'s, and one that a task only heard from the task
above is `Speaker.ABOVE`'s. Every other choice is made here, on each failure's `Cause`, never on its
words:

- a death is said by the lowest rank each task knows alive (`for_deaths`);
- a command that cannot start anywhere (every task runs the same one) by the lowest rank that
  failed so (`for_unstarted`);
- a round's failure where it was decided, at the root of the bootstrap's tree (`for_a_round`);
- where the root never answered, every task that calls it finds the same, and one of them says it
  (`for_a_failed_call`).
"""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Collection, Mapping, Sequence

from .faults import Cause, Fault

__all__ = ["Speaker"]


class Speaker(enum.Enum):
    """Which task of a launch says an error that several tasks raise (the command line prints it once)."""

    TASK = "task"
    """The task that raised it: the error is its own (its node, its row, a peer it could not reach)."""
    FIRST = "first"
    """Rank 0: every task computes the same error from what they share (the command line, the step's size)."""
    ABOVE = "above"
    """The task above in the bootstrap's tree, which found it or heard it first: this task only heard it."""
    ANOTHER = "another"
    """Another task that found the same: where the root of the bootstrap's tree never answered, every task
    that calls it fails alike, and one of them (on another node, where there is one) says it."""

    def says(self, rank: int | None) -> bool:
        """Whether the task of ``rank`` (None: no task of a launch) says an error of this speaker.

        >>> [Speaker.FIRST.says(r) for r in (None, 0, 3)], Speaker.ABOVE.says(0)
        ([True, True, False], False)
        """
        if rank is None or self is Speaker.TASK:
            return True
        return self is Speaker.FIRST and rank == 0


def for_deaths(rank: int, world_size: int, dead: Collection[int]) -> Speaker:
    """Who says the deaths of ``dead`` for the job: this task (``rank``) where it is the lowest rank it knows
    alive (every surviving task raises them; the others end without a word).

    >>> for_deaths(1, 4, {0}), for_deaths(2, 4, {0})
    (<Speaker.TASK: 'task'>, <Speaker.ABOVE: 'above'>)
    """
    lowest = next(r for r in range(world_size + 1) if r not in dead)
    return Speaker.TASK if lowest == rank else Speaker.ABOVE


def for_unstarted(rank: int, dead: Mapping[int, Fault], news: threading.Event, until: float) -> Speaker:
    """Who says that this task's command could not start: a lower rank heard of, by ``until`` (monotonic), to
    have failed so (`Cause.UNSTARTED`: every task runs the same command, and the lowest such rank says it),
    else this task. ``news`` is set whenever ``dead`` grows."""
    while True:
        if any(other < rank and fault.cause is Cause.UNSTARTED for other, fault in list(dead.items())):
            return Speaker.ABOVE
        left = until - time.monotonic()
        if rank == 0 or left <= 0:
            return Speaker.TASK
        news.wait(left)
        news.clear()


def for_a_round(is_root: bool) -> Speaker:
    """Who says a round's failure, as a leader passes it on: the root, which decided it; the tasks below it
    heard it."""
    return Speaker.TASK if is_root else Speaker.ABOVE


def for_a_failed_call(rank: int, heard: Speaker, first_nodes: Sequence[Sequence[int]] = ()) -> Speaker:
    """Who says that this task (``rank``) could not join a round up the tree.

    ``heard`` is what its error says already: `Speaker.ABOVE` where the task above answered and said why
    the round did not end (it says it). ``first_nodes`` are, where the root of the tree never answered this
    task and the nodes are known, the ranks of the job's first node (the root's) and of the next one where
    there is one: every task that calls the root finds the same, and one says it, the next node's lowest
    rank (another node than the root's, which may be lost with it), or with one node the root's next task.

    >>> for_a_failed_call(5, Speaker.TASK, [(0, 1), (2, 3)]), for_a_failed_call(2, Speaker.TASK, [(0, 1), (2, 3)])
    (<Speaker.ANOTHER: 'another'>, <Speaker.TASK: 'task'>)
    """
    if heard is Speaker.ABOVE:
        return heard
    if not first_nodes:
        return Speaker.TASK
    says = first_nodes[1][0] if len(first_nodes) > 1 else first_nodes[0][1] if len(first_nodes[0]) > 1 else rank
    return Speaker.TASK if rank == says else Speaker.ANOTHER
