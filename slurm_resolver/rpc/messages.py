"""What the bootstrap's messages say, as values: rounds, sources, records, tables, failures, identities.

These are the protocol's state, typed: a round is a `Round` (a `RoundKind`, a
name, a count), never a string to parse; who joins a round at a leader is a `Source`
(a task of its node, or the leader of a child node), never a number whose sign means
something. `slurm_resolver.rpc.wire` turns them into bytes and back; nothing else does.
Every value here is bounded whatever the job's size: a failure names at most `SHOWN`
ranks and one reason of at most `REASON` characters.
"""

from __future__ import annotations

import enum
from array import array
from collections.abc import Callable, Iterable, Mapping, MutableSequence, Sequence
from functools import partial

from ..faults import Cause, Fault
from ..values import OrderedValue, Value, fill

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)

SHOWN = 8
"""Ranks a failure names; the rest is a count."""
MOST_NEWS = 16
"""Reasons (each with at most `SHOWN` ranks) one beat or event of the watch carries: the deaths queued for its call."""
REASON = 1000
"""Characters of a failure's reason."""
MOST_KEY = 64
"""Bytes of a launch's key: the longest an answer may carry and a seal takes (BLAKE2b's; this package's keys
are 32)."""
NAME = 200
"""Characters of a barrier's, vote's or notice's name."""


class WireError(ValueError):
    """A message that is malformed, too large, or names what cannot exist in this job."""


class Policy(Value):
    """What a kind of round does: the only place where kinds differ (the code that runs rounds asks
    these, and never which kind a round is)."""

    __slots__ = ("verb", "named", "counted", "first", "carries_table", "asks_above", "kept", "to_root")

    verb: str
    """What a task does in such a round, for errors: ``did not <verb> <round> within ...``."""
    named: bool
    """Whether rounds of this kind carry a user's name."""
    counted: bool
    """Whether rounds of this kind are numbered (every task's n-th call meets the n-th)."""
    first: bool
    """Whether this is the first round, before anyone knows the launch's key: its calls and answers are
    sealed as the first round's (MUNGE credentials), and a leader checks who joins it."""
    carries_table: bool
    """Whether its result carries the table (the root builds it from the records, and a leader goes on
    as soon as it has the result: its server keeps serving it)."""
    asks_above: bool
    """Whether it is waited for, not gathered: a leader asks the task above once for all its waiters,
    and the round is decided when someone announces it."""
    kept: bool
    """Whether a server keeps a finished round of this kind (a task may ask for it long after)."""
    to_root: bool
    """Whether a call of this kind goes straight to the root of the tree (not to the task above)."""

    def __init__(self, verb: str = "reach", named: bool = True, counted: bool = False, first: bool = False,
                 carries_table: bool = False, asks_above: bool = False, kept: bool = False,
                 to_root: bool = False) -> None:
        fill(self, verb, named, counted, first, carries_table, asks_above, kept, to_root)


class RoundKind(enum.Enum):
    """What a round is for: its name on the wire and its `Policy`.

    A new kind of round is a member here with its policy, a `Member` method that runs it and a
    `Bootstrapped` pair that offers it (docs/protocol.md works one through).
    """

    policy: Policy

    def __new__(cls, value: str, policy: Policy) -> RoundKind:
        member = object.__new__(cls)
        member._value_ = value
        member.policy = policy
        return member

    TABLE = "table", Policy(verb="join", named=False, first=True, carries_table=True)
    """Every task's records up the tree; the root decides the table."""
    VERIFIED = "verified", Policy(named=False)
    """The verdict of every task's checks of its peers: the bootstrap's last round, where servers are
    checked after the table (under MPI, or with ``verify='all'`` or a count)."""
    BARRIER = "barrier", Policy(counted=True)
    """Every task meets (the n-th barrier of a name meets every task's n-th)."""
    VOTE = "vote", Policy(counted=True)
    """A barrier whose result counts the tasks that voted yes."""
    NOTICE = "notice", Policy(verb="hear of", asks_above=True, kept=True)
    """Waiting for an announcement: the root decides it, and it goes down the tree."""
    ANNOUNCE = "announce", Policy(verb="announce", to_root=True)
    """One task tells the root that something happened (any task may)."""

    @classmethod
    def read(cls, value: str) -> RoundKind:
        """The kind called ``value`` on the wire; ValueError if there is none."""
        found = _KINDS.get(value)
        if found is None:
            raise ValueError(f"no kind of round is called {value[:32]!r}")
        return found


