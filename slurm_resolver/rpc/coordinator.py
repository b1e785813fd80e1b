"""What one task's server coordinates: its identity, the job's token, and the rounds it leads.

Transport-agnostic: handlers take and return bytes (the messages of
``coordination.proto``), so the same code serves gRPC calls in a real job and in-process
calls in the scale simulation. Handlers are coroutines on the task's event loop; every
wait is on an event that what it waits for sets, bounded by a deadline: nothing polls.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..addresses import first
from .auth import Authority
from .rounds import MOST_ROUNDS, NOTICE, Round, Rounds, RoundsFull, wait_until
from .wire import Failure, Header, Records, WireError, decode_contribution, digest, encode_identity, encode_result

__all__ = ["Coordinator", "Refused", "Identity", "REFUSALS", "ANNOUNCE", "NOTICE", "node_source"]

ANNOUNCE = "announce:"
"""Round prefix of a task telling rank 0 that something happened (any task may send it)."""

log = logging.getLogger("slurm_resolver")

REFUSALS = ("foreign", "not_leader", "invalid", "unauthenticated", "deadline")
"""The codes of :class:`Refused`."""


class Refused(Exception):
    """A call the server refuses. ``code`` is one of ``foreign`` (another launch),
    ``not_leader``, ``invalid`` (malformed or impossible), ``unauthenticated``,
    ``deadline``; ``detail`` says why in one bounded line."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail[:500]


def node_source(position: int) -> int:
    """The source key of the leader of the node at ``position`` (ranks are keys >= 0, nodes < 0).

    >>> node_source(0), node_source(5)
    (-1, -6)
    """
    return -1 - position


@dataclass(frozen=True)
class Identity:
    """Who a server belongs to: its launch and task."""

    job_key: str
    rank: int
    node: str
    job: str
    index: int


