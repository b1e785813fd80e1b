"""Failure detection after the bootstrap: heartbeats up the tree of node leaders, failures down.

Every task keeps one long call (``Watch``) to the task above it, the same one its rounds go
to, and beats on it every ``interval`` seconds (:mod:`~slurm_resolver.rpc.listen` is that
side). A leader notices at once a task below whose call breaks (its process died: the
kernel closes its connection), and within ``patience`` seconds one that stops beating
(hung, or its node gone); it reports the dead up its own call and tells every task below
it, and sends an empty event when it has no news, so that a task below whose leader hangs
or vanishes declares it dead after ``patience`` seconds too. So every task learns of a
death within about a second, or ``patience`` plus a second for a silent one, and no server
hears from more than its node's tasks and its child leaders.

A task that leaves normally says so first: its silence is no failure. A leader that leaves
names a successor (the lowest task of its node still watching), which takes its place in
the tree. A task that was itself stopped (SIGSTOP, a long pause) does not count the time it
stood still as anyone's silence.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from . import coordination_pb2 as pb
from .coordinator import Refused, node_source
from .listen import WATCH, listen
from .transport import stood_still
from .wire import SHOWN, Header, WireError

if TYPE_CHECKING:  # pragma: no cover
    from .protocol import Member

__all__ = ["Watchtower", "WATCH"]

log = logging.getLogger("slurm_resolver")

FIRST_BEAT = 10.0
"""Seconds a server waits for a watch call's first beat (then it refuses the call)."""


def _parse(message: Any, data: bytes, world_size: int) -> Any:
    if not isinstance(data, bytes) or len(data) > 8192:
        raise WireError("a heartbeat larger than any")
    try:
        message.ParseFromString(data)
    except Exception:  # noqa: BLE001 - protobuf's DecodeError and friends
        raise WireError("a malformed heartbeat") from None
    if len(message.failed) > SHOWN or any(r >= world_size for r in message.failed) or len(message.reason) > 1000:
        raise WireError("a heartbeat naming more than a job has")
    if isinstance(message, pb.Event) and (message.successor > world_size or message.above > world_size
                                          or len(message.gone) > 1024
                                          or any(not -world_size <= g < world_size for g in message.gone)):
        raise WireError("a hand-over naming more than a job has")
    return message


def _call(callback: Callable[[int, str], None], rank: int, reason: str) -> None:
    try:
        callback(rank, reason)
    except Exception:  # noqa: BLE001 - a user's callback must not stop the watch
        log.exception("slurm_resolver: a failure callback raised")