_KINDS = {kind.value: kind for kind in RoundKind}
"""Every kind by its name on the wire (read for every message: a dict, not a walk of the enum)."""


class Round(Value):
    """One round: its kind, and for named kinds a name and (barriers, votes) a count.

    >>> Round.barrier("epoch", 2).label, Round(RoundKind.TABLE).label
    ("'epoch'", 'the bootstrap')
    """

    __slots__ = ("kind", "name", "count")
    kind: RoundKind
    name: str
    count: int

    def __init__(self, kind: RoundKind, name: str = "", count: int = 0) -> None:
        if kind.policy.named != bool(name) or len(name) > NAME or count < 0 or (count and not kind.policy.counted):
            raise WireError(f"a round that cannot be: {kind.value} {name[:64]!r} #{count}")
        fill(self, kind, name, count)

    @classmethod
    def barrier(cls, name: str, count: int) -> Round:
        """The ``count``-th barrier called ``name``."""
        return cls(RoundKind.BARRIER, name, count)

    @classmethod
    def vote(cls, name: str, count: int) -> Round:
        """The ``count``-th vote called ``name``."""
        return cls(RoundKind.VOTE, name, count)

    @classmethod
    def notice(cls, name: str) -> Round:
        """Waiting for the announcement ``name``."""
        return cls(RoundKind.NOTICE, name)

    @classmethod
    def announce(cls, name: str) -> Round:
        """Telling the root of ``name``."""
        return cls(RoundKind.ANNOUNCE, name)

    @property
    def heard(self) -> Round:
        """The notice an announcement decides."""
        return Round.notice(self.name)

    @property
    def label(self) -> str:
        """How errors name the round: ``'the bootstrap'``, or the user's name."""
        return "the bootstrap" if self.kind is RoundKind.TABLE else repr(self.name or self.kind.value)


TABLE_ROUND = Round(RoundKind.TABLE)
"""The bootstrap's exchange of records."""
VERIFIED_ROUND = Round(RoundKind.VERIFIED)
"""The bootstrap's last round where servers are checked after the table: every check passed, or why not."""


class SourceKind(str, enum.Enum):
    """Who a leader hears from."""

    TASK = "task"
    """A task of the leader's own node, known by its rank."""
    NODE = "node"
    """The leader of a child node, known by the node's position (its rank may be unknown yet)."""


class Source(OrderedValue):
    """One of the contributors a leader waits for in every round.

    >>> Source.task(5), Source.node(3).describe()
    (Source(kind=<SourceKind.TASK: 'task'>, number=5), 'the leader of node position 3')
    """

    __slots__ = ("kind", "number")
    kind: SourceKind
    number: int

    def __init__(self, kind: SourceKind, number: int) -> None:
        fill(self, kind, number)

    @classmethod
    def task(cls, rank: int) -> Source:
        """The task of ``rank``, on the leader's node."""
        return cls(SourceKind.TASK, rank)

    @classmethod
    def node(cls, position: int) -> Source:
        """The leader of the node at ``position``."""
        return cls(SourceKind.NODE, position)

    def describe(self) -> str:
        """``rank 5`` or ``the leader of node position 3``."""
        return f"rank {self.number}" if self.kind is SourceKind.TASK else f"the leader of node position {self.number}"


_column: Callable[[], MutableSequence[int]] = partial(array, "H")
"""An empty column of ports: 2 bytes each, extended from a chunk's columns in C (never a number at a time);
made in C too (no Python frame a record)."""


