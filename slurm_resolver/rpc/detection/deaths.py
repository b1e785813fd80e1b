"""What both sides of failure detection share: the deaths a task knows, and where news goes.

Every task keeps one long call (``Watch``) to the task above it and beats news on it; a leader
watches the calls of the tasks below it (`slurm_resolver.rpc.detection.watch`), and a task
follows its own call up (`slurm_resolver.rpc.detection.heartbeat`). Both sides learn of deaths and
tell each other through `Deaths`: a death found below goes up (in this task's next
beat) and down (to every task below); a death heard from above goes down only. News waits in one
queue a call, and a call's next message takes all that waits (`gathered`): a burst of
deaths (a node's tasks, a process of many) costs a few messages a call, not one a death.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from ...faults import Fault
from ..messages import MOST_NEWS, SHOWN, News, Source

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)

log = logging.getLogger("slurm_resolver")


def _call(callback: Callable[[int, Fault], None], rank: int, fault: Fault) -> None:
    try:
        callback(rank, fault)
    except Exception:  # noqa: BLE001 - a user's callback must not stop the watch
        log.exception("slurm_resolver: a failure callback raised")


class Deaths:
    """Every task this one knows to have died, and where the news goes.

    Args:
        rank: this task.
        node_of: the node of a rank, that each death recorded names (none by default).

    Attributes:
        failed: the dead, by rank, each with the `Fault` of the news that told of it (its cause and words,
            when it was heard of), one for every rank of that news: a burst of a thousand deaths costs every
            task of the job a thousand entries, not a thousand faults made (`faults()` makes each rank's).
        up: the news this task's call up carries next (deaths found below, its own end).
        below: one queue of news per task below that watches here, by its source.
        leaving: this task ends (normally or not): a call breaking is no news any more.
    """

    def __init__(self, rank: int, node_of: Callable[[int], str] = lambda rank: "") -> None:
        self.rank = rank
        self.node_of = node_of
        self.failed: dict[int, Fault] = {}
        self.callbacks: list[Callable[[int, Fault], None]] = []
        self.up: asyncio.Queue[News] = asyncio.Queue()
        self.below: dict[Source, asyncio.Queue[News]] = {}
        self.leaving = False
        self.own: Fault | None = None
        """Why this task fails, once it does (a task that starts watching here after hears it too)."""

    def heard(self, news: News, default: str, *, from_above: bool = False) -> None:
        """Record the deaths ``news`` told (``default``: its words where it came without), as `declare` does,
        passing the very news on where every death in it is new (no news made again in every task it reaches;
        news without words is made again, with ``default``'s)."""
        self.declare(list(news.failed), news.fault(default, time.time()), from_above=from_above,
                     told=news if news.reason else None)

    def declare(self, ranks: list[int], fault: Fault, *, from_above: bool = False, told: News | None = None) -> None:
        """Record ``ranks`` as dead, for ``fault`` (each rank's its own, `Fault.of`): tell the tasks below, the
        task above (unless it told us), the callbacks. ``told``: the news of exactly these, to pass on as it is."""
        new = [r for r in ranks if r not in self.failed and r != self.rank]
        if not new:
            return
        # One fault for all of them, saying when they were heard (a fault that says so already is kept as it is).
        recorded = fault if fault.at else Fault(fault.cause, fault.words, fault.status, None, fault.node, time.time(),
                                                fault.oom)
        self.failed.update(dict.fromkeys(new, recorded))
        passed = told if told is not None and len(new) == len(ranks) <= SHOWN else None
        for start in range(0, len(new), SHOWN):
            news = passed if passed is not None else News.of(new[start:start + SHOWN], fault)
            self.tell_below(news)
            if not from_above:
                self.up.put_nowait(news)
        for rank in new if self.callbacks else ():
            own = recorded.of(rank, self.node_of(rank))
            for callback in list(self.callbacks):
                _call(callback, rank, own)

    def faults(self) -> dict[int, Fault]:
        """Every death known, by rank, with its own `Fault` (its rank and node in it)."""
        return {rank: told.of(rank, self.node_of(rank)) for rank, told in list(self.failed.items())}

    def failing(self, why: Fault) -> None:
        """This task fails for the job (a hang it judged): its own callbacks hear it as its death."""
        own = why.of(self.rank, self.node_of(self.rank), time.time())
        for callback in list(self.callbacks):
            _call(callback, self.rank, own)

    def tell_below(self, news: News) -> None:
        """Send ``news`` down every call of a task below."""
        for queue in self.below.values():
            queue.put_nowait(news)

    def add_callback(self, callback: Callable[[int, Fault], None]) -> None:
        """Call ``callback(rank, fault)`` for every death: at once for those known, later for the others."""
        for rank, fault in self.faults().items():
            _call(callback, rank, fault)
        self.callbacks.append(callback)

    def missed(self) -> list[News]:
        """What a task that starts watching here missed (this task's own failure, the first deaths: one
        news each)."""
        own = [News.of([self.rank], self.own)] if self.own is not None else []
        return own + [News.of([rank], fault) for rank, fault in list(self.failed.items())[:SHOWN - len(own)]]


def gathered(first: News, queue: asyncio.Queue[News]) -> list[News]:
    """``first`` and the news queued behind it, as one message carries them: at most `MOST_NEWS`, none after an
    end (``leaving``)."""
    news = [first]
    while not news[-1].leaving and len(news) < MOST_NEWS and not queue.empty():
        news.append(queue.get_nowait())
    return news