class Watchtower:
    """One task's part in failure detection (see the module's description).

    Args:
        member: this task's protocol (its cluster, plan, coordinator and links).
        interval: seconds between heartbeats.
        patience: seconds of silence after which a task below is declared dead.
    """

    def __init__(self, member: Member, interval: float = 1.0, patience: float = 5.0) -> None:
        self.member = member
        self.interval = interval
        self.patience = patience
        self.failed: dict[int, str] = {}
        """Every task known to have died, by rank, with why."""
        self.callbacks: list[Callable[[int, str], None]] = []
        self.watched = frozenset(member.coordinator.sources)
        """The source keys whose calls this task takes (its node's tasks and child nodes, while it leads)."""
        self.above: int | None = None
        """The rank this task watches on (None at the top of the tree)."""
        self.up: asyncio.Queue[pb.Beat] = asyncio.Queue()
        """What this task's next beats carry up."""
        self.leaving = False
        self.calls = 0
        """How many watch calls this task has made up (the beats of an earlier one stop)."""
        self._below: dict[int, asyncio.Queue[bytes]] = {}  # source key -> events to send down its call
        self._heard: dict[int, float] = {}  # source key -> when it last beat
        self._left: set[int] = set()
        self._holders: dict[int, int] = {}  # source key -> the rank on its call (a child node's successor)
        self._tasks: list[asyncio.Task[None]] = []
        self._since = time.monotonic()  # when the watched sources were last set
        self._checking = False

    # Naming.

    def _rank(self, source: int) -> int:
        """The rank a source key stands for (a child node's leader, or the successor watching for it)."""
        if source >= 0:
            return source
        return self._holders.get(source, int(self.member.cluster.placement.ranks_on(-1 - source)[0]))

    def parse_event(self, data: bytes) -> pb.Event:
        """An event from above, checked against the job."""
        event: pb.Event = _parse(pb.Event(), data, self.member.cluster.world_size)
        return event

    # Learning of deaths, from below or from above.

    def declare(self, ranks: list[int], reason: str, *, from_above: bool = False) -> None:
        """Record ``ranks`` as dead: tell the tasks below, the task above (unless it told us), the callbacks."""
        new = [r for r in ranks if r not in self.failed and r != self.member.rank]
        if not new:
            return
        for rank in new:
            self.failed[rank] = reason
        for start in range(0, len(new), SHOWN):
            event = pb.Event(failed=new[start:start + SHOWN], reason=reason[:1000]).SerializeToString()
            for queue in self._below.values():
                queue.put_nowait(event)
            if not from_above:
                self.up.put_nowait(pb.Beat(failed=new[start:start + SHOWN], reason=reason[:1000]))
        for rank in new:
            for callback in list(self.callbacks):
                _call(callback, rank, reason)

    def add_callback(self, callback: Callable[[int, str], None]) -> None:
        """Call ``callback(rank, why)`` for every death: at once for those known, later for the others."""
        for rank, reason in list(self.failed.items()):
            _call(callback, rank, reason)
        self.callbacks.append(callback)

    # The leader's side: the calls of the tasks below.

    async def serve(self, beats: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """One task below: read its beats, send it every event; its call breaking is its death."""
        coordinator = self.member.coordinator
        world = self.member.cluster.world_size
        try:
            first = _parse(pb.Beat(), await asyncio.wait_for(beats.__anext__(), FIRST_BEAT), world)
        except (StopAsyncIteration, WireError, asyncio.TimeoutError) as exc:
            raise Refused("invalid", f"a watch without a first beat within {FIRST_BEAT:g} s ({exc!r})") from None
        header = Header(first.job_key, WATCH, first.source, first.node, first.credential)
        source = coordinator.admit(header, sources=self.watched)
        if source in self._below:
            raise Refused("invalid", f"{self.member.name(self._rank(source))} is watched already: one call a task")
        queue: asyncio.Queue[bytes] = asyncio.Queue()
        for rank, reason in list(self.failed.items())[:SHOWN]:  # what it missed
            queue.put_nowait(pb.Event(failed=[rank], reason=reason).SerializeToString())
        self._below[source] = queue
        self._heard[source] = time.monotonic()
        self._holders[source] = first.source
        self._left.discard(source)
        reader = asyncio.ensure_future(self._read(source, beats, world))
        getting: asyncio.Future[bytes] | None = None
        try:
            while True:
                if getting is None:
                    getting = asyncio.ensure_future(queue.get())
                waited: set[asyncio.Future[Any]] = {getting, reader}
                done, _ = await asyncio.wait(waited, timeout=self.interval,
                                             return_when=asyncio.FIRST_COMPLETED)
                if getting in done:
                    event, getting = getting.result(), None
                    yield event
                elif reader in done:
                    break
                else:
                    yield b""  # no news: an empty event, so that the task below knows this one lives
        finally:
            if getting is not None:
                getting.cancel()
            reader.cancel()
            if self._below.get(source) is queue:
                del self._below[source]
            if source not in self._left and not self.leaving:
                rank = self._rank(source)
                self.declare([rank], f"{self.member.name(rank)} died: its connection to rank "
                                     f"{self.member.rank} closed")

    async def _read(self, source: int, beats: AsyncIterator[bytes], world: int) -> None:
        """Read one task's beats until its call ends or breaks (then :meth:`serve` ends the call)."""
        with contextlib.suppress(Exception):  # a broken call, a stopped server: the same end
            await self._read_beats(source, beats, world)

    async def _read_beats(self, source: int, beats: AsyncIterator[bytes], world: int) -> None:
        async for data in beats:
            try:
                beat = _parse(pb.Beat(), data, world)
            except WireError:
                return
            self._heard[source] = time.monotonic()
            if beat.failed:
                self.declare(list(beat.failed), beat.reason or "a task below reported it dead")
            if beat.leaving:
                self._left.add(source)
                return

    async def _check(self) -> None:
        """Declare dead the tasks below that stop beating (hung, or their node gone)."""
        last = time.monotonic()
        while not self.leaving:
            await asyncio.sleep(self.interval)
            now = time.monotonic()
            stalled = stood_still(now, last, self.interval)
            last = now
            if stalled:  # the silence before the pause still counts
                self._heard = {source: heard + stalled for source, heard in self._heard.items()}
                self._since += stalled
                continue
            for source in self.watched:
                if source in self._left:
                    continue
                heard = max(self._heard.get(source, self._since), self._since)
                if now - heard > self.patience and self._rank(source) not in self.failed:
                    rank = self._rank(source)
                    self.declare([rank], f"{self.member.name(rank)} stopped beating: nothing for "
                                         f"{now - heard:.0f} s")

    # Taking over from a leader that leaves.

    def take_over(self, gone: set[int]) -> None:
        """Watch in the place of this node's leader, which left normally: its node's other tasks and
        its child nodes (but ``gone``, which left normally too) will call here."""
        member = self.member
        position = member.plan.position
        node = {int(r) for r in member.cluster.placement.ranks_on(position)} - {member.rank}
        self.watched = frozenset(node | {node_source(c) for c in member.plan.tree.children(position)})
        self._left |= gone & self.watched
        self._since = time.monotonic()  # a fresh patience for those that move their call here
        self._start_checking()

    def _successor(self) -> tuple[int, list[int]] | None:
        """The task of this node that watches in this one's place, and the sources that left."""
        staying = [s for s in self._below if s >= 0 and s not in self._left and s not in self.failed]
        if not staying:
            return None
        return min(staying), sorted(self._left)

    def start(self) -> None:
        """Start beating and watching (on the running event loop)."""
        self._tasks = [asyncio.ensure_future(listen(self))]
        if self.watched:
            self._start_checking()

    def _start_checking(self) -> None:
        if not self._checking:
            self._checking = True
            self._tasks.append(asyncio.ensure_future(self._check()))

    async def fail(self, why: str) -> None:
        """This task fails: tell the task above and the tasks below why, before it ends."""
        self.leaving = True
        rank = self.member.rank
        self.up.put_nowait(pb.Beat(failed=[rank], reason=why[:1000]))
        event = pb.Event(failed=[rank], reason=why[:1000]).SerializeToString()
        for queue in self._below.values():
            queue.put_nowait(event)
        await asyncio.sleep(0.3)  # let the report go out

    async def leave(self, grace: float = 1.0) -> None:
        """This task ends normally: say so above and below, then stop."""
        self.leaving = True
        self.up.put_nowait(pb.Beat(leaving=True))
        successor = self._successor()
        leaving = pb.Event(leaving=True).SerializeToString() if successor is None else pb.Event(
            leaving=True, successor=successor[0] + 1, above=0 if self.above is None else self.above + 1,
            gone=successor[1][:1024]).SerializeToString()
        for queue in self._below.values():
            queue.put_nowait(leaving)
        await asyncio.sleep(min(grace, 0.2))  # let the last beat and events go out
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