class Records:
    """Ports, spare ports and (where not computable) GPUs of some ranks, as columns (ports: `array` of
    2-byte numbers, as every maker gives them: converted by nobody on the way). Its columns grow in place
    (`extend`); the record is never hashed."""

    __slots__ = ("ranks", "ports", "spares", "gpus", "nodes")
    ranks: list[int]
    ports: MutableSequence[int]
    spares: MutableSequence[int]
    gpus: dict[int, str]
    nodes: list[int]
    """Each task's node position, only where the layout does not tell (then one per rank)."""

    def __init__(self, ranks: list[int] | None = None, ports: MutableSequence[int] | None = None,
                 spares: MutableSequence[int] | None = None, gpus: dict[int, str] | None = None,
                 nodes: list[int] | None = None) -> None:
        self.ranks = [] if ranks is None else ranks
        self.ports = _column() if ports is None else ports
        self.spares = _column() if spares is None else spares
        self.gpus = {} if gpus is None else gpus
        self.nodes = [] if nodes is None else nodes

    def __repr__(self) -> str:
        return (f"Records(ranks={self.ranks!r}, ports={self.ports!r}, spares={self.spares!r}, gpus={self.gpus!r}, "
                f"nodes={self.nodes!r})")

    def __eq__(self, other: object) -> bool:
        """The same records, whatever kind of sequence holds each column."""
        if not isinstance(other, Records):
            return NotImplemented
        return (self.ranks, list(self.ports), list(self.spares), self.gpus, self.nodes) == \
            (other.ranks, list(other.ports), list(other.spares), other.gpus, other.nodes)

    def extend(self, other: Records) -> None:
        """Add ``other``'s records to these."""
        self.ranks.extend(other.ranks)
        self.ports.extend(other.ports)
        self.spares.extend(other.spares)
        self.gpus.update(other.gpus)
        self.nodes.extend(other.nodes)


class Table(Value):
    """A round's result records, in rank order (shared and read-only: the columns as they were read, not a
    tuple of every entry)."""

    __slots__ = ("ports", "spares", "gpus", "nodes")
    ports: Sequence[int]
    spares: Sequence[int]
    gpus: Mapping[int, str]
    nodes: tuple[int, ...]
    """Each rank's node position, where the tasks exchanged it; else ()."""

    def __init__(self, ports: Sequence[int] = (), spares: Sequence[int] = (), gpus: Mapping[int, str] | None = None,
                 nodes: tuple[int, ...] = ()) -> None:
        fill(self, ports, spares, {} if gpus is None else gpus, nodes)


def cause_on_wire(cause: Cause) -> str:
    """A cause's name on the wire: `Cause.REPORTED`, the most common and an older peer's, is sent as nothing.

    >>> cause_on_wire(Cause.SILENT), cause_on_wire(Cause.REPORTED)
    ('silent', '')
    """
    return "" if cause is Cause.REPORTED else cause.value


def read_cause(value: str) -> Cause:
    """The cause named ``value`` on the wire (nothing: `Cause.REPORTED`); `WireError` for one no version sends."""
    cause = _CAUSES.get(value)  # read for every death a task hears: a lookup, not the enum's call
    if cause is None:
        raise WireError(f"a cause that cannot be ({value[:32]!r})")
    return cause


_CAUSES = {cause_on_wire(cause): cause for cause in Cause}


class Failure(Value):
    """What went wrong: the lowest missing ranks (at most `SHOWN`), their count, one reason and its cause.

    >>> Failure.missing_ranks(range(20)).merge(Failure.of("rank 3 failed")).missing_count
    20
    """

    __slots__ = ("missing", "missing_count", "reason", "failed_count", "cause", "status")
    missing: tuple[int, ...]
    missing_count: int
    reason: str
    failed_count: int
    cause: Cause
    """The reason's cause (missing ranks alone: `Cause.SILENT`)."""
    status: int
    """An exit status, where the cause is `Cause.EXITED`."""

    def __init__(self, missing: tuple[int, ...] = (), missing_count: int = 0, reason: str = "", failed_count: int = 0,
                 cause: Cause = Cause.REPORTED, status: int = 0) -> None:
        fill(self, missing, missing_count, reason, failed_count, cause, status)

    @classmethod
    def missing_ranks(cls, ranks: Iterable[int], count: int | None = None) -> Failure:
        """A failure naming ``ranks`` as missing (``count`` of them, when they are a sample)."""
        listed = sorted(ranks)
        return cls(tuple(listed[:SHOWN]), len(listed) if count is None else count, cause=Cause.SILENT)

    @classmethod
    def of(cls, reason: str, cause: Cause = Cause.REPORTED, status: int = 0) -> Failure:
        """One task's failure, with its reason and its cause."""
        return cls(reason=reason[:REASON], failed_count=1, cause=cause, status=status)

    def __bool__(self) -> bool:
        return bool(self.missing_count or self.failed_count)

    def merge(self, other: Failure) -> Failure:
        """Both failures in one, still bounded."""
        if not other:
            return self
        if not self:
            return other
        said = self if self.reason or not other.reason else other  # whose reason is kept, with its cause
        return Failure(tuple(sorted(set(self.missing) | set(other.missing))[:SHOWN]),
                       self.missing_count + other.missing_count, said.reason,
                       self.failed_count + other.failed_count, said.cause, said.status)