class Coordinator:
    """The coordination state of one task's server.

    Args:
        identity: this task.
        world_size: tasks in the launch (bounds what a message may name).
        sources: who joins rounds at this server: its node's other tasks (their ranks) and
            the leaders of its child nodes (:func:`node_source` of the node's position, so
            that a leader is known by its node even where the layout does not tell its
            rank); empty for a task that leads nothing.
        root: whether this task is the tree's root (the leader of the first node: rank 0,
            but for a het step whose first component does not run on the first node).
        authority: checks each caller's MUNGE credential (None: the launch's key suffices).
    """

    def __init__(self, identity: Identity, world_size: int, sources: Iterable[int] = (), root: bool = False,
                 authority: Authority | None = None) -> None:
        self.identity = identity
        self.world_size = world_size
        self.sources = frozenset(sources)
        self.root = root
        self.authority = authority
        self.refused = 0
        """How many calls were refused for their credentials (the first ones are logged)."""
        self._token: str | None = None
        self._token_known = asyncio.Event()
        self.rounds = Rounds()
        """The rounds this server keeps (see :mod:`~slurm_resolver.rpc.rounds`)."""
        self._asking = 0  # callers of who() waiting for the token
        self.port = 0
        """The port this task's server listens on (the bootstrap sets it): credentials name it."""
        self.tower: Any = None
        """This task's :class:`~slurm_resolver.rpc.watch.Watchtower`, once it watches."""
        self.forward: Callable[[str, float], Awaitable[None]] | None = None
        """Asks the task above for a notice a task below waits for (set by the task's protocol)."""
        self._forwarding: set[asyncio.Task[None]] = set()
        self._identity_bytes = encode_identity(identity.job_key, identity.rank, identity.node, identity.job,
                                               identity.index)

    @property
    def job_key(self) -> str:
        """The key of this server's launch."""
        return self.identity.job_key

    @property
    def token(self) -> str | None:
        """The job's token, once this task learned it."""
        return self._token

    def set_token(self, token: str) -> None:
        """Learn the job's token (wakes callers waiting to be identified)."""
        self._token = token
        self._token_known.set()

    # Handlers: what a peer asks of this server.

    def precheck(self, first: bytes) -> None:
        """Refuse a call at its first chunk where its header says enough (malformed, another
        launch), before the rest of the call is read."""
        try:
            header, _, _ = decode_contribution([first], self.world_size)
        except WireError as exc:
            raise Refused("invalid", str(exc)) from None
        self._same_launch(header)

    def _same_launch(self, header: Header) -> None:
        if header.job_key != self.job_key:
            raise Refused("foreign", f"this server belongs to launch {self.job_key}, not {header.job_key[:64]}")

    async def join(self, chunks: Iterable[bytes], deadline: float) -> tuple[str, list[bytes]]:
        """A peer's contribution to a round; returns the round's name and result once there is one.

        The transport calls ``rounds.sent`` with that name once the result went out (or failed to).
        """
        try:
            header, records, failure = decode_contribution(chunks, self.world_size)
        except WireError as exc:
            raise Refused("invalid", str(exc)) from None
        self._same_launch(header)
        if header.round.startswith(ANNOUNCE):
            if not self.root:
                raise Refused("invalid", "announcements go to the root of the tree (the first node's leader)")
            self._authenticate(header, records, failure)
            if NOTICE + header.round[len(ANNOUNCE):] not in self.rounds and len(self.rounds) >= MOST_ROUNDS:
                raise Refused("invalid", f"{MOST_ROUNDS} rounds and notices are known here already")
            done = encode_result("", Failure())
            self.rounds.publish(NOTICE + header.round[len(ANNOUNCE):], done)
            return "", done
        source = self.admit(header, records, failure)
        try:
            this = self.rounds.for_caller(header.round, 2 * len(self.sources) + 8)
        except RoundsFull as exc:
            raise Refused("invalid", f"rank {self.identity.rank}: {exc}") from None
        if header.round.startswith(NOTICE) and self.forward is not None and self.rounds.claim(header.round):
            # A task below waits for a notice: ask above once, for every waiter here.
            task = asyncio.ensure_future(self.forward(header.round[len(NOTICE):], deadline))
            self._forwarding.add(task)
            task.add_done_callback(self._forwarding.discard)
        earlier = this.received.get(source)
        if earlier is not None and earlier != (records, failure):
            raise Refused("invalid", f"{self._source_name(source)} joined round {header.round[:64]!r} here already, "
                                     f"with other records: a second process claims it")
        if not this.closed:
            this.received[source] = (records, failure)
            if len(this.received) >= len(self.sources):
                this.complete.set()
        # Answer a moment before the caller gives up, so that it learns who is missing.
        margin = min(0.25, 0.05 * max(0.0, deadline - time.monotonic()))
        self.rounds.wait(header.round)
        try:
            decided = await wait_until(this.decided, deadline - margin)
        except asyncio.CancelledError:  # the caller went away: it holds no slot
            self.rounds.gave_up(header.round)
            raise
        if not decided:
            why = self._still_open(header.round, this)
            self.rounds.gave_up(header.round)  # a caller cannot keep a round open that nobody here needs
            raise Refused("deadline", why)
        assert this.result is not None
        return header.round, this.result

    def admit(self, header: Header, records: Records | None = None, failure: Failure | None = None,
              sources: frozenset[int] | None = None) -> int:
        """The source key of a caller of this launch that reports to this task (one of ``sources``,
        by default those of its rounds), with a good credential."""
        self._same_launch(header)
        sources = self.sources if sources is None else sources
        if not sources:
            raise Refused("not_leader", f"rank {self.identity.rank} leads no round")
        source = header.source if header.source in sources else node_source(header.node)
        if source not in sources or (source < 0 and header.source in sources):
            # Another leader of this launch (two nodes may share an address): the caller looks further.
            raise Refused("not_leader", f"rank {header.source} (node {header.node}) does not join rounds at rank "
                                        f"{self.identity.rank}")
        self._authenticate(header, records, failure)  # last: a credential is spent only where it is meant to be read
        return source

    def watch(self, beats: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """A task below keeps its heartbeat here (see :mod:`~slurm_resolver.rpc.watch`)."""
        if self.tower is None:
            raise Refused("not_leader", f"rank {self.identity.rank} watches no task (yet)")
        served: AsyncIterator[bytes] = self.tower.serve(beats)
        return served

    def _authenticate(self, header: Header, records: Records | None, failure: Failure | None) -> None:
        """Refuse a caller whose credential is not of the job's uid for this very call, to this
        server, with these contents (and log it)."""
        reason = ""
        if self.authority is not None and self.authority.enabled:
            contents = digest(records, failure if failure is not None else Failure()) if records is not None else ""
            reason = self.authority.check(header.credential, header, self.port, contents)
        if reason:
            self.refused += 1
            if self.refused <= 20 or self.refused % 1000 == 0:
                log.warning("slurm_resolver: rank %d refused a call to %r: %s (%d refused so far)",
                            self.identity.rank, header.round[:64], reason, self.refused)
            raise Refused("unauthenticated", reason)

    @staticmethod
    def _source_name(source: int) -> str:
        return f"rank {source}" if source >= 0 else f"the leader of node position {-1 - source}"

    def _still_open(self, name: str, this: Round) -> str:
        me = self.identity
        missing = sorted(self.sources - set(this.received))
        ranks = [s for s in missing if s >= 0]
        nodes = sorted(-1 - s for s in missing if s < 0)
        parts = ([f"ranks {first(ranks)}"] if ranks else []) + ([f"the leaders of node positions {first(nodes)}"]
                                                             if nodes else [])
        return (f"{me.job}:{me.index} (rank {me.rank}) on {me.node}, which gathers {name.split('#')[0]!r} for "
                f"{len(self.sources)} tasks, " + ("had not reached it itself" if not this.started else
                                                  f"still waited for {' and '.join(parts)}"))

    async def who(self, token: str, deadline: float) -> bytes:
        """This server's identity, for a caller that holds the job's token.

        A peer may ask before this task learned the token itself: the call waits for it.
        """
        if not self._token_known.is_set():
            if self._asking >= self.world_size + 64:  # every task may verify every other (verify="all")
                raise Refused("invalid", f"{self._asking} callers wait to identify rank {self.identity.rank} already")
            self._asking += 1
            try:
                await wait_until(self._token_known, deadline)
            finally:
                self._asking -= 1
        if self._token is None or token != self._token:
            raise Refused("unauthenticated", "not a task of this launch: wrong or missing token")
        return self._identity_bytes

    # The leader's own side of a round.

    async def gather(self, name: str, until: float, covers: Callable[[int], Failure]) -> tuple[Records, Failure]:
        """Wait until every source contributed to round ``name`` or ``until`` passes; then close it.

        Returns the sources' records and their failures merged, plus ``covers(source)``
        (the ranks a source stands for) for every source that did not contribute.
        """
        this = self.rounds.get(name)
        this.started = True
        if self.sources:
            await wait_until(this.complete, until)
        this.closed = True
        received = dict(this.received)
        merged, failure = Records(), Failure()
        for records, reported in received.values():
            merged.extend(records)
            failure = failure.merge(reported)
        for source in sorted(self.sources - set(received)):
            failure = failure.merge(covers(source))
        return merged, failure
