"""The messages of the watch (failure detection): beats up, events down (built and read here).

A call's first beat and first event are envelopes sealed by their writers (`slurm_resolver.rpc.wire`),
each naming its writer's process (for a task of the same node to read from the kernel); later ones are
bare, bounded messages on the same call, and only news: deaths (at most `SHOWN` ranks and one reason),
a task that leaves and who takes over, the progress marks of a subtree.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...faults import Cause, Fault
from ...stacks.progress import Marks
from ...values import Value, fill
from .. import protos as pb
from ..diagnosis.marks import progress_pb, read_progress
from ..messages import REASON, SHOWN, HandOver, Source, SourceKind, WireError, cause_on_wire, read_cause
from ..wire import MOST_NAME, MOST_NONCE, Seal, envelope, parse_message
from .processes import Process

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)


class Beat(Value):
    """A heartbeat: the first of a call says who beats; later ones may carry news."""

    __slots__ = ("job_key", "source", "node", "nonce", "port", "failed", "reason", "leaving", "cause", "status",
                 "progress", "process")
    job_key: str
    source: int
    node: int
    nonce: bytes
    port: int
    failed: tuple[int, ...]
    reason: str
    leaving: bool
    cause: Cause
    status: int
    progress: Marks | None
    """The progress marks of the beating task and every task below it (None: none marked)."""
    process: Process | None
    """The first beat: the beating task's process (None: another version's, or not said)."""

    def __init__(self, job_key: str = "", source: int = 0, node: int = 0, nonce: bytes = b"", port: int = 0,
                 failed: tuple[int, ...] = (), reason: str = "", leaving: bool = False, cause: Cause = Cause.REPORTED,
                 status: int = 0, progress: Marks | None = None, process: Process | None = None) -> None:
        fill(self, job_key, source, node, nonce, port, failed, reason, leaving, cause, status, progress, process)

    @property
    def fault(self) -> Fault:
        """The news's failure, typed."""
        return Fault(self.cause, self.reason, self.status)


class Event(Value):
    """What the task above tells: the first of a call answers the first beat; later ones carry news."""

    __slots__ = ("nonce", "source", "failed", "reason", "leaving", "hand_over", "cause", "status", "process")
    nonce: bytes
    source: int
    failed: tuple[int, ...]
    reason: str
    leaving: bool
    hand_over: HandOver | None
    cause: Cause
    status: int
    process: Process | None
    """The first event: the watching task's process (None: not said)."""

    def __init__(self, nonce: bytes = b"", source: int = 0, failed: tuple[int, ...] = (), reason: str = "",
                 leaving: bool = False, hand_over: HandOver | None = None, cause: Cause = Cause.REPORTED,
                 status: int = 0, process: Process | None = None) -> None:
        fill(self, nonce, source, failed, reason, leaving, hand_over, cause, status, process)

    @property
    def fault(self) -> Fault:
        """The news's failure, typed."""
        return Fault(self.cause, self.reason, self.status)


def _news(failed: Sequence[int], reason: str, world_size: int) -> tuple[tuple[int, ...], str]:
    if len(failed) > SHOWN or any(r >= world_size for r in failed) or len(reason) > REASON:
        raise WireError("news naming more than a job has")
    return tuple(failed), reason


def encode_first_beat(beat: Beat, seal: Seal) -> bytes:
    """A watch call's first beat: who beats, to which server."""
    process = beat.process or Process(0, 0)
    return envelope(pb.Beat(job_key=beat.job_key, source=beat.source, node=beat.node, nonce=beat.nonce,
                             port=beat.port, pid=process.pid, started=process.started), seal)


def encode_beat(failed: Sequence[int] = (), fault: Fault | None = None, leaving: bool = False,
                progress: Marks | None = None) -> bytes:
    """A later beat: ranks found dead below (at most `SHOWN`) and why, or that this task leaves, and the
    ``progress`` marks of its subtree (where any task marked)."""
    if fault is None:
        beat = pb.Beat(failed=failed[:SHOWN], leaving=leaving)
    else:
        beat = pb.Beat(failed=failed[:SHOWN], reason=fault.words[:REASON], leaving=leaving,
                       cause=cause_on_wire(fault.cause), status=fault.status)
    if progress is not None and progress.tasks:
        beat.progress.CopyFrom(progress_pb(progress))
    return bytes(beat.SerializeToString())


def decode_beat(data: bytes, world_size: int) -> Beat:
    """A beat (a first beat's header, unwrapped, or a later beat), checked."""
    message = parse_message(pb.Beat(), data)
    if len(message.job_key) > MOST_NAME or message.source >= world_size or message.node >= world_size \
            or len(message.nonce) > MOST_NONCE:
        raise WireError("a heartbeat from no task of this job")
    failed, reason = _news(message.failed, message.reason, world_size)
    progress = read_progress(message.progress, world_size) if message.HasField("progress") else None
    return Beat(message.job_key, message.source, message.node, bytes(message.nonce), message.port, failed, reason,
                message.leaving, read_cause(message.cause), message.status, progress,
                Process(message.pid, message.started) if message.pid else None)


def encode_first_event(nonce: bytes, source: int, seal: Seal, process: Process | None = None) -> bytes:
    """A watch call's first event: rank ``source`` (its ``process``) watches the caller of ``nonce``."""
    process = process or Process(0, 0)
    return envelope(pb.Event(nonce=nonce, source=source, pid=process.pid, started=process.started), seal)


def encode_event(failed: Sequence[int] = (), fault: Fault | None = None, leaving: bool = False,
                 hand_over: HandOver | None = None) -> bytes:
    """A later event: deaths (at most `SHOWN`) and why, or that the task above leaves (and who takes over)."""
    event = pb.Event(failed=failed[:SHOWN], leaving=leaving)
    if fault is not None:
        event.reason, event.cause, event.status = fault.words[:REASON], cause_on_wire(fault.cause), fault.status
    if hand_over is not None:
        gone = sorted(hand_over.gone)[:1024]
        event.hand_over.CopyFrom(pb.HandOver(
            successor=hand_over.successor, above=hand_over.above,
            gone_ranks=[s.number for s in gone if s.kind is SourceKind.TASK],
            gone_nodes=[s.number for s in gone if s.kind is SourceKind.NODE]))
    return bytes(event.SerializeToString())


def decode_event(data: bytes, world_size: int) -> Event:
    """An event (a first event's header, unwrapped, or a later event), checked."""
    message = parse_message(pb.Event(), data)
    failed, reason = _news(message.failed, message.reason, world_size)
    if message.source >= world_size or len(message.nonce) > MOST_NONCE:
        raise WireError("an event from no task of this job")
    hand_over = None
    if message.HasField("hand_over"):
        h = message.hand_over
        named = [h.successor, *([h.above] if h.HasField("above") else []), *h.gone_ranks, *h.gone_nodes]
        if len(h.gone_ranks) + len(h.gone_nodes) > 1024 or any(r >= world_size for r in named):
            raise WireError("a hand-over naming more than a job has")
        hand_over = HandOver(h.successor, h.above if h.HasField("above") else None,
                             frozenset([*map(Source.task, h.gone_ranks), *map(Source.node, h.gone_nodes)]))
    process = Process(message.pid, message.started) if message.pid else None
    return Event(bytes(message.nonce), message.source, failed, reason, message.leaving, hand_over,
                 read_cause(message.cause), message.status, process)
