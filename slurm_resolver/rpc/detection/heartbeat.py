"""A task's own side of failure detection: its watch call to the task above.

The call carries this task's news up (deaths found below, its own end, and, where hangs are
judged, its subtree's progress marks, at most one beat a ``heartbeat``) and brings the events down
(deaths): nothing travels while nothing happens. Its first event must carry a seal of this job for
the call's nonce: a server that is not a task of the job cannot answer it. A broken call is the
death of the task above; one that stops (its process stopped, its node gone) is found without a
message from it, as the task above finds this one (`slurm_resolver.rpc.detection.watch`): on this
node by its process's state in the kernel; across nodes by the word of the node above it, which pings
it (`Lost`: one ping an edge of the tree, not two), or, where it is the top of the tree, by gRPC's
core pinging it. When the task
above leaves normally it names a successor, a task of its own node that watches in its place: the
successor takes its sources over and watches on the task it watched on, and the others move their
call to the successor, so that failure detection outlives a leader whose work is done. When the task above
dies, the tasks that watched on it watch elsewhere (`Heartbeat._adopters`): the lowest task of its node
still listening takes its place, and where its node died whole, the node above takes its child nodes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from ...cluster import Cluster
from ...faults import Cause, Fault
from ...stacks.progress import Marks
from ..messages import HandOver, News, Source, WireError
from ..primitives import fresh, uniform
from ..transport import CallFailure, Link, LinkError, Network, Refusal, end_call, within
from ..tree import Tree
from ..trust.seals import Authority, Purpose
from ..wire import NONCE, unwrap
from .beats import Beat, Event, Lost, decode_event, encode_beat, encode_first_beat
from .deaths import SPACING, Deaths, gathered, held, merged
from .processes import Process, Seen, seen
from .watch import WATCH

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)

BACKSTOP = 10
"""How many times rarer than its parent's pings a child node's leader pings its parent itself: the backstop where the
word of its silence cannot come (the task that pings it dead or gone too): found within about fifteen patiences."""

log = logging.getLogger("slurm_resolver")

_NO_NEWS = News()
"""A beat's news where none came (progress marks alone, or none)."""


class _Candidates:
    """Who may take a task's call after the task above it died (`Heartbeat._adopters`): ``ranks`` in turn, then the
    nodes above node ``climbing`` (a position; None: none), one at a time (`Heartbeat._next`)."""

    __slots__ = ("ranks", "climbing")

    def __init__(self, ranks: list[int], climbing: int | None) -> None:
        self.ranks = ranks
        self.climbing = climbing


class _Silent(Exception):
    """The task above stopped answering (why, in words)."""


class _Stranger(Exception):
    """What answered the watch is not a task of this job."""


ADOPTING = 3
"""Patiences a task whose task above died asks a candidate that still listens to take its call (it takes it once it
saw the death: at once where the dead task's process ended, after a patience where it stopped)."""


async def _paused(pause: float) -> float:
    """Wait about ``pause`` seconds before a call is made again; the next wait (doubled, up to a second)."""
    await asyncio.sleep(pause * uniform(0.5, 1.5))
    return min(1.0, 2 * pause)


async def _cancelled(waiting: asyncio.Future[Any] | None) -> None:
    """``waiting`` cancelled and ended (what it ended with, where it ended before the cancel came, dropped)."""
    if waiting is not None:
        waiting.cancel()
        await asyncio.wait({waiting})
        if not waiting.cancelled():
            waiting.exception()


