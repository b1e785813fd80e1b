"""A leader's side of failure detection: the watch calls of the tasks below it.

Every task keeps one long call (``Watch``) to the task above it (its node's leader; a leader,
its parent leader) and beats on it every ``heartbeat`` seconds. Here the leader notices at
once a task below whose call breaks (its process died: the kernel closes its connection),
and within ``patience`` seconds one that stops beating (hung, or its node gone); it declares
the dead (up its own call, down every call here), and sends an empty event when it has no
news, so that a task below whose leader hangs or vanishes finds out too
(`slurm_resolver.rpc.detection.heartbeat`). No server hears from more than its node's tasks and its
child leaders.

A task that leaves normally says so first: its silence is no failure. A leader that leaves
names a successor (the lowest task of its node still watching), which takes its place
(`take_over()`). A process that was itself stopped (SIGSTOP, a long pause) does not
count the time it stood still as anyone's silence.

The call itself is taken by `WatchHandler` from the bootstrap's start on: it checks the first beat
(through the server's `Gate`) and hands the call to this task's `Watch` once the task watches.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any, Protocol

from ...cluster import Cluster
from ...faults import Cause, Fault
from ...stacks.progress import Marks
from ..messages import Source, SourceKind, WireError
from ..transport import Refusal, Refused, within
from ..tree import Plan
from ..trust.gate import Gate
from ..waits import Flag, wait_until
from .beats import Beat, decode_beat, encode_first_event
from .deaths import Deaths, stood_still

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)

FIRST_BEAT = 10.0
"""Seconds a server waits for a watch call's first beat (then it refuses the call)."""


