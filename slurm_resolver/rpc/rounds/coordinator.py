"""What one task's server answers of the rounds it leads: Join calls, and its own task's side; transport-agnostic.

Handlers take and return bytes (the messages of ``coordination.proto``, through
`slurm_resolver.rpc.wire`), so the same code serves gRPC calls in a real job and
in-process calls in the scale simulation. A call is checked from its first message (the checks
every call meets, in the server's `Gate`, and whether the caller joins rounds here) before more
of it is read; every answer is sealed. Handlers are coroutines on the task's event loop; every
wait is on an event that what it waits for sets, bounded by a deadline: nothing polls.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence

from ...addresses import abridged
from ..messages import NO_FAILURE, Contribution, Failure, Records, Round, Source, SourceKind, WireError
from ..shapes import round_call
from ..transport import Refusal, Refused
from ..trust.gate import Gate
from ..waits import wait_until
from .codec import Call, Decision, decision, decode_call, encode_answer, read_records
from .state import Conflict, Rounds, RoundsFull, RoundState

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)


class Coordinator:
    """The rounds of one task's server: its callers' side (Join) and its own task's.

    Args:
        gate: the checks every call to this server meets (this task, the launch's size, seals).
        sources: who joins rounds here: its node's other tasks, and the leaders of its child
            nodes; empty for a task that leads nothing.
        root: whether this task is the tree's root (it decides every round, and hears
            announcements).
        ask_above: asks the task above for a notice a task below waits for (None at the root).
        inspect: told of every source's first-round records as they arrive, with the rank that
            sealed them (a leader asks their servers who they are: `slurm_resolver.rpc.trust.verify`).
    """

    def __init__(self, gate: Gate, sources: Iterable[Source], root: bool,
                 ask_above: Callable[[Round, float], Awaitable[Decision]] | None = None,
                 inspect: Callable[[Source, int, Records], None] | None = None) -> None:
        self.gate = gate
        self.identity = gate.identity
        self.world_size = gate.world_size
        self.authority = gate.authority
        self.sources = frozenset(sources)
        self.root = root
        self._rounds = Rounds(len(self.sources))
        self._ask_above = ask_above
        self._inspect = inspect
        self._asking: set[asyncio.Task[None]] = set()

    @property
    def open_rounds(self) -> int:
        """Rounds without a result here."""
        return self._rounds.open

    @property
    def known_rounds(self) -> int:
        """Rounds this server remembers (decided or not)."""
        return len(self._rounds)

    def open_call(self, first_message: bytes) -> Call:
        """A Join call, checked from its first message: the gate's checks, and whether it joins here."""
        gate = self.gate
        call, header, seal = gate.read(first_message, decode_call)
        gate.same_launch(call.job_key)
        if call.round.kind.policy.to_root:
            if not self.root:
                raise Refused(Refusal.INVALID, "announcements go to the root of the tree (the first node's leader)")
        elif call.source_at(self.sources) not in self.sources:
            # Another leader of this launch (two nodes may share an address): the caller looks further.
            raise Refused(Refusal.NOT_LEADER, f"rank {call.source} (node {call.node}) does not join rounds at rank "
                                              f"{self.identity.rank}")
        gate.sealed(f"a call to {call.round.label[:64]}", call.source, header, seal, call.port,
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
            return call.round.heard, self._answer(call, decision(NO_FAILURE))
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
        return encode_answer(outcome, call.nonce, self.identity.rank, self.gate.seal(call.round.kind.policy.first))

    def sent(self, round: Round | None) -> None:
        """The answer of ``round`` went out to one caller (or the caller went away; None: it never joined)."""
        if round is not None:
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
        merged, failure, votes = Records(), NO_FAILURE, own.votes
        for brought in received.values():
            merged.extend(brought.records)
            failure = failure.merge(brought.failure)
            votes += brought.votes
        merged.extend(own.records)
        failure = failure.merge(own.failure)
        for source in sorted(self.sources - set(received)):
            failure = failure.merge(covers(source))
        return Contribution(merged, failure, votes)


JOIN = round_call("Join", "JoinBundled", Coordinator)
"""Contribute to a round and receive its result: streamed, or in one message each way where it fits."""
