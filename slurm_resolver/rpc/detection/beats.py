"""The messages of the watch (failure detection): beats up, events down (built and read here).

A call's first beat and first event are envelopes sealed by their writers (`slurm_resolver.rpc.wire`),
each naming its writer's process (for a task of the same node to read from the kernel); later ones are
bare, bounded messages on the same call, and only news: deaths (at most `MOST_NEWS` reasons, each with at most
`SHOWN` ranks: what was queued for the call), a task that leaves and who takes over, the progress marks of a
subtree.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...stacks.progress import Marks
from ...values import Value, fill
from .. import protos as pb
from ..diagnosis.marks import progress_pb, read_progress
from ..messages import (
    MOST_NEWS,
    REASON,
    SHOWN,
    HandOver,
    News,
    Source,
    SourceKind,
    WireError,
    cause_on_wire,
    read_cause,
)
from ..wire import MOST_NAME, MOST_NONCE, Seal, envelope, parse_message
from .processes import Process

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)


class Beat(Value):
    """A heartbeat: the first of a call says who beats; later ones may carry news."""

    __slots__ = ("job_key", "source", "node", "nonce", "port", "died", "leaving", "progress", "process")
    job_key: str
    source: int
    node: int
    nonce: bytes
    port: int
    died: tuple[News, ...]
    """The deaths it tells, one `News` a reason."""
    leaving: bool
    progress: Marks | None
    """The progress marks of the beating task and every task below it (None: none marked)."""
    process: Process | None
    """The first beat: the beating task's process (None: another version's, or not said)."""

    def __init__(self, job_key: str = "", source: int = 0, node: int = 0, nonce: bytes = b"", port: int = 0,
                 died: tuple[News, ...] = (), leaving: bool = False, progress: Marks | None = None,
                 process: Process | None = None) -> None:
        fill(self, job_key, source, node, nonce, port, died, leaving, progress, process)


class Event(Value):
    """What the task above tells: the first of a call answers the first beat; later ones carry news."""

    __slots__ = ("nonce", "source", "died", "leaving", "hand_over", "process")
    nonce: bytes
    source: int
    died: tuple[News, ...]
    """The deaths it tells, one `News` a reason."""
    leaving: bool
    hand_over: HandOver | None
    process: Process | None
    """The first event: the watching task's process (None: not said)."""

    def __init__(self, nonce: bytes = b"", source: int = 0, died: tuple[News, ...] = (), leaving: bool = False,
                 hand_over: HandOver | None = None, process: Process | None = None) -> None:
        fill(self, nonce, source, died, leaving, hand_over, process)


def _died(message: pb.Beat | pb.Event, world_size: int) -> tuple[News, ...]:
    """The deaths a beat or an event tells (its own fields' reason, then ``more``'s), checked."""
    groups = [message, *message.more]
    if len(groups) > MOST_NEWS:
        raise WireError("news of more reasons than a message carries")
    died = []
    for group in groups:
        if len(group.failed) > SHOWN or max(group.failed, default=0) >= world_size or len(group.reason) > REASON:
            raise WireError("news naming more than a job has")
        if group.failed:
            died.append(News(tuple(group.failed), group.reason, cause=read_cause(group.cause), status=group.status))
        elif group is not message:
            raise WireError("news of a death naming no task")
    return tuple(died)


def _told(news: Sequence[News]) -> dict[str, Any]:
    """The fields of a beat or an event that tell the deaths of ``news`` (at most `MOST_NEWS`, each `SHOWN`
    ranks): the first reason in its own fields, the others in ``more``."""
    groups = [n for n in news if n.failed][:MOST_NEWS]
    if not groups:
        return {}
    first, *others = groups
    return {"failed": first.failed[:SHOWN], "reason": first.reason[:REASON], "cause": cause_on_wire(first.cause),
            "status": first.status,
            "more": [pb.Death(failed=told.failed[:SHOWN], reason=told.reason[:REASON], cause=cause_on_wire(told.cause),
                              status=told.status) for told in others]}


def encode_first_beat(beat: Beat, seal: Seal) -> bytes:
    """A watch call's first beat: who beats, to which server."""
    process = beat.process or Process(0, 0)
    return envelope(pb.Beat(job_key=beat.job_key, source=beat.source, node=beat.node, nonce=beat.nonce,
                             port=beat.port, pid=process.pid, started=process.started), seal)


