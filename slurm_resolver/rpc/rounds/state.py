"""The rounds one server keeps: who contributed, the result, and who waits for it; bounded.

A round is created by the first caller (or by this task); it is *open* until its result is
published. Callers may run ahead of this task, but not without bound: at most
`MOST_OPEN_ROUNDS` open rounds, and a round that only callers opened is forgotten
when its last caller gives up. Beyond `MOST_ROUNDS`, the oldest finished rounds with
no caller left are forgotten (notices are kept: a task may ask for one long after).
"""

from __future__ import annotations

from ..messages import NO_FAILURE, Contribution, Round, Source
from ..waits import Flag, wait_until
from .codec import Decision, decision

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)

MOST_OPEN_ROUNDS = 1024
"""Rounds a server keeps open (undecided) at once."""
MOST_ROUNDS = 8192
"""Rounds a server remembers: beyond, the oldest finished ones are forgotten (notices are kept)."""


class RoundState:
    """One round at one server: read by anyone, written only by `Rounds` (a plain class: one is made for
    every round at every server, and the class costs nothing at import)."""

    __slots__ = ("received", "closed", "result", "forwarded", "started", "complete", "waiting", "answered",
                 "decided")
    received: dict[Source, Contribution]
    """Each source's contribution."""
    closed: bool
    """Whether this task gathered the round (later contributions are not counted)."""
    result: Decision | None
    forwarded: bool
    """Whether this leader already asked upward for the round's result (notices)."""
    started: bool
    """Whether this server's own task has joined the round."""
    complete: Flag
    """Set when every source contributed."""
    waiting: int
    """Callers waiting for the result, or being sent it."""
    answered: Flag
    """Set while no caller waits for the result or is being sent it."""
    decided: Flag
    """Set when the result is known."""

    def __init__(self) -> None:
        self.received, self.closed, self.result, self.forwarded, self.started = {}, False, None, False, False
        self.complete, self.waiting, self.answered, self.decided = Flag(), 0, Flag(), Flag()


class RoundsFull(Exception):
    """A caller may not open or wait on another round here (the message says why)."""


class Conflict(Exception):
    """A source contributed twice to one round, with other contributions (the message says which)."""