class Watched(Protocol):
    """The leader's side of failure detection, once this task watches (a `Watch`)."""

    sources: frozenset[Source]

    def serve(self, source: Source, first: Beat, beats: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """The events of a task below whose first beat was ``first``, until its call ends; raises
        `Refused` at once where it may not watch here."""
        ...


class WatchHandler:
    """The server's side of Watch: a call's first beat checked (`Gate`), then the call served by this
    task's `Watch` once it watches (after the bootstrap's exchange).

    Args:
        gate: the checks every call to this server meets.
    """

    def __init__(self, gate: Gate) -> None:
        self.gate = gate
        self._watched: Watched | None = None
        self._watching = Flag()

    def watch_below(self, watched: Watched | None) -> None:
        """From now on, tasks below may keep their heartbeat here (after the bootstrap's exchange; a
        task below that has the table first waits for this, at most `FIRST_BEAT` seconds); None:
        this task watches nobody (failure detection is off), which a watch call is told at once."""
        self._watched = watched
        self._watching.set()

    async def watch(self, beats: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """A task below keeps its heartbeat here: its first beat is checked, the first event answers
        it, and this task's `Watch` serves the rest; raises `Refused`."""
        gate = self.gate
        rank = gate.identity.rank
        if self._watching.is_set() and self._watched is None:
            raise Refused(Refusal.NOT_LEADER, f"rank {rank} watches no task")
        try:
            with within(FIRST_BEAT):
                first = await beats.__anext__()
        except (StopAsyncIteration, asyncio.TimeoutError) as exc:
            raise Refused(Refusal.INVALID, f"a watch without a first beat within {FIRST_BEAT:g} s "
                                           f"({exc.__class__.__name__})") from None
        beat, header, seal = gate.read(first, decode_beat)
        gate.same_launch(beat.job_key)
        gate.sealed("a watch", beat.source, header, seal, beat.port)
        # A task below may have the table a moment before this one watches (it goes on at once).
        watched = self._watched if await wait_until(self._watching, time.monotonic() + FIRST_BEAT) else None
        if watched is None:
            raise Refused(Refusal.NOT_LEADER, f"rank {rank} watches no task (yet)")
        source = Source.task(beat.source)
        source = source if source in watched.sources else Source.node(beat.node)
        if source not in watched.sources:
            raise Refused(Refusal.NOT_LEADER, f"rank {beat.source} (node {beat.node}) is not watched at rank {rank}")
        events = watched.serve(source, beat, beats)
        yield encode_first_event(beat.nonce, rank, gate.seal())
        async for event in events:
            yield event


class Watch:
    """The calls of the tasks below one task.

    Args:
        deaths: what this task knows of deaths, and where news goes.
        cluster: the bootstrapped cluster (to name tasks).
        plan: this task's place in the tree.
        heartbeat: seconds between heartbeats (and between empty events).
        patience: seconds of silence after which a task below is declared dead.
    """

    def __init__(self, deaths: Deaths, cluster: Cluster, plan: Plan, heartbeat: float, patience: float) -> None:
        self.deaths = deaths
        self.cluster = cluster
        self.plan = plan
        self.heartbeat = heartbeat
        self.patience = patience
        self.sources = plan.sources
        """Whose calls this task takes (its node's tasks and child nodes, while it leads)."""
        self._heard: dict[Source, float] = {}  # when each source last beat
        self._left: set[Source] = set()
        self._holders: dict[Source, int] = {}  # the rank on a source's call (a child node's successor)
        self._progress: dict[Source, Marks] = {}  # each source's last progress marks (its subtree's)
        self._since = time.monotonic()  # when the watched sources were last set
        self._checking: asyncio.Task[None] | None = None

    def _rank(self, source: Source) -> int:
        """The rank a source stands for: its task, or a child node's leader (or its successor)."""
        if source.kind is SourceKind.TASK:
            return source.number
        return self._holders.get(source, int(self.cluster.placement.ranks_on(source.number)[0]))

    def serve(self, source: Source, first: Beat, beats: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """The events for the task below whose first beat was ``first``: its call breaking is its death."""
        if source in self.deaths.below:
            raise Refused(Refusal.INVALID, f"{self.cluster.label(self._rank(source))} is watched already: "
                                           "one call a task")
        queue: asyncio.Queue[bytes] = asyncio.Queue()
        for event in self.deaths.missed():
            queue.put_nowait(event)
        self.deaths.below[source] = queue
        self._heard[source] = time.monotonic()
        self._holders[source] = first.source
        self._left.discard(source)
        return self._events(source, queue, beats)

    async def _events(self, source: Source, queue: asyncio.Queue[bytes], beats: AsyncIterator[bytes]
                      ) -> AsyncIterator[bytes]:
        reader = asyncio.ensure_future(self._read(source, beats))
        getting: asyncio.Future[bytes] | None = None
        try:
            while True:
                if getting is None:
                    getting = asyncio.ensure_future(queue.get())
                waited: set[asyncio.Future[Any]] = {getting, reader}
                done, _ = await asyncio.wait(waited, timeout=self.heartbeat, return_when=asyncio.FIRST_COMPLETED)
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
            if self.deaths.below.get(source) is queue:
                del self.deaths.below[source]
            if source not in self._left and not self.deaths.leaving:
                rank = self._rank(source)
                self.deaths.declare([rank], Fault(Cause.CRASHED, f"{self.cluster.label(rank)} died: its connection "
                                                                 f"to rank {self.plan.rank} closed"))

    def progress(self) -> Marks:
        """The last progress marks of every task below this one."""
        found = Marks()
        for marks in self._progress.values():
            found = found | marks
        return found

    def unheard(self) -> list[Source]:
        """The sources below that do not watch here yet (a moment after the bootstrap), but for those
        that left or are known dead."""
        return [source for source in self.sources if source not in self.deaths.below and source not in self._left
                and self._rank(source) not in self.deaths.failed]

    async def _read(self, source: Source, beats: AsyncIterator[bytes]) -> None:
        """Read one task's beats until its call ends or breaks (then `_events()` ends the call)."""
        with contextlib.suppress(Exception):  # a broken call, a stopped server: the same end
            async for data in beats:
                try:
                    beat = decode_beat(data, self.cluster.world_size)
                except WireError:
                    return
                self._heard[source] = time.monotonic()
                if beat.progress is not None:
                    self._progress[source] = beat.progress
                if beat.failed:
                    self.deaths.declare(list(beat.failed), Fault(beat.cause, beat.reason or "a task below reported it "
                                                                 "dead", beat.status))
                if beat.leaving:
                    self._left.add(source)
                    self._progress.pop(source, None)  # done: its marks stand still, and mean no hang
                    return

    async def _check(self) -> None:
        """Declare dead the tasks below that stop beating (hung, or their node gone)."""
        last = time.monotonic()
        while not self.deaths.leaving:
            await asyncio.sleep(self.heartbeat)
            now = time.monotonic()
            stalled = stood_still(now, last, self.heartbeat)
            last = now
            if stalled:  # the silence before the pause still counts
                self._heard = {source: heard + stalled for source, heard in self._heard.items()}
                self._since += stalled
                continue
            for source in self.sources:
                if source in self._left:
                    continue
                heard = max(self._heard.get(source, self._since), self._since)
                if now - heard > self.patience and self._rank(source) not in self.deaths.failed:
                    rank = self._rank(source)
                    self.deaths.declare([rank], Fault(Cause.SILENT, f"{self.cluster.label(rank)} stopped beating: "
                                                                    f"nothing for {now - heard:.0f} s"))

    def start(self) -> None:
        """Start checking for silence below (on the running event loop), where any task reports here."""
        if self.sources and self._checking is None:
            self._checking = asyncio.ensure_future(self._check())

    async def stop(self) -> None:
        """Stop checking."""
        if self._checking is not None:
            self._checking.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._checking

    # Handing over.

    def successor(self) -> tuple[int, frozenset[Source]] | None:
        """The task of this node that watches in this one's place when it leaves, and the sources
        that left before it; None where no task of its node stays."""
        staying = [s.number for s in self.deaths.below if s.kind is SourceKind.TASK
                   and s not in self._left and s.number not in self.deaths.failed]
        return (min(staying), frozenset(self._left)) if staying else None

    def take_over(self, gone: frozenset[Source]) -> None:
        """Watch in the place of this node's leader, which left normally: its node's other tasks and
        its child nodes (but ``gone``, which left normally too) will call here."""
        position = self.plan.position
        node = {Source.task(int(r)) for r in self.cluster.placement.ranks_on(position)} - {Source.task(self.plan.rank)}
        self.sources = frozenset(node | {Source.node(c) for c in self.plan.tree.children(position)})
        self._left |= gone & self.sources
        self._since = time.monotonic()  # a fresh patience for those that move their call here
        self.start()
