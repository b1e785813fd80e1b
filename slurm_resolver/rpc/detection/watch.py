"""A leader's side of failure detection: the watch calls of the tasks below it.

Every task keeps one long call (``Watch``) to the task above it (its node's leader; a leader,
its parent leader); beats carry news only. Here the leader notices at once a task below whose call
breaks (its process died: the kernel closes its connection), and within about ``patience`` seconds
one whose process stopped, by what it sees of it with no message of its own: a task of its node by
its process's state in the kernel, a child node's leader by gRPC's core pinging it (`Network.lost`).
It declares the dead (up its own call, down every call here). No server hears from more than its
node's tasks and its child leaders, and nothing is sent while nothing happens: a job at rest costs
its tasks no Python work at all for its failure detection.

A task that leaves normally says so first: its silence is no failure. A leader that leaves
names a successor (the lowest task of its node still watching), which takes its place
(`take_over()`). A task holding the GIL in a long C call is alive: its process runs, and its
gRPC core answers pings. A process that was itself stopped for a while blames nobody when it
resumes: what it sees of the others then is what they are.

The call itself is taken by `WatchHandler` from the bootstrap's start on: it checks the first beat
(through the server's `Gate`) and hands the call to this task's `Watch` once the task watches.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, Protocol

from ...cluster import Cluster
from ...faults import Cause, Fault
from ...stacks.progress import Marks
from ..messages import News, Source, SourceKind, WireError
from ..shapes import stream, unary
from ..transport import PROBE, CallFailure, LinkError, Network, Refusal, Refused, end_call, within
from ..tree import Plan
from ..trust.gate import Gate
from ..trust.seals import Authority, Purpose
from ..waits import Later
from .beats import Beat, Lost, decode_beat, decode_lost, encode_event, encode_first_event, encode_lost
from .deaths import SPACING, Deaths, gathered, held, merged
from .processes import Process, Seen, seen

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)

log = logging.getLogger("slurm_resolver")

FIRST_BEAT = 10.0
"""Seconds a server waits for a watch call's first beat (then it refuses the call)."""


