"""Failure detection of one task after the bootstrap: its watch of the tasks below, its call up.

`FailureDetector` puts the two sides together (`slurm_resolver.rpc.watch`, the
leader's; `slurm_resolver.rpc.heartbeat`, the task's own) over the deaths they share
(`slurm_resolver.rpc.deaths`), and says how the task ends: it fails (everyone is
told why) or it leaves normally (its silence is no failure, and a leader hands its place to
a task of its node).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from ..cluster import Cluster
from .auth import Authority
from .beats import encode_event
from .deaths import Deaths
from .heartbeat import Heartbeat
from .messages import HandOver, News
from .transport import Link, Network
from .tree import Plan
from .watch import Watch

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)


class FailureDetector:
    """Heartbeats up the tree and deaths down, for one task.

    Args:
        cluster: the bootstrapped cluster.
        plan: this task's place in the tree.
        above: the rank it watches on (None at the top), and ``link``: its rounds' link there.
        network: to reach successors; ``authority``: seals the watch calls.
        heartbeat: seconds between heartbeats; ``patience``: silence that is a death.
    """

    def __init__(self, cluster: Cluster, plan: Plan, above: int | None, link: Link | None, network: Network,
                 authority: Authority, heartbeat: float, patience: float) -> None:
        self.deaths = Deaths(plan.rank)
        self.watch = Watch(self.deaths, cluster, plan, heartbeat, patience)
        self.heartbeat = Heartbeat(self.deaths, cluster, plan.rank, plan.position, above, link, network, authority,
                                   heartbeat, patience, self.watch.take_over)
        self._task: asyncio.Task[None] | None = None

    @property
    def failed(self) -> dict[int, str]:
        """Every task known to have died, by rank, with why."""
        return self.deaths.failed

    def add_callback(self, callback: Callable[[int, str], None]) -> None:
        """Call ``callback(rank, why)`` for every death: at once for those known, later for the others."""
        self.deaths.add_callback(callback)

    def start(self) -> None:
        """Start beating and watching (on the running event loop)."""
        self._task = asyncio.ensure_future(self.heartbeat.run())
        self.watch.start()

    async def fail(self, why: str) -> None:
        """This task fails: tell the task above and the tasks below why, before it ends."""
        self.deaths.leaving = True
        rank = self.deaths.rank
        self.deaths.up.put_nowait(News((rank,), why))
        self.deaths.tell_below(encode_event([rank], why))
        await asyncio.sleep(0.3)  # let the report go out

    async def leave(self, grace: float = 1.0) -> None:
        """This task ends normally: say so above and below (naming a successor), then stop."""
        self.deaths.leaving = True
        self.deaths.up.put_nowait(News(leaving=True))
        successor = self.watch.successor()
        hand_over = None if successor is None else HandOver(successor[0], self.heartbeat.above, successor[1])
        self.deaths.tell_below(encode_event(leaving=True, hand_over=hand_over))
        await asyncio.sleep(min(grace, 0.2))  # let the last beat and events go out
        await self.watch.stop()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
