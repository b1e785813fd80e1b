"""What one task's server answers: its identity, and the rounds it leads; transport-agnostic.

Handlers take and return bytes (the messages of ``coordination.proto``, through
`slurm_resolver.rpc.wire`), so the same code serves gRPC calls in a real job and
in-process calls in the scale simulation. A call is checked from its first message (its
launch, its seal, whether the caller joins rounds here) before more of it is read; every
answer is sealed. Handlers are coroutines on the task's event loop; every wait is on an
event that what it waits for sets, bounded by a deadline: nothing polls.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Protocol

from ..addresses import abridged
from .auth import Authority, Checked, Purpose, SealVerdict
from .beats import Beat, decode_beat, encode_first_event
from .identity import Identity, decode_who, encode_identity
from .messages import Contribution, Failure, Records, Round, Source, SourceKind, WireError
from .rounds import Conflict, Flag, Rounds, RoundsFull, RoundState, wait_until
from .transport import Refusal, Refused, within
from .wire import Call, Decision, decision, decode_call, encode_answer, read_records, unwrap

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)

log = logging.getLogger("slurm_resolver")

FIRST_BEAT = 10.0
"""Seconds a server waits for a watch call's first beat (then it refuses the call)."""




class StacksAnswering(Protocol):
    """Answers asks for stacks (`slurm_resolver.rpc.stacks_call.StacksHandler`)."""

    async def stacks(self, message: bytes, deadline: float) -> bytes:
        """The answer to ``message``; raises `Refused`."""
        ...


