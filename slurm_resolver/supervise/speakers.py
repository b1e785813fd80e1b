"""Who speaks for the job, and which words it uses, decided on each failure's `Cause`, never on its words.

A peer's death is said once, by the lowest rank each task knows alive; a command that cannot start
anywhere (every task runs the same command) is said by the lowest rank that failed so; and a command
that failed as a dead peer's did (it exited with the same status) says so briefly.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping

from ..errors import Speaker
from ..rpc.messages import Cause, Fault

__all__: list[str] = []  # internal: no public names (docs/reference.md)


def speaker(rank: int, world_size: int, dead: Mapping[int, Fault]) -> Speaker:
    """Who says the deaths ``dead`` for the job: this task (``rank``) where it is the lowest rank it knows
    alive (every surviving task raises them; the others end without a word).

    >>> speaker(1, 4, {0: Fault(Cause.CRASHED, "rank 0 died")}), speaker(2, 4, {0: Fault(Cause.CRASHED, "")})
    (<Speaker.TASK: 'task'>, <Speaker.ABOVE: 'above'>)
    """
    lowest = next(r for r in range(world_size + 1) if r not in dead)
    return Speaker.TASK if lowest == rank else Speaker.ABOVE


def failed_alike_below(rank: int, dead: Mapping[int, Fault], news: threading.Event, until: float) -> bool:
    """Whether a lower rank than ``rank`` is heard of, by ``until``, to have failed as this one did: its command
    could not start (every task runs the same command: the lowest such rank says it for the job)."""
    while True:
        if any(other < rank and fault.cause is Cause.UNSTARTED for other, fault in list(dead.items())):
            return True
        left = until - time.monotonic()
        if rank == 0 or left <= 0:
            return False
        news.wait(left)
        news.clear()


def failed_as_it_did(fault: Fault, status: int) -> bool:
    """Whether this task's command, ended with ``status``, failed as the dead peer's of ``fault`` did.

    >>> failed_as_it_did(Fault(Cause.EXITED, "its command exited with code 1", 1), 1)
    True
    >>> failed_as_it_did(Fault(Cause.CRASHED, "died", 0), 1)
    False
    """
    return fault.cause is Cause.EXITED and fault.status == status