NO_FAILURE = Failure()
"""Nothing went wrong: one shared instance (a `Failure` is frozen), as most rounds of most tasks end."""


class Contribution(Value):
    """What a task (or a leader, for its subtree) brings to a round."""

    __slots__ = ("records", "failure", "votes")
    records: Records
    failure: Failure
    votes: int
    """A vote: how many of the tasks it stands for vote yes."""

    def __init__(self, records: Records | None = None, failure: Failure = NO_FAILURE, votes: int = 0) -> None:
        fill(self, Records() if records is None else records, failure, votes)


class News(Value):
    """What a watch call carries besides its being alive: deaths (at most `SHOWN` ranks) and why, or that its
    writer ends normally (down the tree: and who takes over). One beat or event carries the news queued for it,
    up to `MOST_NEWS` of them (`detection.deaths.gathered`)."""

    __slots__ = ("failed", "reason", "leaving", "cause", "status", "hand_over")
    failed: tuple[int, ...]
    reason: str
    leaving: bool
    cause: Cause
    """The reason's cause."""
    status: int
    """An exit status, where the cause is `Cause.EXITED`."""
    hand_over: HandOver | None
    """A leader that leaves: who watches in its place (events only)."""

    def __init__(self, failed: tuple[int, ...] = (), reason: str = "", leaving: bool = False,
                 cause: Cause = Cause.REPORTED, status: int = 0, hand_over: HandOver | None = None) -> None:
        fill(self, failed, reason, leaving, cause, status, hand_over)

    def __bool__(self) -> bool:
        return bool(self.failed) or self.leaving

    @classmethod
    def of(cls, ranks: Sequence[int], fault: Fault) -> News:
        """The news of ``ranks``' deaths (at most `SHOWN` of them), for ``fault``."""
        return cls(tuple(ranks), fault.words, cause=fault.cause, status=fault.status)

    def fault(self, default: str, at: float = 0.0) -> Fault:
        """Its deaths' failure, typed (``default``: the words where none came; ``at``: when it was heard)."""
        return Fault(self.cause, self.reason or default, self.status, at=at)


class Identity(Value):
    """Who a server belongs to: its launch and task (what it answers WhoAreYou with, and what its gate
    guards)."""

    __slots__ = ("job_key", "rank", "node", "job", "index")
    job_key: str
    rank: int
    node: str
    job: str
    index: int

    def __init__(self, job_key: str, rank: int, node: str, job: str, index: int) -> None:
        fill(self, job_key, rank, node, job, index)

    @property
    def label(self) -> str:
        """How messages name the task, as `Task.label` does."""
        return f"{self.job}:{self.index} (rank {self.rank}) on {self.node}"


class HandOver(Value):
    """A leader that leaves normally: who watches in its place, on whom, and who left before it."""

    __slots__ = ("successor", "above", "gone")
    successor: int
    above: int | None
    """The rank the successor watches on; None at the top of the tree."""
    gone: frozenset[Source]
    """Its sources that left normally already (they will not call the successor)."""

    def __init__(self, successor: int, above: int | None, gone: frozenset[Source] = frozenset()) -> None:
        fill(self, successor, above, gone)