class Watched(Protocol):
    """The leader's side of failure detection, once this task watches (see `watch`)."""

    sources: frozenset[Source]

    def serve(self, source: Source, first: Beat, beats: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """The events of a task below whose first beat was ``first``, until its call ends; raises
        `Refused` at once where it may not watch here."""
        ...


class Coordinator:
    """The coordination state of one task's server.

    Args:
        identity: this task.
        world_size: tasks in the launch (bounds what a message may name).
        sources: who joins rounds here: its node's other tasks, and the leaders of its child
            nodes; empty for a task that leads nothing.
        root: whether this task is the tree's root (it decides every round, and hears
            announcements).
        authority: seals answers and checks callers' seals.
        port: the port this server listens on (a call made for another server is refused).
        ask_above: asks the task above for a notice a task below waits for (None at the root).
        inspect: told of every source's first-round records as they arrive, with the rank that
            sealed them (a leader asks their servers who they are: `slurm_resolver.rpc.verify`).
    """

    def __init__(self, identity: Identity, world_size: int, sources: Iterable[Source], root: bool,
                 authority: Authority, port: int,
                 ask_above: Callable[[Round, float], Awaitable[Decision]] | None = None,
                 inspect: Callable[[Source, int, Records], None] | None = None) -> None:
        self.identity = identity
        self.world_size = world_size
        self.sources = frozenset(sources)
        self.root = root
        self.authority = authority
        self.port = port
        self.refused = 0
        """How many calls were refused for their seals (the first ones are logged)."""
        self._rounds = Rounds(len(self.sources))
        self._ask_above = ask_above
        self._inspect = inspect
        self._asking: set[asyncio.Task[None]] = set()
        self._watched: Watched | None = None
        self._watching = Flag()
        self._stacks: StacksAnswering | None = None

    @property
    def open_rounds(self) -> int:
        """Rounds without a result here."""
        return self._rounds.open

    @property
    def known_rounds(self) -> int:
        """Rounds this server remembers (decided or not)."""
        return len(self._rounds)

    @property
    def job_key(self) -> str:
        """The key of this server's launch."""
        return self.identity.job_key

    def watch_below(self, watched: Watched | None) -> None:
        """From now on, tasks below may keep their heartbeat here (after the bootstrap's exchange; a
        task below that has the table first waits for this, at most `FIRST_BEAT` seconds); None:
        this task watches nobody (failure detection is off), which a watch call is told at once."""
        self._watched = watched
        self._watching.set()

    def stacks_below(self, handler: StacksAnswering) -> None:
        """From now on (once bootstrapped: the tasks below are known by their ports) this server
        answers asks for stacks."""
        self._stacks = handler

    async def stacks(self, message: bytes, deadline: float) -> bytes:
        """The stacks of this task's subtree (see `slurm_resolver.rpc.stacks_call`)."""
        if self._stacks is None:
            raise Refused(Refusal.UNREADY, f"rank {self.identity.rank} is not bootstrapped yet: ask again")
        return await self._stacks.stacks(message, deadline)

    # Checking who calls.

    def _same_launch(self, job_key: str) -> None:
        if job_key != self.job_key:
            raise Refused(Refusal.FOREIGN, "this server belongs to another launch")

    def _authenticate(self, what: str, source: int, header: bytes, seal: bytes, port: int,
                      first_round: bool = False) -> None:
        """Refuse a caller whose seal is not a task's of this job, for this very call to this server."""
        checked = Checked.refused("made for another server") if port != self.port else \
            self.authority.check(Purpose.CALL, header, seal, first_round)
        if checked.believed:
            return
        if checked.verdict is SealVerdict.UNREADY:
            raise Refused(Refusal.UNREADY, f"rank {self.identity.rank} cannot check seals yet: ask again")
        reason = checked.why
        self.refused += 1
        if self.refused <= 20 or self.refused % 1000 == 0:
            log.warning("slurm_resolver: rank %d refused %s claiming rank %d: %s (%d refused so far)",
                        self.identity.rank, what, source, reason, self.refused)
        raise Refused(Refusal.UNAUTHENTICATED, reason)

    def open_call(self, first_message: bytes) -> Call:
        """A Join call, checked from its first message: its launch, whether it joins here, its seal."""
        try:
            header, seal = unwrap(first_message)
            call = decode_call(header, self.world_size)
        except WireError as exc:
            raise Refused(Refusal.INVALID, str(exc)) from None
        self._same_launch(call.job_key)
        if call.round.kind.policy.to_root:
            if not self.root:
                raise Refused(Refusal.INVALID, "announcements go to the root of the tree (the first node's leader)")
        elif call.source_at(self.sources) not in self.sources:
            # Another leader of this launch (two nodes may share an address): the caller looks further.
            raise Refused(Refusal.NOT_LEADER, f"rank {call.source} (node {call.node}) does not join rounds at rank "
                                              f"{self.identity.rank}")
        self._authenticate(f"a call to {call.round.label[:64]}", call.source, header, seal, call.port,
                           call.round.kind.policy.first)  # last: a credential is spent where it is meant
        return call

    # Rounds: a task below contributes, and gets the result.

    async def join(self, call: Call, more: Sequence[bytes], deadline: float) -> tuple[Round, list[bytes]]:
        """The answer to ``call`` (checked by `open_call()`) once its round is decided, and the
        round; the transport calls `sent()` with it once the answer went out (or failed to)."""
        try:
            records = read_records(call, more, self.world_size)
        except WireError as exc:
            raise Refused(Refusal.INVALID, str(exc)) from None
        if call.round.kind.policy.to_root:
            try:
                self._rounds.announced(call.round.heard)
            except RoundsFull as exc:
                raise Refused(Refusal.INVALID, str(exc)) from None
            return call.round.heard, self._answer(call, decision(Failure()))
        source = call.source_at(self.sources)
        try:
            this = self._rounds.for_caller(call.round, 2 * len(self.sources) + 8)
        except RoundsFull as exc:
            raise Refused(Refusal.INVALID, f"rank {self.identity.rank}: {exc}") from None
        if call.round.kind.policy.asks_above:
            self.want(call.round, deadline)
        try:
            new = self._rounds.contribute(call.round, source, Contribution(records, call.failure, call.votes))
        except Conflict as exc:
            raise Refused(Refusal.INVALID, str(exc)) from None
        if new and self._inspect is not None and call.round.kind.policy.first:
            self._inspect(source, call.source, records)
        # Answer a moment before the caller gives up, so that it learns who is missing.
        margin = min(0.25, 0.05 * max(0.0, deadline - time.monotonic()))
        self._rounds.wait(call.round)
        try:
            decided = await wait_until(this.decided, deadline - margin)
        except asyncio.CancelledError:  # the caller went away: it holds no slot
            self._rounds.gave_up(call.round)
            raise
        if not decided:
            why = self._still_open(call.round, this)
            self._rounds.gave_up(call.round)  # a caller cannot keep a round open that nobody here needs
            raise Refused(Refusal.DEADLINE, why)
        assert this.result is not None
        return call.round, self._answer(call, this.result)

    def _answer(self, call: Call, outcome: Decision) -> list[bytes]:
        first_round = call.round.kind.policy.first
        return encode_answer(outcome, call.nonce, self.identity.rank,
                             lambda header: self.authority.seal(Purpose.ANSWER, header, first_round))

    def sent(self, round: Round) -> None:
        """The answer of ``round`` went out to one caller (or the caller went away)."""
        self._rounds.sent(round)

    # This server's own task: what it asks of its rounds.

    def publish(self, round: Round, outcome: Decision) -> None:
        """The result of ``round``: every caller waiting for it here gets it."""
        self._rounds.publish(round, outcome)

    async def delivered(self, round: Round, deadline: float) -> bool:
        """Wait until every caller of ``round`` here was sent its result (before this task goes on)."""
        return await self._rounds.delivered(round, deadline)

    def decided(self, round: Round) -> bool:
        """Whether ``round`` has its result here."""
        return self._rounds.decided(round)

    async def result(self, round: Round, deadline: float) -> Decision | None:
        """The result of ``round`` for this task, once decided here; None if not before ``deadline``."""
        return await self._rounds.result(round, deadline)

    def table_key(self) -> bytes:
        """The root: the launch's key for later seals, as the table's answer carries it (in the clear
        only where callers prove nothing; else inside their seals)."""
        key = self.authority.new_key()
        return key if not self.authority.proves_callers else b""

    def want(self, notice: Round, deadline: float) -> None:
        """Someone here waits for ``notice``: ask above once for every waiter here (not at the root,
        which hears announcements itself)."""
        if self._ask_above is None or not self._rounds.claim(notice):
            return
        task = asyncio.ensure_future(self._fetch(notice, deadline))
        self._asking.add(task)
        task.add_done_callback(self._asking.discard)

    async def _fetch(self, notice: Round, deadline: float) -> None:
        assert self._ask_above is not None
        self._rounds.publish(notice, await self._ask_above(notice, deadline))

    def _still_open(self, round: Round, this: RoundState) -> str:
        missing = sorted(self.sources - set(this.received))
        ranks = [s.number for s in missing if s.kind is SourceKind.TASK]
        nodes = [s.number for s in missing if s.kind is SourceKind.NODE]
        parts = ([f"ranks {abridged(ranks)}"] if ranks else []) + ([f"the leaders of node positions {abridged(nodes)}"]
                                                             if nodes else [])
        return (f"{self.identity.label}, which gathers {round.label} for "
                f"{len(self.sources)} tasks, " + ("had not reached it itself" if not this.started else
                                                  f"still waited for {' and '.join(parts)}"))

    # The leader's own side of a round.

    async def gather(self, round: Round, own: Contribution, until: float, covers: Callable[[Source], Failure]
                     ) -> Contribution:
        """Wait until every source contributed to ``round`` or ``until`` passes; then close it.

        Returns the sources' contributions and this task's ``own`` merged, with ``covers(source)``
        (the ranks a source stands for) as missing for every source that did not contribute.
        """
        received = await self._rounds.close(round, until)
        merged, failure, votes = Records(), Failure(), own.votes
        for brought in received.values():
            merged.extend(brought.records)
            failure = failure.merge(brought.failure)
            votes += brought.votes
        merged.extend(own.records)
        failure = failure.merge(own.failure)
        for source in sorted(self.sources - set(received)):
            failure = failure.merge(covers(source))
        return Contribution(merged, failure, votes)

    # WhoAreYou and Watch.

    async def who(self, message: bytes, deadline: float) -> bytes:
        """This server's identity, sealed, for a task of this job that asks."""
        del deadline  # answered at once: a server that cannot check the seal yet says so
        try:
            header, seal = unwrap(message)
            question = decode_who(header, self.world_size)
        except WireError as exc:
            raise Refused(Refusal.INVALID, str(exc)) from None
        self._same_launch(question.job_key)
        if question.early and self.authority.past_first_round:
            # This task holds the table: its leader asked long ago. Nobody gets a first-round answer
            # (under MUNGE, a credential carrying the launch's key) from it any more.
            raise Refused(Refusal.INVALID, f"rank {self.identity.rank} is past the first round: ask with its seal")
        self._authenticate("an identity call", question.source, header, seal, question.port, question.early)
        return encode_identity(self.identity, question.nonce,
                               lambda h: self.authority.seal(Purpose.ANSWER, h, question.early))

    async def watch(self, beats: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """A task below keeps its heartbeat here (see `slurm_resolver.rpc.watch`): its first
        beat is checked, the first event answers it, and the watch serves the rest."""
        if self._watching.is_set() and self._watched is None:
            raise Refused(Refusal.NOT_LEADER, f"rank {self.identity.rank} watches no task")
        try:
            with within(FIRST_BEAT):
                first = await beats.__anext__()
            header, seal = unwrap(first)
            beat = decode_beat(header, self.world_size)
        except (StopAsyncIteration, WireError, asyncio.TimeoutError) as exc:
            raise Refused(Refusal.INVALID, f"a watch without a first beat within {FIRST_BEAT:g} s "
                                           f"({exc.__class__.__name__})") from None
        self._same_launch(beat.job_key)
        self._authenticate("a watch", beat.source, header, seal, beat.port)
        # A task below may have the table a moment before this one watches (it goes on at once).
        watched = self._watched if await wait_until(self._watching, time.monotonic() + FIRST_BEAT) else None
        if watched is None:
            raise Refused(Refusal.NOT_LEADER, f"rank {self.identity.rank} watches no task (yet)")
        source = Source.task(beat.source)
        source = source if source in watched.sources else Source.node(beat.node)
        if source not in watched.sources:
            raise Refused(Refusal.NOT_LEADER, f"rank {beat.source} (node {beat.node}) is not watched at rank "
                                              f"{self.identity.rank}")
        events = watched.serve(source, beat, beats)
        yield encode_first_event(beat.nonce, self.identity.rank,
                                 lambda h: self.authority.seal(Purpose.ANSWER, h))
        async for event in events:
            yield event
