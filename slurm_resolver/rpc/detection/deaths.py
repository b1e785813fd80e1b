"""What both sides of failure detection share: the deaths a task knows, and where news goes.

Every task keeps one long call (``Watch``) to the task above it and beats news on it; a leader
watches the calls of the tasks below it (`slurm_resolver.rpc.detection.watch`), and a task
follows its own call up (`slurm_resolver.rpc.detection.heartbeat`). Both sides learn of deaths and
tell each other through `Deaths`: a death found below goes up (in this task's next
beat) and down (to every task below); a death heard from above goes down only. News waits in one
queue a call, and a call's next message, at least `SPACING` after its last, takes all that waits
(`gathered`, `merged`): a burst of deaths (a node's tasks, a process of many) costs a few messages a call, not
one a death.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from ...faults import Fault
from ..messages import MOST_NEWS, REASON, SHOWN, News, Source

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)

log = logging.getLogger("slurm_resolver")

SPACING = 0.2
"""Seconds between two messages of one call that tell deaths: the first goes at once, the news that comes within
this after it waits for the next message, and goes with all that came meanwhile. A burst (a process of a thousand
tasks gone) costs every call a few messages, not one a news heard: otherwise every hop sends on each news as it
comes, and the cores of a large job on few machines are spent on the flood, which delays its first news too."""


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
        """What a task that starts watching here missed: this task's own failure, then every death known, in the order
        heard, as news of up to `SHOWN` ranks recorded with one fault (the call's messages carry them within their
        bound, `SPACING` apart). A task below that calls late, a successor's, or one whose task above died (its
        subtree was cut off while the others heard) learns every death; not only the first."""
        own = [News.of([self.rank], self.own)] if self.own is not None else []
        groups: dict[int, tuple[Fault, list[int]]] = {}
        for rank, fault in list(self.failed.items()):
            groups.setdefault(id(fault), (fault, []))[1].append(rank)
        return own + [News.of(ranks[start:start + SHOWN], fault) for fault, ranks in groups.values()
                      for start in range(0, len(ranks), SHOWN)]


def held(news: News, sent: float) -> float:
    """Seconds ``news``, the first that waits for a call's next message, is held so that what comes meanwhile goes
    with it: until `SPACING` after the call's last message (``sent``, `time.monotonic`) where it tells deaths;
    never an end (``leaving``)."""
    return max(0.0, sent + SPACING - time.monotonic()) if news.failed and not news.leaving else 0.0


def gathered(first: News, queue: asyncio.Queue[News]) -> list[News]:
    """``first`` and the news queued behind it, as one message carries them once `merged`: at most `MOST_NEWS`
    news on the wire, none after an end (``leaving``)."""
    news = [first]
    groups = _Groups()
    groups.add(first)
    waiting = queue._queue  # type: ignore[attr-defined]  # a deque: the next is looked at before it is taken
    while not news[-1].leaving and waiting and (groups.count < MOST_NEWS or groups.joins(waiting[0])):
        news.append(queue.get_nowait())
        groups.add(news[-1])
    return news


def merged(news: list[News]) -> list[News]:
    """``news`` as a message carries it: the deaths of one cause (and status) together, `SHOWN` ranks a news, their
    reasons joined (a burst of a thousand deaths heard one by one goes on in a few messages, not a hundred);
    news of an end, or that came merged already, as it is."""
    if len(news) < 2:
        return news
    out: list[News | list[News]] = []  # a news as it is, or a group of news to merge
    groups = _Groups()
    for told in news:
        group = groups.add(told)
        if group is None or len(group) == 1:  # as it is, or the first of a group
            out.append(told if group is None else group)
    return [_merge(each) if isinstance(each, list) else each for each in out]


def _merge(group: list[News]) -> News:
    if len(group) == 1:
        return group[0]
    reason = "; ".join(dict.fromkeys(n.reason for n in group))
    return News(tuple(r for n in group for r in n.failed), reason if len(reason) <= REASON else
                reason[:REASON - 1] + "\u2026", cause=group[0].cause, status=group[0].status)


class _Groups:
    """The news of a message, in groups to merge (`gathered` and `merged` group alike)."""

    __slots__ = ("count", "open")

    def __init__(self) -> None:
        self.count = 0
        """News once merged."""
        self.open: list[tuple[list[News], list[int]]] = []
        """The open group of each cause, and its count of ranks (a cause is an enum, whose hash is a Python call; a
        message's causes are few)."""

    def _open(self, news: News) -> tuple[list[News], list[int]] | None:
        """The open group ``news`` may join (where it has room, or not); None where there is none for its cause."""
        return next((o for o in self.open if o[0][0].cause is news.cause and o[0][0].status == news.status), None)

    def joins(self, news: News) -> bool:
        """Whether ``news`` joins an open group (then it adds no news once merged)."""
        if not _mergeable(news):
            return False
        found = self._open(news)
        return found is not None and found[1][0] + len(news.failed) <= SHOWN

    def add(self, news: News) -> list[News] | None:
        """Count ``news`` in: the group it joins or opens (``news`` in it), or None where it goes as it is."""
        if not _mergeable(news):
            self.count += 1
            return None
        found = self._open(news)
        if found is not None and found[1][0] + len(news.failed) <= SHOWN:
            found[0].append(news)
            found[1][0] += len(news.failed)
            return found[0]
        if found is not None:
            self.open.remove(found)
        self.count += 1
        group = ([news], [len(news.failed)])
        self.open.append(group)
        return group[0]


def _mergeable(news: News) -> bool:
    return bool(news.failed) and not news.leaving and news.hand_over is None and len(news.failed) < SHOWN