class Rounds:
    """The rounds of one server, by name: the only writer of their state.

    A round's life here: a caller `contribute`s (or this task `start`s it), callers `wait` for the
    result and are `sent` it (or `gave_up`); this server's own task `close`s it (the contributions
    are in) and `publish`es its result. A notice is `claim`ed by the first waiter (it asks above),
    or `announced`.

    Args:
        sources: how many sources contribute to every gathered round here.
    """

    def __init__(self, sources: int = 0) -> None:
        self._rounds: dict[Round, RoundState] = {}
        self._sources = sources
        self.open = 0
        """Rounds without a result."""

    def __len__(self) -> int:
        return len(self._rounds)

    def __contains__(self, name: object) -> bool:
        return name in self._rounds

    def get(self, name: Round) -> RoundState:
        """Round ``name``, made if it is new (to read: `Rounds` writes it)."""
        found = self._rounds.get(name)
        if found is None:
            found = self._rounds[name] = RoundState()
            self.open += 1
            if not self._sources:
                found.complete.set()
        return found

    def for_caller(self, name: Round, most_waiting: int) -> RoundState:
        """Round ``name`` for a caller to wait on; `RoundsFull` beyond the bounds."""
        if name not in self._rounds and self.open >= MOST_OPEN_ROUNDS:
            raise RoundsFull(f"{MOST_OPEN_ROUNDS} rounds are open here already")
        this = self.get(name)
        if this.waiting >= most_waiting:
            raise RoundsFull(f"{this.waiting} callers already wait for round {name.label[:64]} here")
        return this

    def contribute(self, name: Round, source: Source, brought: Contribution) -> bool:
        """``source`` brings ``brought`` to round ``name``: whether it counts as new (the round is
        still open and the source had not contributed); `Conflict` where it brought something else."""
        this = self.get(name)
        earlier = this.received.get(source)
        if earlier is not None and earlier != brought:
            raise Conflict(f"{source.describe()} joined round {name.label[:64]} here already, with other records: "
                           "a second process claims it")
        if this.closed or earlier is not None:
            return False
        this.received[source] = brought
        if len(this.received) >= self._sources:
            this.complete.set()
        return True

    def start(self, name: Round) -> RoundState:
        """This server's own task joins round ``name`` (its callers giving up no longer forget it)."""
        this = self.get(name)
        this.started = True
        return this

    async def close(self, name: Round, until: float) -> dict[Source, Contribution]:
        """This server's own task gathers round ``name``: once every source contributed, or at ``until``;
        the contributions then (later ones are not counted)."""
        this = self.start(name)
        await wait_until(this.complete, until)
        this.closed = True
        return dict(this.received)

    def announced(self, notice: Round) -> None:
        """Someone announced ``notice``: it is decided here, and one caller is being sent the news;
        `RoundsFull` where a new notice would pass `MOST_ROUNDS`."""
        if notice not in self._rounds and len(self._rounds) >= MOST_ROUNDS:
            raise RoundsFull(f"{MOST_ROUNDS} rounds and notices are known here already")
        self.publish(notice, decision(NO_FAILURE))
        self.wait(notice)

    def wait(self, name: Round) -> RoundState:
        """A caller starts waiting for the result of round ``name``."""
        this = self.get(name)
        this.waiting += 1
        this.answered.clear()
        return this

    def sent(self, name: Round) -> None:
        """The result of round ``name`` went out to one caller (or the caller went away)."""
        found = self._rounds.get(name)
        if found is None:
            return
        found.waiting = max(0, found.waiting - 1)
        if found.waiting == 0:
            found.answered.set()

    def gave_up(self, name: Round) -> None:
        """A caller of round ``name`` gave up: forget the round if nobody here needs it."""
        self.sent(name)
        this = self._rounds.get(name)
        if this is not None and this.waiting == 0 and not this.started and not this.forwarded and this.result is None:
            del self._rounds[name]
            self.open -= 1

    async def delivered(self, name: Round, deadline: float) -> bool:
        """Wait until every caller of round ``name`` has been sent its result (before a leader leaves)."""
        this = self.get(name)
        return this.waiting == 0 or await wait_until(this.answered, deadline)

    def claim(self, name: Round) -> bool:
        """Whether the caller is the first to ask the task above for round ``name`` (then it must)."""
        this = self.get(name)
        if this.forwarded or this.result is not None:
            return False
        this.forwarded = True
        return True

    def decided(self, name: Round) -> bool:
        """Whether round ``name`` has its result here."""
        found = self._rounds.get(name)
        return found is not None and found.result is not None

    async def result(self, name: Round, deadline: float) -> Decision | None:
        """The result of round ``name`` for this server's own task, once it is decided here; None if
        not before ``deadline`` (the task is in the round: its callers giving up do not forget it)."""
        this = self.start(name)
        return this.result if await wait_until(this.decided, deadline) else None

    def publish(self, name: Round, result: Decision) -> None:
        """The result of round ``name``: every caller waiting for it gets it."""
        this = self.get(name)
        if this.result is None:
            self.open -= 1
        this.result = result
        this.decided.set()
        if len(self._rounds) > MOST_ROUNDS:
            self._forget(len(self._rounds) - MOST_ROUNDS // 2)

    def _forget(self, count: int) -> None:
        """Forget up to ``count`` of the oldest rounds that ended and have no caller left (not notices)."""
        done = [name for name, r in self._rounds.items()
                if r.result is not None and r.waiting == 0 and not name.kind.policy.kept]
        for name in done[:count]:
            del self._rounds[name]