def encode_beat(news: Sequence[News] = (), progress: Marks | None = None) -> bytes:
    """A later beat: the deaths found below (at most `MOST_NEWS` reasons, each with at most `SHOWN` ranks), or
    that this task leaves, and the ``progress`` marks of its subtree (where any task marked)."""
    marks = progress_pb(progress) if progress is not None and progress.tasks else None
    return pb.Beat(leaving=any(n.leaving for n in news), progress=marks, **_told(news)).SerializeToString()


def decode_beat(data: bytes, world_size: int) -> Beat:
    """A beat (a first beat's header, unwrapped, or a later beat), checked."""
    message = parse_message(pb.Beat(), data)
    if len(message.job_key) > MOST_NAME or message.source >= world_size or message.node >= world_size \
            or len(message.nonce) > MOST_NONCE:
        raise WireError("a heartbeat from no task of this job")
    died = _died(message, world_size)
    progress = read_progress(message.progress, world_size) if message.HasField("progress") else None
    return Beat(message.job_key, message.source, message.node, bytes(message.nonce), message.port, died,
                message.leaving, progress, Process(message.pid, message.started) if message.pid else None)


def encode_first_event(nonce: bytes, source: int, seal: Seal, process: Process | None = None) -> bytes:
    """A watch call's first event: rank ``source`` (its ``process``) watches the caller of ``nonce``."""
    process = process or Process(0, 0)
    return envelope(pb.Event(nonce=nonce, source=source, pid=process.pid, started=process.started), seal)


def encode_event(news: Sequence[News] = ()) -> bytes:
    """A later event: deaths (at most `MOST_NEWS` reasons, each with at most `SHOWN` ranks), or that the task above
    leaves (and who takes over: the last news's hand-over)."""
    hand_over = next((n.hand_over for n in reversed(news) if n.hand_over is not None), None)
    told = None
    if hand_over is not None:
        gone = sorted(hand_over.gone)[:1024]
        told = pb.HandOver(successor=hand_over.successor, above=hand_over.above,
                           gone_ranks=[s.number for s in gone if s.kind is SourceKind.TASK],
                           gone_nodes=[s.number for s in gone if s.kind is SourceKind.NODE])
    return pb.Event(leaving=any(n.leaving for n in news), hand_over=told, **_told(news)).SerializeToString()


def decode_event(data: bytes, world_size: int) -> Event:
    """An event (a first event's header, unwrapped, or a later event), checked."""
    message = parse_message(pb.Event(), data)
    died = _died(message, world_size)
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
    return Event(bytes(message.nonce), message.source, died, message.leaving, hand_over, process)


LOST_REASON = 300
"""Characters of a `Lost`'s reason (for logs: the task told says its own words), within the call's 2 kB."""


class Lost(Value):
    """A leader's word that the leader of one of its child nodes is silent, to the leaders of that node's child
    nodes (who watch on it, and ping it no more: `Heartbeat`)."""

    __slots__ = ("job_key", "source", "node", "port", "above", "reason")
    job_key: str
    source: int
    """The rank that tells."""
    node: int
    """Its node's position."""
    port: int
    """The port of the server told."""
    above: int
    """The rank found silent."""
    reason: str

    def __init__(self, job_key: str, source: int, node: int, port: int, above: int, reason: str) -> None:
        fill(self, job_key, source, node, port, above, reason)


def encode_lost(lost: Lost, seal: Seal) -> bytes:
    """A `Lost`, sealed."""
    return envelope(pb.Lost(job_key=lost.job_key, source=lost.source, node=lost.node, port=lost.port,
                            above=lost.above, reason=lost.reason[:LOST_REASON]), seal)


def decode_lost(header: bytes, world_size: int) -> Lost:
    """A `Lost`'s header, unwrapped, checked."""
    message = parse_message(pb.Lost(), header)
    if len(message.job_key) > MOST_NAME or max(message.source, message.node, message.above) >= world_size \
            or len(message.reason) > REASON:
        raise WireError("a word of a silent task from no task of this job")
    return Lost(message.job_key, message.source, message.node, message.port, message.above, message.reason)