class Watched(Protocol):
    """The leader's side of failure detection, once this task watches (a `Watch`)."""

    sources: frozenset[Source]

    def serve(self, source: Source, first: Beat, beats: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """The events of a task below whose first beat was ``first``, until its call ends; raises
        `Refused` at once where it may not watch here."""
        ...

    def unserved(self, source: Source, events: AsyncIterator[bytes]) -> None:
        """The call whose ``events`` `serve` gave for ``source`` ended before they began (cut short as its first
        event went out): the task below may call again, and is not dead for it."""
        ...

    def told(self, lost: Lost) -> bool:
        """Rank ``lost.source`` found ``lost.above`` silent: whether this task watched on it (and now knows)."""
        ...

    def adopts(self, node: int) -> bool:
        """Whether this task takes the call of node ``node``'s leader, below a child node whose holder died
        (`Watch.adopts`); raises `Refused` where it takes no more such calls."""
        ...


class WatchHandler:
    """The server's side of Watch, a part of a task's server: a call's first beat checked (`Gate`), then
    the call served by this task's `Watch` once it watches (after the bootstrap's exchange).

    Args:
        gate: the checks every call to this server meets.
        watched: this task's `Watch`, once failure detection is armed (after the bootstrap's exchange; a
            task below that has the table first waits for it, at most `FIRST_BEAT` seconds); None: this
            task watches nobody (failure detection is off), which a watch call is told at once.
    """

    def __init__(self, gate: Gate, watched: Later[Watched | None]) -> None:
        self.gate = gate
        self.watched = watched

    async def watch(self, beats: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """A task below keeps its heartbeat here: its first beat is checked, the first event answers
        it, and this task's `Watch` serves the rest; raises `Refused`."""
        gate = self.gate
        rank = gate.identity.rank
        if self.watched.came and self.watched.value is None:
            raise Refused(Refusal.NOT_LEADER, f"rank {rank} watches no task")
        try:
            with within(FIRST_BEAT):
                first = await beats.__anext__()
        except StopAsyncIteration:
            raise Refused(Refusal.INVALID, "a watch that ended before its first beat") from None
        except asyncio.TimeoutError:  # the caller's loop stood still (busy cores): it calls again
            raise Refused(Refusal.BUSY, f"a watch without a first beat within {FIRST_BEAT:g} s: call again") from None
        beat, header, seal = gate.read(first, decode_beat)
        gate.same_launch(beat.job_key)
        gate.sealed("a watch", beat.source, header, seal, beat.port)
        # A task below may have the table a moment before this one watches (it goes on at once).
        watched = await self.watched.wait(time.monotonic() + FIRST_BEAT)
        if watched is None:
            raise Refused(Refusal.NOT_LEADER, f"rank {rank} watches no task (yet)")
        source = Source.task(beat.source)
        source = source if source in watched.sources else Source.node(beat.node)
        if source not in watched.sources and not watched.adopts(beat.node):
            raise Refused(Refusal.NOT_LEADER, f"rank {beat.source} (node {beat.node}) is not watched at rank {rank}")
        events = watched.serve(source, beat, beats)
        try:
            yield encode_first_event(beat.nonce, rank, gate.seal(), Process.own())
            async for event in events:
                yield event
        finally:  # the call ended (either side): the watch of that task ends with it, now
            await end_call(events)
            watched.unserved(source, events)

    async def lost(self, message: bytes, deadline: float) -> bytes:
        """A leader's word that the task this one watches on is silent (`Lost`, sealed for this server): answered
        ``taken`` where this task watched on it, else empty; raises `Refused`."""
        gate = self.gate
        lost, header, seal = gate.read(message, decode_lost)
        gate.same_launch(lost.job_key)
        gate.sealed("a word of a silent task", lost.source, header, seal, lost.port)
        watched = self.watched.value
        if watched is None:
            raise Refused(Refusal.NOT_LEADER, f"rank {gate.identity.rank} watches no task (yet)")
        return TAKEN if watched.told(lost) else b""


WATCH = stream("Watch", WatchHandler, WatchHandler.watch)
"""Heartbeats up, failures down, for as long as the job runs."""
LOST = unary("Lost", WatchHandler, WatchHandler.lost, most_request=2048, most_answer=16)
"""A child node's leader found silent, told to the leaders of that node's child nodes."""
TAKEN = b"\x0a\x05taken"
"""Lost's answer where the task told watched on the silent one (an Envelope whose header is ``taken``)."""


class Watch:
    """The calls of the tasks below one task, and whether those tasks live.

    A task below that dies closes its call (the kernel closes a dead process's connections), which
    declares it dead at once. One that stops (SIGSTOP, a debugger, its node without power) says nothing,
    and is found by what this task sees of it, with no message of its own: a task of this node by its
    process's state in the kernel (read every half ``patience``; stopped for ``patience`` seconds is a
    death), a child node's leader by the network (`Network.lost`: gRPC's core pings it, and it answers
    them whatever its Python does). A task holding the GIL in a long C call is neither.

    Args:
        deaths: what this task knows of deaths, and where news goes.
        cluster: the bootstrapped cluster (to name tasks, and reach child nodes' leaders).
        plan: this task's place in the tree.
        network: to watch the leaders of its child nodes.
        heartbeat: seconds between two beats of progress marks (none where hangs are not judged).
        patience: seconds a task below may be stopped, or silent, before it is declared dead (this node's tasks'
            processes are looked at every half patience).
        authority: seals this task's word (`Lost`) to the child leaders of a child node whose leader it found
            silent: its child leaders ping it only rarely (`Heartbeat`); None: no word is sent (a test's).

    Attributes:
        told: called with a leader's word that the task this one watches on is silent; whether it did
            (`Heartbeat.told`, set by `FailureDetector`).
    """

    seen: Callable[[Process], Seen] = staticmethod(seen)
    """What the kernel says of a process (a test's stand-in stops one)."""

    @property
    def grace(self) -> float:
        """Seconds after which a task of this node that never called here is looked for (its process ended
        before it did): two patiences; one whose server still listens is only slow (thousands of tasks make their
        call at once, on busy cores), and is looked for again."""
        return 2 * self.patience

    @property
    def most_between_probes(self) -> float:
        """The longest a task of this node that never called here but still listens goes unprobed: the wait
        after each probe that finds it listening doubles from half a patience up to this (a real task calls
        within a second; only a machine far past its cores keeps thousands waiting, and every probe is a
        connection its servers accept)."""
        return 4 * self.patience

    def __init__(self, deaths: Deaths, cluster: Cluster, plan: Plan, network: Network, heartbeat: float,
                 patience: float, authority: Authority | None = None) -> None:
        self.deaths = deaths
        self.authority = authority
        self.told: Callable[[Lost], bool] = lambda lost: False
        self.cluster = cluster
        self.plan = plan
        self.network = network
        self.heartbeat = heartbeat
        self.patience = patience
        self.sources = plan.sources
        """Whose calls this task takes (its node's tasks and child nodes, while it leads)."""
        self._left: set[Source] = set()
        self._holders: dict[Source, int] = {}  # the rank on a source's call (a child node's successor)
        self._progress: dict[Source, Marks] = {}  # each source's last progress marks (its subtree's)
        self._processes: dict[Source, Process] = {}  # this node's tasks below, whose state the kernel tells
        self._stopped: dict[Source, float] = {}  # since when each was seen stopped
        self._lost: dict[Source, asyncio.Task[None]] = {}  # a child node's leader, watched over the network
        self._watching: dict[Source, int] = {}  # the rank watched over the network for each child node
        self._since = time.monotonic()  # when the watched sources were last set
        self._checking: asyncio.Task[None] | None = None
        self._probes: dict[Source, tuple[float, float]] = {}  # an unheard task found listening: next probe, wait
        self._unstarted: dict[Source, tuple[asyncio.Queue[News], AsyncIterator[bytes]]] = {}  # served, not begun
        self._reading: dict[Source, asyncio.Future[None]] = {}  # what reads a begun call's beats (cancelled: its end)
        self._looks: dict[Source, asyncio.Task[None]] = {}  # a look over the network that a call for the source ends
        self._succeeded = False  # whether this task took the place of its node's leader (`take_over`)
        self._adopted = 0  # the calls of nodes below its child nodes this task took (`adopts`)
        self._tasks: set[asyncio.Task[None]] = set()  # what runs on after a death (`_background`)
        self._unheard = True  # whether some task of this node is still to be looked for as one that never called
        self._last: tuple[tuple[News, ...], bytes] = ((), b"")  # the last event written, and what it told

    def _rank(self, source: Source) -> int:
        """The rank a source stands for: its task, or a child node's leader (or its successor)."""
        if source.kind is SourceKind.TASK:
            return source.number
        return self._holders.get(source, int(self.cluster.placement.ranks_on(source.number)[0]))

    def serve(self, source: Source, first: Beat, beats: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """The events for the task below whose first beat was ``first``: its call breaking is its death."""
        if source in self.deaths.below:
            self._replace(source, first.source)
        queue: asyncio.Queue[News] = asyncio.Queue()
        for event in self.deaths.missed():
            queue.put_nowait(event)
        self.deaths.below[source] = queue
        self._holders[source] = first.source
        self._left.discard(source)
        self._stop_looking(source)  # a task of the source lives, and watches here from now on
        if source.kind is SourceKind.TASK:
            process = first.process
            if process is not None and process.pid != Process.own().pid and self.seen(process) is not Seen.UNKNOWN:
                self._processes[source] = process  # another process, seen from here: its state is looked at
                self._checks()
        elif source not in self._lost or self._watching.get(source) != first.source:  # a successor, say
            self._lose(source, first.source)
        events = self._events(source, queue, beats)
        self._unstarted[source] = (queue, events)
        return events

    def _replace(self, source: Source, caller: int) -> None:
        """Make room for ``caller``'s call for ``source``, which another call holds: the call of a task known dead
        whose connection stays open (its process stopped, its node without power: nothing closes it) is ended,
        and ``caller``, a task of that node, takes its place (the successor of a node's dead leader). Raises
        `Refused` otherwise: ``BUSY`` (call again) where the holder's death is not known here yet, or its previous
        call is ending; ``INVALID`` for a second call of a task (one call a task)."""
        holder, label = self._rank(source), self.cluster.label
        served = self._unstarted.get(source)
        if served is not None and served[0] is self.deaths.below[source]:  # cut short, its end not told yet
            raise Refused(Refusal.BUSY, f"{label(holder)}'s previous watch is ending: call again")
        if (holder == caller or source.kind is SourceKind.TASK
                or self.cluster.placement.node_index(caller) != source.number):
            raise Refused(Refusal.INVALID, f"{label(holder)} is watched already: one call a task")
        if holder not in self.deaths.failed:
            raise Refused(Refusal.BUSY, f"{label(holder)} holds node {source.number}'s watch here, and is not known "
                                        f"dead here yet: call again")
        del self.deaths.below[source]  # its call's end declares nobody (`_events`)
        reading = self._reading.pop(source, None)
        if reading is not None:
            reading.cancel()  # which ends the call
        log.debug("slurm_resolver: rank %d takes node %d's watch from rank %d, dead, for rank %d", self.plan.rank,
                  source.number, holder, caller)

    async def _events(self, source: Source, queue: asyncio.Queue[News], beats: AsyncIterator[bytes]
                      ) -> AsyncIterator[bytes]:
        """News down the call, as it comes, each event with all that waited for it (nothing else: the call's
        connection tells that this task lives). Its end is its holder's death, unless another call took its place
        (`_replace`)."""
        served = self._unstarted.get(source)
        if served is not None and served[0] is queue:
            del self._unstarted[source]  # begun: its end is told below
        reader = asyncio.ensure_future(self._read(source, beats))
        if self.deaths.below.get(source) is queue:
            self._reading[source] = reader
        getting: asyncio.Future[News] | None = None
        sent = -SPACING  # when the last event went (`SPACING` between two)
        try:
            while True:
                if getting is None:
                    getting = asyncio.ensure_future(queue.get())
                waited: set[asyncio.Future[Any]] = {getting, reader}
                done, _ = await asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED)
                if getting not in done:
                    break  # the call ended
                news, getting = getting.result(), None
                wait = held(news, sent)
                if wait and (await asyncio.wait({reader}, timeout=wait))[0]:
                    break  # the call ended meanwhile
                sent = time.monotonic()
                yield self._event(gathered(news, queue))
        finally:
            if getting is not None:
                getting.cancel()
            reader.cancel()
            if self.deaths.below.get(source) is queue:  # (else another call took its place: it ends alone)
                self._end(source)

    def _end(self, source: Source) -> None:
        """The call that holds ``source`` ended: unless its holder left normally, it is dead."""
        del self.deaths.below[source]
        self._reading.pop(source, None)
        losing = self._lost.pop(source, None)
        if losing is not None:
            losing.cancel()  # its end is told here
        self._processes.pop(source, None)
        if source not in self._left and not self.deaths.leaving:
            rank = self._rank(source)
            self.deaths.declare([rank], Fault(Cause.CRASHED, f"{self.cluster.label(rank)} died: its connection "
                                                             f"to rank {self.plan.rank} closed"))

    def _event(self, news: list[News]) -> bytes:
        """The event that tells ``news``: written once for every call below that tells the same (each call's queue
        holds the very news objects the others' do, in the same order: a burst costs a leader one event written
        for its calls below, not one a call)."""
        told, written = self._last
        if len(told) != len(news) or any(a is not b for a, b in zip(told, news)):
            written = encode_event(merged(news))
            self._last = (tuple(news), written)
        return written

    def unserved(self, source: Source, events: AsyncIterator[bytes]) -> None:
        """The call whose ``events`` were served for ``source`` ended before they began (over gRPC: a loaded server
        cut it short as its first event went out, or the caller went away then): its place is free for its next
        call (one that comes before this is told is asked to call again), and nobody is declared dead for the call's
        end (a task below that died then is looked for as one that never called, a child node's leader found by the
        network)."""
        served = self._unstarted.get(source)
        if served is None or served[1] is not events:
            return  # begun (its end was told), or another call's
        del self._unstarted[source]
        if self.deaths.below.get(source) is served[0]:
            del self.deaths.below[source]  # what else watches it (its process, the network) goes on
            self._unheard = True  # and, where it never calls again, it is looked for as one that never called
            if self.sources:
                self._checks()

    def _lose(self, source: Source, rank: int) -> None:
        """Watch the leader of a child node (``rank``: it, or its successor) over the network from now on."""
        old = self._lost.pop(source, None)
        if old is not None:
            old.cancel()
        self._watching[source] = rank
        self._lost[source] = asyncio.ensure_future(self._losing(source, rank))

    async def _losing(self, source: Source, rank: int) -> None:
        """Watch a child node's leader over the network: declared dead once it stops answering, and its child
        nodes' leaders told."""
        cluster = self.cluster
        why = await self.network.lost(*cluster.endpoint(rank), self.patience)
        if source not in self._left and not self.deaths.leaving and rank not in self.deaths.failed:
            words = f"{cluster.label(rank)} stopped answering: {why} (its process stopped or ended, or its node gone)"
            self.deaths.declare([rank], Fault(Cause.SILENT, words))
            self._silenced(source.number, rank, words)

    def _silenced(self, position: int, holder: int, words: str) -> None:
        """Node ``position``'s holder, ``holder``, was declared silent here: its child nodes told (`_tell_lost`) and
        its other tasks looked at (`_bereft`), each a task of its own, so that a successor's call for the node, which
        ends the watch of the holder (`_lose`), does not end them (the telling goes on; the look ends then)."""
        self._background(self._tell_lost(position, holder, words))
        self._look(Source.node(position), self._bereft(position, holder))

    def _look(self, source: Source, look: Coroutine[Any, Any, None]) -> None:
        """Run ``look`` at tasks of ``source`` that may be silent (`_bereft`: a silent node's other tasks; `_mute`: a
        node-mate that never called this successor) until it ends, or a call for ``source`` comes (`serve`): a task
        of it lives, and watches here. One look a source: a new one ends the one before."""
        self._stop_looking(source)
        task = self._looks[source] = self._background(look)
        task.add_done_callback(lambda done: self._looks.pop(source) if self._looks.get(source) is done else None)

    def _stop_looking(self, source: Source) -> None:
        """End the look at ``source`` (`_look`), where one runs."""
        looking = self._looks.pop(source, None)
        if looking is not None:
            looking.cancel()

    def _background(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """``work`` on a task of its own, cancelled by `stop()` where it has not ended."""
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _bereft(self, position: int, holder: int) -> None:
        """Node ``position``'s holder here, ``holder``, is silent: its node's other tasks that are silent too (none
        answers a connection or a ping: its node without power, its processes stopped) are declared dead with it,
        together, once every look ended (within about two patiences: before, only the holder was, nobody else
        watching them). A task of the node that lives answers gRPC's pings whatever its Python does, and never
        ends its look; one whose server is gone ended, normally or not, which only its own leader could tell: neither
        is declared. A call for the node here (its successor) ends the look (`serve`)."""
        cluster, failed = self.cluster, self.deaths.failed
        ranks = [r for r in map(int, cluster.placement.ranks_on(position)) if r != holder and r not in failed]
        checks = [asyncio.ensure_future(self._silent(r, 2 * self.patience)) for r in ranks]  # on busy cores: two
        if not checks:
            return
        try:
            await asyncio.wait(checks, timeout=3 * self.patience + 2 * PROBE)
        finally:
            for check in checks:
                check.cancel()
            await asyncio.gather(*checks, return_exceptions=True)  # their channels closed before this ends
        found = [(r, c.result()) for r, c in zip(ranks, checks) if not c.cancelled()
                 and c.exception() is None and c.result() is not None and r not in failed]
        if found and not self.deaths.leaving:
            silent = [r for r, _ in found]
            words = (f"{len(silent)} more of {cluster.placement.node_of(holder)}'s tasks stopped answering with "
                     f"{cluster.label(holder)}: {found[0][1]} (its node without power, or its processes stopped)")
            self.deaths.declare(silent, Fault(Cause.SILENT, words))

    async def _silent(self, rank: int, first: float | None) -> str | None:
        """Why the task ``rank`` is silent (its server takes no gRPC connection within ``first`` seconds, None: the
        network's bound, or answers no ping for a patience: a stopped process's kernel may still take the bare
        connection); None where its server is gone (it ended). Never returns while it answers."""
        host, port = self.cluster.endpoint(rank)
        if await self.network.gone(host, port):
            return None
        why = await self.network.lost(host, port, self.patience, first)
        return None if await self.network.gone(host, port) else why

    async def _tell_lost(self, position: int, rank: int, words: str) -> None:
        """Tell the leaders of node ``position``'s child nodes that ``rank``, who watched there for it, is silent:
        they watch on it, and ping it only rarely (`heartbeat.BACKSTOP`): its parent does."""
        if self.authority is not None:
            await asyncio.gather(*(self._tell_node(child, rank, words)
                                   for child in self.plan.tree.children(position)))

    async def _tell_node(self, position: int, rank: int, words: str) -> None:
        """Tell node ``position``'s tasks (at once: a successor may watch in its leader's place) that ``rank`` is
        silent, again every patience until one took the word, or all answered without (none watched on it). A node
        that answers nothing may be gone, or its Python held in a long C call (it takes the word once it is
        free): the first of its tasks whose server still listens is watched over the network meanwhile, and once
        it is lost too, it is declared dead and the node's own child nodes are told."""
        try:
            await self._telling(position, rank, words)
        except Exception as exc:  # noqa: BLE001 - the network closed as this task stops: the backstop pings remain
            log.debug("slurm_resolver: rank %d could not tell node %d that rank %d is silent: %r", self.plan.rank,
                      position, rank, exc)

    async def _telling(self, position: int, rank: int, words: str) -> None:
        cluster = self.cluster
        holder = None
        for candidate in map(int, cluster.placement.ranks_on(position)):  # a leader that left: its successor
            if not await self.network.gone(*cluster.endpoint(candidate)):
                holder = candidate
                break
        if holder is None:
            return  # every task of that node ended: the calls of the tasks below it broke, which they heard
        silent = asyncio.ensure_future(self.network.lost(*cluster.endpoint(holder), self.patience, self.patience))
        telling: asyncio.Future[bool] | None = None
        try:
            while not self.deaths.leaving:
                telling = asyncio.ensure_future(self._word(position, rank, words))
                done, _ = await asyncio.wait({telling, silent}, return_when=asyncio.FIRST_COMPLETED)
                if telling in done and telling.result():
                    return
                if silent in done:
                    break
        finally:
            for waiting in (telling, silent):
                if waiting is not None and not waiting.done():
                    waiting.cancel()
        if self.deaths.leaving or holder in self.deaths.failed:
            return
        words = (f"{cluster.label(holder)} stopped answering: {silent.result()}, and took no word that "
                 f"{cluster.label(rank)} is silent (its node gone)")
        self.deaths.declare([holder], Fault(Cause.SILENT, words))
        self._silenced(position, holder, words)

    async def _word(self, position: int, rank: int, words: str) -> bool:
        """Tell every task of node ``position`` that ``rank`` is silent: whether one took the word, or all answered
        (none watched on it), within a patience. A task that cannot take it yet (busy, not yet watching) has not
        answered."""
        assert self.authority is not None
        cluster, authority = self.cluster, self.authority
        later = (Refusal.BUSY, Refusal.UNREADY, Refusal.NOT_LEADER)

        async def tell(told: int) -> bytes | None:
            host, port = cluster.endpoint(told)
            lost = Lost(cluster.launch.key, self.plan.rank, self.plan.position, port, rank, words)
            message = encode_lost(lost, lambda header: authority.seal(Purpose.CALL, header))
            try:
                with within(self.patience):
                    return await self.network.connect(host, port).unary(LOST, message, self.patience)
            except LinkError as exc:
                return b"" if exc.kind is CallFailure.REFUSED and exc.code not in later else None
            except Exception:  # noqa: BLE001 - no answer in time, or the network closing: not answered
                return None

        answered = True
        tells = [asyncio.ensure_future(tell(int(r))) for r in cluster.placement.ranks_on(position)]
        try:
            for each in asyncio.as_completed(tells):
                answer = await each
                if answer == TAKEN:
                    return True
                answered = answered and answer is not None
            return answered
        finally:  # once one took it, the others are not told (nor waited for: up to a patience each)
            for telling in tells:
                telling.cancel()
            await asyncio.gather(*tells, return_exceptions=True)

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
                if beat.progress is not None:
                    self._progress[source] = beat.progress
                for died in beat.died:
                    self.deaths.heard(died, "a task below reported it dead")
                if beat.leaving:
                    self._left.add(source)
                    self._progress.pop(source, None)  # done: its marks stand still, and mean no hang
                    return

    def _checks(self) -> None:
        """Look at the tasks below from now on (on the running event loop), where any is to be looked at."""
        if self._checking is None or self._checking.done():
            self._checking = asyncio.ensure_future(self._check())

    async def _check(self) -> None:
        """Every half patience: declare dead this node's tasks below that are stopped for the patience, and,
        once the grace passed, the sources that never called here (their process ended before); then, with no
        process left to look at, stop (tasks in this process: nothing to look at, the job at rest costs nothing)."""
        self._unheard = True  # the tasks that never called are still to be looked for
        while not self.deaths.leaving:
            until_grace = self._since + self.grace - time.monotonic()  # nothing to look at before, unless processes
            await asyncio.sleep(until_grace if self._unheard and not self._processes and until_grace > 0
                                else self.patience / 2)
            now = time.monotonic()
            for source, process in list(self._processes.items()):
                if self.seen(process) is not Seen.STOPPED:
                    self._stopped.pop(source, None)
                    continue
                since = self._stopped.setdefault(source, now)
                rank = self._rank(source)
                if now - since >= self.patience and source not in self._left and rank not in self.deaths.failed:
                    self.deaths.declare([rank], Fault(Cause.SILENT, f"{self.cluster.label(rank)} stopped answering: "
                                                                    f"its process is stopped (SIGSTOP, a debugger) "
                                                                    f"for {now - since:.0f} s"))
            if self._unheard and now - self._since >= self.grace:
                self._unheard = await self._never_called(now)
            if not self._unheard and not self._processes:
                return

    async def _never_called(self, now: float) -> bool:
        """Declare dead this node's tasks that never called here and whose server no longer listens (it refuses a
        connection: their process ended right after the bootstrap); whether some that never called still listen,
        or do not answer the probe in time (slow to call, on busy cores: looked at again)."""
        cluster = self.cluster
        waiting = False
        for source in self.unheard():
            if source.kind is SourceKind.NODE:
                continue  # watched over the network from the start
            after, wait = self._probes.get(source, (now, self.patience / 4))
            if now < after:
                waiting = True
                continue
            rank = self._rank(source)
            if not await self.network.gone(*cluster.endpoint(rank)):
                wait = min(2 * wait, self.most_between_probes)
                self._probes[source] = (now + wait, wait)
                waiting = True
                if self._succeeded and source not in self._looks and rank not in self.deaths.failed:
                    self._look(source, self._mute(source, rank))
                continue
            self.deaths.declare([rank], Fault(Cause.CRASHED, f"{cluster.label(rank)} ended before it watched at rank "
                                                             f"{self.plan.rank}: its server is gone"))
        return waiting

    async def _mute(self, source: Source, rank: int) -> None:
        """A task of this node that never called here since this task took its leader's place, and still listens:
        declared dead where it answers no gRPC connection within the network's bound for a first one
        (`FIRST_CONNECTION` over gRPC: a living task on cores past their load connects within it) or no ping for a
        patience (`_silent`: stopped with its leader, SIGSTOP or a debugger; nobody else watches it, its call having
        been its dead leader's). Its call here, as it lives, ends the look (`serve`); else it runs as long as the
        task answers, as the look at a child node's leader does (`_lose`)."""
        why = await self._silent(rank, None)
        if why is not None and source in self.unheard() and not self.deaths.leaving:
            self.deaths.declare([rank], Fault(Cause.SILENT, f"{self.cluster.label(rank)} stopped answering: it never "
                                                            f"watched at rank {self.plan.rank}, which took its node's "
                                                            f"leader's place, and {why}"))

    def start(self) -> None:
        """Start watching (on the running event loop), where any task reports here: the leaders of child nodes
        over the network at once (before their call comes: one that ends right after the bootstrap is found)."""
        if self.sources:
            self._checks()
            for source in self.sources:
                if source.kind is SourceKind.NODE and source not in self._lost and source not in self._left:
                    self._lose(source, self._rank(source))

    async def stop(self) -> None:
        """Stop watching."""
        for losing in [*self._lost.values(), *([self._checking] if self._checking is not None else []),
                       *self._tasks]:
            losing.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await losing
        self._lost.clear()
        self._looks.clear()

    def adopts(self, node: int) -> bool:
        """Whether this task takes the call of node ``node``'s leader (or successor) from now on: ``node`` is below one
        of this task's child nodes (not one itself), whose holder died (that node's leader calls here where no task
        between took its call, `Heartbeat._adopters`: its parent node died whole, or its nodes above died two deep).
        At most the square of the fan-out such calls a task, so that a server takes a bounded number of calls
        whatever dies below it: one more is refused at once (`Refused`, ``FULL``), and its caller looks further up
        without asking again."""
        tree = self.plan.tree
        child = tree.parent(node) if 0 < node < tree.size else None  # this task's child node above ``node``
        while child is not None and tree.parent(child) != self.plan.position:
            child = tree.parent(child)
        if child is None or Source.node(child) not in self.sources or self.deaths.leaving:
            return False
        if self._rank(Source.node(child)) not in self.deaths.failed:
            return False  # the holder of the child node between lives: the call goes there
        if self._adopted >= tree.fanout ** 2:
            raise Refused(Refusal.FULL, f"rank {self.plan.rank} takes no more calls of nodes below its dead child "
                                           f"nodes ({self._adopted}): call further up")
        self.sources = self.sources | {Source.node(node)}
        self._adopted += 1
        log.debug("slurm_resolver: rank %d watches node %d, below its dead child node %d", self.plan.rank, node, child)
        return True

    # Handing over.

    def successor(self) -> tuple[int, frozenset[Source]] | None:
        """The task of this node that watches in this one's place when it leaves, and the sources
        that left before it; None where no task of its node stays."""
        staying = [s.number for s in self.deaths.below if s.kind is SourceKind.TASK
                   and s not in self._left and s.number not in self.deaths.failed]
        return (min(staying), frozenset(self._left)) if staying else None

    def take_over(self, gone: frozenset[Source]) -> None:
        """Watch in the place of this node's leader, which left normally or died: its node's other tasks and
        its child nodes (but ``gone``, which left normally too) will call here. Nothing while this task leaves."""
        if self.deaths.leaving:
            return
        position = self.plan.position
        node = {Source.task(int(r)) for r in self.cluster.placement.ranks_on(position)} - {Source.task(self.plan.rank)}
        self.sources = frozenset(node | {Source.node(c) for c in self.plan.tree.children(position)})
        self._left |= gone & self.sources
        self._since = time.monotonic()  # a fresh patience for those that move their call here
        self._succeeded = True
        self._probes.clear()
        if self._checking is not None:
            self._checking.cancel()
        self._checking = None
        self.start()