class Heartbeat:
    """One task's call up, and the calls that follow it when the task above hands over.

    Args:
        deaths: what this task knows of deaths, and where news goes.
        cluster: the bootstrapped cluster (bound ports, names).
        rank: this task; ``node``: its node's position.
        above: the rank it watches on first (None at the top of the tree).
        link: the link to ``above`` (the rounds' connection), or None to make one.
        network: to reach the tasks it may move to.
        authority: seals the first beat and checks the first event.
        heartbeat: seconds between two beats of progress marks; ``patience``: how long the task above may stop
            before it is dead (its process on this node is looked at every half patience).
        take_over: called with the sources that left when this task becomes the successor.
        progress: the progress marks of this task and the tasks below it, or None where no hang is judged
            (then no beat carries marks).
        tree: the tree of nodes: a task above on another node that is not the top is pinged by its own parent
            node, whose word (`told`) tells its silence; None: every such task is pinged from here (a test's).
    """

    seen: Callable[[Process], Seen] = staticmethod(seen)
    """What the kernel says of a process (a test's stand-in stops one)."""
    process: Process = Process.own()
    """This task's process, as its first beat names it."""

    def __init__(self, deaths: Deaths, cluster: Cluster, rank: int, node: int, above: int | None, link: Link | None,
                 network: Network, authority: Authority, heartbeat: float, patience: float,
                 take_over: Callable[[frozenset[Source]], None], progress: Callable[[], Marks] | None = None,
                 tree: Tree | None = None) -> None:
        self.deaths = deaths
        self.cluster = cluster
        self.rank = rank
        self.node = node
        self.above = above
        """The rank this task watches on now (None: nobody)."""
        self._first = (above, link)
        self.network = network
        self.authority = authority
        self.heartbeat = heartbeat
        self.patience = patience
        self._take_over = take_over
        self._progress = progress
        self.calls = 0
        """How many watch calls this task has made up (the beats of an earlier one stop)."""
        self.answered = False
        """Whether the task above answered the latest call's first beat (its first event, checked)."""
        self.tree = tree
        self._words: dict[int, asyncio.Future[str]] = {}  # a task above found silent by the node above it: why

    async def _beats(self, port: int, nonce: bytes, mine: int) -> AsyncIterator[bytes]:
        """This task's beats on call number ``mine``, each with news (or new progress marks); they end (and so does
        the call) once it follows another call. The number is the call's from its making, not from the first beat
        its stream asks for: gRPC may ask an ended call's stream for its first beat after the next call began."""
        first = Beat(self.cluster.launch.key, self.rank, self.node, nonce, port, process=self.process)
        yield encode_first_beat(first, lambda header: self.authority.seal(Purpose.CALL, header))
        progress, told = self._progress, None
        sent = -SPACING  # when the last beat with news went (`SPACING` between two)
        while self.calls == mine:  # a call left behind takes no beat from the one that follows it
            news, ended = _NO_NEWS, False
            try:
                if progress is None:
                    news = await self.deaths.up.get()
                else:  # marks go up at most once a heartbeat, where they moved
                    try:
                        with within(self.heartbeat):
                            news = await self.deaths.up.get()
                    except asyncio.TimeoutError:
                        news = _NO_NEWS
                wait = held(news, sent)
                if wait:
                    await asyncio.sleep(wait)
            except asyncio.CancelledError:  # the call ended (its task above died): gRPC stopped reading its beats,
                ended = True  # which end as a stream does
            if ended or self.calls != mine:  # news taken for this call (deaths found below, waiting for the spacing)
                if news:  # goes up on the next, not lost with this one
                    self.deaths.up.put_nowait(news)
                return
            marks = progress() if progress is not None else None
            if not news and marks == told:
                continue  # nothing to say
            told = marks
            carried = gathered(news, self.deaths.up) if news else []
            if news.failed:
                sent = time.monotonic()
            yield encode_beat(merged(carried), marks)
            if carried and carried[-1].leaving:
                return

    def _call(self, above: int, nonce: bytes) -> AsyncIterator[bytes]:
        host, port = self.cluster.endpoint(above)
        first_above, link = self._first
        if above != first_above or link is None:
            link = self.network.connect(host, port)
        self.calls += 1
        return link.stream(WATCH, self._beats(port, nonce, self.calls))

    async def _follow_one(self, above: int, candidate: bool = False) -> Event | None:
        """Follow one call to ``above`` until it ends: its last event if it left normally, else None
        (a death declared, or this task leaving). Raises as the call broke, or the task above stopped; a
        ``candidate`` (`_adopters`) on another node raises too where it stops answering before its first event."""
        nonce = fresh(NONCE)
        self.answered = False
        events = self._call(above, nonce).__aiter__()
        pending: asyncio.Future[Any] | None = None  # the first event, then the end of the others (`_heard`)
        guard: asyncio.Future[str] | None = None
        # Where the node above this one's pings the task above, its word may come before that task's first event; a
        # candidate may be dead too (its node gone): it answers within a patience, or the next is tried.
        word = asyncio.ensure_future(asyncio.shield(self._word(above))) if self._pinged_above(above) else None
        told = asyncio.ensure_future(self._unanswered(above)) if candidate else word  # a candidate: to its 1st event
        try:
            while True:  # the first event, then the others, read by one task (not one a message)
                if pending is None:
                    pending = asyncio.ensure_future(events.__anext__() if guard is None else self._heard(events))
                waited: set[asyncio.Future[Any]] = {pending, *(f for f in (guard, told) if f is not None)}
                done, _ = await asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED)
                if pending not in done:
                    why = next(f for f in (told, guard) if f is not None and f in done)
                    raise _Silent(why.result())
                if guard is not None:
                    ended: Event | None = pending.result()  # raises as the call broke
                    return ended
                try:
                    data, pending = pending.result(), None
                except StopAsyncIteration:
                    return None
                guard = asyncio.ensure_future(self._guard(above, self._check_first(data, nonce)))  # the first event:
                self.answered = True  # the task above, proven
                if told is not word:  # a candidate that answered: watched as the task above now
                    await _cancelled(told)
                    told = word
        finally:  # end the call itself, so that the task above sees it end (a cancelled task is a dead one)
            for waiting in (pending, guard, told, word):
                if waiting is not None and not waiting.done():
                    await _cancelled(waiting)  # (one that ended on its own before the cancel came: the call broke)
            self.calls += 1  # its beats end with it (a beat written into a call that ended is an error gRPC
            await end_call(events)  # formats a traceback of: 3 ms, in every task whose task above died)

    async def _unanswered(self, candidate: int) -> str:
        """Why a candidate (`_adopters`) will not take this task's call: its server gone (it died with the task above:
        a process's sockets close one by one as it ends, so that a probe made as it died found it listening; probed
        four times a patience for a patience), or, after that patience, silent (`Network.lost`: a node without power
        answers no ping). A candidate that lives is waited for however busy it is: a call given up after the
        candidate took it would be this task's death to it. A candidate of this node (whose silence makes this task
        take its node's leader's place, `_succeed`) gets the network's whole bound for its first connection
        (`FIRST_CONNECTION` over gRPC: a living task on cores past their load), another node's a patience."""
        host, port = self.cluster.endpoint(candidate)
        until = time.monotonic() + self.patience
        while time.monotonic() < until:
            await asyncio.sleep(self.patience / 4)
            if await self.network.gone(host, port):
                return "its server is gone"
        same_node = self.cluster.placement.node_index(candidate) == self.node
        return await self.network.lost(host, port, self.patience, None if same_node else self.patience)

    async def _heard(self, events: AsyncIterator[bytes]) -> Event | None:
        """The events after the first, the deaths they tell heard, until the call ends: its last event where the task
        above leaves normally, else None; raises as the call breaks."""
        world = self.cluster.world_size
        async for data in events:
            event = decode_event(data, world)
            for died in event.died:
                self.deaths.heard(died, "reported dead", from_above=True)
            if event.leaving:
                return event
        return None

    def _pinged_above(self, above: int) -> bool:
        """Whether the task ``above`` is on this node's parent node, which the node above it pings (not the top of the
        tree): its silence is told from there (`told`). A task adopted further up (`_adopters`) pings its own."""
        position = self.cluster.placement.node_index(above)
        tree = self.tree
        return tree is not None and tree.parent(self.node) == position and tree.parent(position) is not None

    async def _guard(self, above: int, process: Process | None) -> str:
        """Return, with why, once the task ``above`` stops answering; never where this cannot be told (its
        call's end then tells its death). On this node: its process stopped for the patience, as the kernel
        says; across nodes: the network's word (gRPC's core pings it) where it is the top of the tree, else the
        word of the node above it (`told`, awaited from the call's start) or, as a backstop where that word cannot
        come (the task that pings it dead or gone too), this task's own pings, `BACKSTOP` times rarer."""
        cluster = self.cluster
        position = cluster.placement.node_index(above)
        if position != self.node:
            rarer = BACKSTOP if self._pinged_above(above) else 1
            return await self.network.lost(*cluster.endpoint(above), rarer * self.patience)
        if process is None or process.pid == self.process.pid or self.seen(process) is Seen.UNKNOWN:
            # This process itself (tasks that share one: a simulation), or not to be seen from here (another pid
            # namespace): nothing to look at; its call's end tells its death.
            await asyncio.Event().wait()
            raise AssertionError  # pragma: no cover - never set
        since: float | None = None
        while True:
            await asyncio.sleep(self.patience / 2)
            if self.seen(process) is not Seen.STOPPED:
                since = None
                continue
            now = time.monotonic()
            since = now if since is None else since
            if now - since >= self.patience:
                return f"its process is stopped (SIGSTOP, a debugger) for {now - since:.0f} s"

    def _word(self, above: int) -> asyncio.Future[str]:
        """Why ``above`` is silent, once the node above it says so (`told`)."""
        word = self._words.get(above)
        if word is None:
            word = self._words[above] = asyncio.get_running_loop().create_future()
        return word

    def told(self, lost: Lost) -> bool:
        """A leader's word that ``lost.above`` is silent: taken (its silence ends this task's call, as if found here)
        where this task watches on that task across nodes and the word comes from a node above that task's (its
        parent, whose leader pings it; or further up, where the nodes between are silent too)."""
        above, tree, placement = self.above, self.tree, self.cluster.placement
        if above is None or tree is None or not self._pinged_above(above):
            return False
        position: int | None = placement.node_index(above)
        if placement.node_index(lost.above) != position or placement.node_index(lost.source) != lost.node:
            return False  # about another node (a successor holds it in its leader's place), or a teller out of place
        while position is not None and position != lost.node:
            position = tree.parent(position)
        if position is None or lost.node == placement.node_index(above):
            return False
        if lost.above != above and lost.above in self.deaths.failed:
            return True  # about the dead task whose place the one watched on now took: stale (its teller may stop)
        word = self._word(above)
        if not word.done():
            log.debug("slurm_resolver: rank %d heard from rank %d that rank %d is silent: %s", self.rank, lost.source,
                      above, lost.reason)
            word.set_result(f"rank {lost.source}, on a node above its, found it silent")
        return True

    def _check_first(self, data: bytes, nonce: bytes) -> Process | None:
        try:
            header, seal = unwrap(data)
            first = decode_event(header, self.cluster.world_size)
        except WireError as exc:
            raise _Stranger(f"a malformed first event ({exc})") from None
        checked = self.authority.check(Purpose.ANSWER, header, seal)
        why = checked.why if not checked.believed else "" if first.nonce == nonce else "an answer to another call"
        if why:
            raise _Stranger(why)
        return first.process

    async def run(self) -> None:
        """Watch on the task above, and on its successors, until this task or the top of the tree leaves."""
        try:
            await self._follow()
        finally:
            self.above = None  # watching on nobody: a successor of this task is the top of its tree

    async def _follow(self) -> None:
        above = self._first[0]
        moved_at = 0.0  # when the call last moved to a successor: it may not be ready for a moment
        pause = 0.05  # before a call made again: doubled while calls go unanswered, up to a second
        candidates: _Candidates | None = None  # where the task above died: who may take this call, after ``above``
        dead = -1  # the task above that died last
        while above is not None and not (self.deaths.leaving and self.deaths.up.empty()):
            if above == self.rank:  # no lower task of the dead one's node took this call: this one takes its place
                above, candidates = await self._succeed(dead)
                moved_at, pause = time.monotonic(), 0.05
                continue
            self.above = above  # a task that ends before its call is made still makes it, to say so
            try:
                event = await self._follow_one(above, candidates is not None)
            except Exception as exc:  # noqa: BLE001 - refused, malformed, silent, broken: the call is over
                if self.deaths.leaving:
                    return
                if candidates is not None and not self.answered:  # a candidate that did not take the call: not
                    # declared dead (it may live, and watch elsewhere). One that still listens may not have seen the
                    # death yet (a task of the dead one's node takes its place once it has): asked again for
                    # `ADOPTING` patiences; then the next. One that takes no more such calls (FULL): the next at once.
                    gone = isinstance(exc, LinkError) and await self.network.gone(*self.cluster.endpoint(above))
                    if (isinstance(exc, LinkError) and not gone and exc.code is not Refusal.FULL
                            and time.monotonic() - moved_at < ADOPTING * self.patience):
                        pause = await _paused(pause)
                        continue
                    log.debug("slurm_resolver: rank %d's watch was not taken at rank %d: %r", self.rank, above, exc)
                    above, candidates = await self._next(candidates, dead)
                    if above == self.rank and not (gone or isinstance(exc, _Silent)):
                        above = None  # the lower task lives, yet took not the call: this one does not lead beside it
                    moved_at = time.monotonic()
                    continue
                cut = isinstance(exc, LinkError) and exc.kind is CallFailure.CUT and not self.answered
                if isinstance(exc, LinkError) and (exc.code in (Refusal.BUSY, Refusal.UNREADY) or cut
                                                   or time.monotonic() - moved_at < self.patience):
                    # The task above lives and says "call again" (this task's first beat came late: its loop
                    # stood still), or it cut the call short before it answered (its wait for the first beat ran
                    # out as the beat came, on busy cores), or it is a successor that has not taken over yet, or a
                    # parent that has not yet seen its predecessor leave: ask again. A call cut short may also be
                    # a server that is ending: asked again only where its port still takes connections.
                    if not (cut and await self.network.gone(*self.cluster.endpoint(above))):
                        pause = await _paused(pause)
                        continue
                    fault = Fault(Cause.CRASHED, f"{self.cluster.label(above)} died: its server ended rank "
                                                 f"{self.rank}'s watch before answering ({exc.detail}), then refused "
                                                 "connections")
                else:
                    fault = self._why(above, exc)
                self.deaths.declare([above], fault)
                dead = above
                above, candidates = await self._orphaned(above)
                moved_at, pause = time.monotonic(), 0.05
                continue
            pause = 0.05
            candidates = None  # taken: the task above now
            if event is None or event.hand_over is None:
                return  # the task above ends normally and nobody takes over
            await asyncio.sleep(self.heartbeat)  # where the whole job ends together, nobody moves: no new call
            if self.deaths.leaving:
                return
            above = self._move(above, event.hand_over)
            moved_at = time.monotonic()
            log.debug("slurm_resolver: rank %d watches on rank %s from now on", self.rank, above)

    async def _orphaned(self, dead: int) -> tuple[int | None, _Candidates | None]:
        """Where this task's call goes now that the task above it, ``dead``, died: the first of `_adopters`, and the
        others after it (None, None: nowhere; this task stops watching); where this task is the lowest task left on
        ``dead``'s node, it takes ``dead``'s place first. Looked for one to two heartbeats later: the news of the death
        goes first (a burst of deaths leaves thousands of tasks to move at once)."""
        await asyncio.sleep(self.heartbeat * uniform(1.0, 2.0))
        if self.deaths.leaving:
            return None, None
        successor, found = await self._adopters(dead)
        if self.deaths.leaving:
            return None, None
        if successor:
            self._take_over(frozenset({Source.task(dead)}))
        above, candidates = await self._next(found, dead)
        if above is not None:
            log.debug("slurm_resolver: rank %d watches on rank %d now that rank %d died", self.rank, above, dead)
        return above, candidates

    async def _next(self, candidates: _Candidates | None, dead: int) -> tuple[int | None, _Candidates | None]:
        """The next candidate, and those after it (None, None: none is left). Once the ranks ran out, the nodes further
        up the tree are looked at, one at a time: the lowest task still listening of the first that has one."""
        if candidates is None:
            return None, None
        if candidates.ranks:
            return candidates.ranks.pop(0), candidates
        while self.tree is not None and candidates.climbing is not None:
            candidates.climbing = self.tree.parent(candidates.climbing)
            if candidates.climbing is not None:
                listening = await self._listening(candidates.climbing, dead, first=True)
                if listening:
                    return listening[0], candidates
        return None, None

    async def _adopters(self, dead: int) -> tuple[bool, _Candidates]:
        """Whether this task takes the place of the task above it, ``dead``, which died, and who may take its call
        then (none: it stops watching), so that a death does not cut the tasks below it off from failure detection
        for the rest of the job.

        On ``dead``'s node, its lowest task still listening takes its place (as a successor does: this task itself,
        where it is that one, then calls where ``dead`` called); the others, and its child nodes' leaders, call it.
        A task of that node calls its lower tasks in turn, and where each is silent or gone (stopped with ``dead``),
        takes the place itself (`_succeed`).
        Where no task of that node listens (it died whole), or, for a child node's leader, where that task does not
        take the call (silent too: the node without power; or it does not learn of the death), the nodes above it in
        turn, up to the root: the first task listening of each, which takes the calls of the nodes below its child
        nodes once the holder of the child node between died (`Watch.adopts`; at most the square of the fan-out
        more calls a server)."""
        tree, placement = self.tree, self.cluster.placement
        if tree is None:
            return False, _Candidates([], None)
        position = placement.node_index(dead)
        here = await self._listening(position, dead, first=position != self.node)
        lower = [r for r in here if r < self.rank]
        if position == self.node and lower:
            return False, _Candidates([*lower, self.rank], None)  # a lower task takes its place; where none does, this
        if position == self.node:
            return True, _Candidates([], position)  # this task takes its place, and calls where it called
        return False, _Candidates(here[:1], position)

    async def _succeed(self, dead: int) -> tuple[int | None, _Candidates | None]:
        """None of the lower tasks of this node took this task's call after its leader ``dead`` died: each is gone, or
        silent (stopped with it: no gRPC connection within the network's bound for a first one, or no ping answered
        for a patience). This task takes ``dead``'s place, and calls where it called (the task above that it finds
        listening), as the lowest task would have."""
        if self.deaths.leaving or self.tree is None:
            return None, None
        log.debug("slurm_resolver: rank %d takes the place of rank %d: no lower task of its node took it", self.rank,
                  dead)
        self._take_over(frozenset({Source.task(dead)}))
        return await self._next(_Candidates([], self.node), dead)

    async def _listening(self, position: int, dead: int, first: bool = False) -> list[int]:
        """The tasks of node ``position`` but this one and ``dead`` not known dead whose server still takes
        connections, lowest rank first (probed together: a node without power answers no probe, which is no
        refusal, and counts as listening until its call finds it silent: `_unanswered`). ``first``: the lowest of
        them alone, probed one after another up to it (a connection to a living server costs it an accept, and the
        children of a dead node look at the node above together: one probe each, not one a task of it)."""
        cluster, failed = self.cluster, self.deaths.failed
        ranks = sorted(r for r in map(int, cluster.placement.ranks_on(position)) if r not in (dead, self.rank)
                       and r not in failed)
        if first:
            for rank in ranks:
                if not await self.network.gone(*cluster.endpoint(rank)):
                    return [rank]
            return []
        gone = await asyncio.gather(*(self.network.gone(*cluster.endpoint(r)) for r in ranks))
        return [r for r, ended in zip(ranks, gone) if not ended]

    def _move(self, above: int, hand_over: HandOver) -> int | None:
        """Whom to watch on after ``above`` handed over: its successor, or (for the successor) its parent."""
        if hand_over.successor == self.rank:
            self._take_over(hand_over.gone | {Source.task(above)})
            return hand_over.above
        return hand_over.successor

    def _why(self, above: int, exc: BaseException) -> Fault:
        who = self.cluster.label(above)
        log.debug("slurm_resolver: the watch to %s ended: %r", who, exc)
        if isinstance(exc, _Silent):
            return Fault(Cause.SILENT, f"{who} stopped answering: {exc} (its process stopped, or its node gone)")
        if isinstance(exc, _Stranger):
            return Fault(Cause.CRASHED, f"what answers at {who}'s address is not a task of this job ({exc})")
        if isinstance(exc, LinkError) and exc.kind is CallFailure.REFUSED:
            return Fault(Cause.REPORTED, f"{who} refused the watch of rank {self.rank}: {exc.detail}")
        return Fault(Cause.CRASHED, f"{who} died: its connection to rank {self.rank} closed")
