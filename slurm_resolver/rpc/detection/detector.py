"""Failure detection of one task after the bootstrap: its watch of the tasks below, its call up.

`FailureDetector` puts the two sides together (`slurm_resolver.rpc.detection.watch`, the
leader's; `slurm_resolver.rpc.detection.heartbeat`, the task's own) over the deaths they share
(`slurm_resolver.rpc.detection.deaths`), and says how the task ends: it fails (everyone is
told why) or it leaves normally (its silence is no failure, and a leader hands its place to
a task of its node).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable

from ...cluster import Cluster
from ...faults import Fault
from ...stacks.progress import Hang, HangWatch, Marks
from ..messages import HandOver, News
from ..transport import Link, Network
from ..tree import Plan
from ..trust.seals import Authority
from .deaths import Deaths
from .heartbeat import Heartbeat
from .watch import Watch

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)

TELL_WITHIN = 2.0
"""Seconds a failing task waits at most for its calls up and below to be made, to tell them."""


class FailureDetector:
    """Heartbeats up the tree and deaths down, for one task.

    Args:
        cluster: the bootstrapped cluster.
        plan: this task's place in the tree.
        above: the rank it watches on (None at the top), and ``link``: its rounds' link there.
        network: to reach successors; ``authority``: seals the watch calls.
        heartbeat: seconds between heartbeats; ``patience``: silence that is a death.
        hang_after: seconds without progress that make a hang (`slurm_resolver.stacks.progress`), judged at
            the top of the tree, which then awaits ``on_hang``; None: no judging.
    """

    def __init__(self, cluster: Cluster, plan: Plan, above: int | None, link: Link | None, network: Network,
                 authority: Authority, heartbeat: float, patience: float, hang_after: float | None = None,
                 on_hang: Callable[[Hang], Awaitable[None]] | None = None) -> None:
        self.deaths = Deaths(plan.rank, cluster.placement.node_of)
        self.watch = Watch(self.deaths, cluster, plan, network, heartbeat, patience, authority)
        self.heartbeat = Heartbeat(self.deaths, cluster, plan.rank, plan.position, above, link, network, authority,
                                   heartbeat, patience, self.watch.take_over,
                                   None if hang_after is None else self.progress,  # marks ride beats where judged
                                   plan.tree)
        self.watch.told = self.heartbeat.told  # a leader's word that the task above is silent comes to the server
        self._beating: asyncio.Task[None] | None = None
        self._judging: asyncio.Task[None] | None = None
        self._interval = heartbeat
        self._hang_after = hang_after
        self._on_hang = on_hang
        self.mark: int | None = None
        """This task's own progress mark (None: none yet)."""
        self.read_mark: Callable[[], int | None] | None = None
        """Where this task's mark is read instead (its command's, under ``bootstrap --``)."""

    def progress(self) -> Marks:
        """The progress marks of this task and of every task below it."""
        mark = self.read_mark() if self.read_mark is not None else self.mark
        below = self.watch.progress()
        return below if mark is None else Marks.of_task(self.deaths.rank, mark) | below

    async def _judge(self, after: float) -> None:
        """At the top of the tree: watch the job's marks, and say a hang once."""
        watch = HangWatch(after, time.monotonic())
        while not self.deaths.leaving:
            await asyncio.sleep(self._interval)
            hang = watch.see(self.progress(), time.monotonic())
            if hang is not None and self._on_hang is not None:
                await self._on_hang(hang)
                return

    @property
    def failed(self) -> dict[int, Fault]:
        """Every task known to have died, by rank, with why (a new dict, each fault its rank's)."""
        return self.deaths.faults()

    def add_callback(self, callback: Callable[[int, Fault], None]) -> None:
        """Call ``callback(rank, fault)`` for every death: at once for those known, later for the others."""
        self.deaths.add_callback(callback)

    def start(self) -> None:
        """Start beating and watching (on the running event loop)."""
        self._beating = asyncio.ensure_future(self.heartbeat.run())
        self.watch.start()
        if self._hang_after is not None and self.heartbeat.above is None:
            self._judging = asyncio.ensure_future(self._judge(self._hang_after))

    async def fail_for_job(self, why: Fault) -> None:
        """This task fails the step for the job (a hang it judged): its own callbacks hear it as a death
        too, then every task is told."""
        self.deaths.failing(why)
        await self.fail(why)

    async def fail(self, why: Fault, within: float = TELL_WITHIN) -> None:
        """This task fails: tell the task above and the tasks below why, before it ends.

        A task that fails a moment after the bootstrap (a command that cannot start) may not have its
        call up yet, nor every task below its call here: it waits for them, up to ``within`` seconds
        (else they would hear only as its silence outlasts their patience)."""
        self.deaths.leaving = True
        rank = self.deaths.rank
        self.deaths.own = why  # a task below that starts watching from now on hears it first
        news = News.of([rank], why)
        self.deaths.up.put_nowait(news)
        self.deaths.tell_below(news)
        until = time.monotonic() + within
        while not self._told() and time.monotonic() < until:
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.3)  # let the report go out

    def _told(self) -> bool:
        """Whether the news went up (a beat took it, or there is no call up) and every task below watches."""
        up = self.deaths.up.empty() or self._beating is None or self._beating.done()
        return up and not self.watch.unheard()

    async def leave(self, grace: float = 1.0) -> None:
        """This task ends normally: say so above and below (naming a successor), then stop."""
        self.deaths.leaving = True
        self.deaths.up.put_nowait(News(leaving=True))
        successor = self.watch.successor()
        hand_over = None if successor is None else HandOver(successor[0], self.heartbeat.above, successor[1])
        self.deaths.tell_below(News(leaving=True, hand_over=hand_over))
        await asyncio.sleep(min(grace, 0.2))  # let the last beat and events go out
        await self.watch.stop()
        if self._judging is not None:
            self._judging.cancel()
        if self._beating is not None:
            self._beating.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._beating
