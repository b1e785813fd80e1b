"""Stacks' messages: an ask for the stacks of one server's subtree, and the answer, each built and read here,
checked, and bounded whatever the size of the subtree (`MOST_ANSWER` bytes, 256 classes of 32 frames)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ...stacks.capture import Frame
from ...stacks.classes import MOST_CLASSES, Ranks, StackClass, Stacks
from ...values import Value, fill
from .. import protos as pb
from ..messages import WireError
from ..wire import MAX_MESSAGE, MOST_NAME, MOST_NONCE, Seal, envelope, parse_message
from .marks import ranks_of, ranks_pb

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)

MOST_ANSWER = 512 * 1024
"""Bytes of one answer at most: beyond them the commonest classes are left out (counted in ``others``)."""
MOST_FILE = 200
"""Characters of a frame's file kept (its end); of its function, `MOST_FUNCTION`."""
MOST_FUNCTION = 128


class StacksAsk(Value):
    """One ask for the stacks of a subtree."""

    __slots__ = ("job_key", "source", "nonce", "port", "within", "time", "node", "rank")

    job_key: str
    source: int
    """The rank asking; the job's size for its user outside it."""
    nonce: bytes
    port: int
    within: float
    """Seconds the answer may take."""
    time: float
    """When it was asked (seconds since the epoch)."""
    node: str
    """The node of the server asked (its name)."""
    rank: int | None
    """The rank of the server asked; None from outside the job (the step's root alone takes those)."""

    def __init__(self, job_key: str, source: int, nonce: bytes, port: int, within: float, time: float, node: str,
                 rank: int | None) -> None:
        fill(self, job_key, source, nonce, port, within, time, node, rank)

    def outside(self, world_size: int) -> bool:
        """Whether the job's user asks from outside the job."""
        return self.source >= world_size


def encode_ask(ask: StacksAsk, seal: Seal) -> bytes:
    """An ask, sealed."""
    return envelope(pb.StacksAsk(job_key=ask.job_key, source=ask.source, nonce=ask.nonce, port=ask.port,
                                 within_ms=int(ask.within * 1000), time=int(ask.time), node=ask.node,
                                 rank=ask.rank or 0), seal)


def decode_ask(header: bytes, world_size: int) -> StacksAsk:
    """An ask, checked."""
    message = parse_message(pb.StacksAsk(), header)
    if len(message.job_key) > MOST_NAME or message.source > world_size or len(message.nonce) > MOST_NONCE \
            or len(message.node) > MOST_NAME or message.rank >= world_size:
        raise WireError("an ask for stacks from no task of this job")
    outside = message.source == world_size
    return StacksAsk(message.job_key, message.source, bytes(message.nonce), message.port,
                     min(message.within_ms, 600_000) / 1000, float(message.time), message.node,
                     None if outside else message.rank)


def _class_pb(one: StackClass) -> pb.StackClass:
    frames = [pb.StackFrame(file=f.file[-MOST_FILE:], line=f.line, function=f.function[:MOST_FUNCTION])
              for f in one.frames]
    return pb.StackClass(frames=frames, main=one.main, thread=one.thread[:MOST_FUNCTION], ranks=ranks_pb(one.ranks),
                         skipped=one.skipped)


def encode_stacks(stacks: Stacks, nonce: bytes, source: int, seal: Seal, nodes: Mapping[int, str] | None = None
                  ) -> bytes:
    """An answer: ``stacks`` (and the ``nodes`` of some ranks), within `MOST_ANSWER` bytes (the commonest
    classes left out beyond them)."""
    classes = [_class_pb(one) for one in stacks.classes]
    others = stacks.others
    size = sum(c.ByteSize() + 8 for c in classes)
    dropped = stacks.dropped
    while classes and size > MOST_ANSWER:
        left = classes.pop()  # the commonest: rarest first
        size -= left.ByteSize() + 8
        if left.main:
            others = others | ranks_of(left.ranks, 1 << 32)
        else:
            dropped += 1
    return envelope(pb.StacksAnswer(nonce=nonce, source=source, classes=classes, silent=ranks_pb(stacks.silent),
                                    answered=stacks.answered, others=ranks_pb(others),
                                    nodes={rank: node[:MOST_NAME] for rank, node in (nodes or {}).items()},
                                    dropped=min(dropped, _MOST_COUNT)), seal)


def decode_stacks(header: bytes, world_size: int) -> tuple[Stacks, bytes, int]:
    """An answer's stacks, the nonce it answers and the rank that answered, checked."""
    stacks, nonce, source, _ = decode_answer(header, world_size)
    return stacks, nonce, source


def decode_answer(header: bytes, world_size: int) -> tuple[Stacks, bytes, int, dict[int, str]]:
    """An answer's stacks, the nonce it answers, the rank that answered and the nodes it names, checked."""
    message = parse_message(pb.StacksAnswer(), header, MAX_MESSAGE)
    if len(message.classes) > MOST_CLASSES or message.answered > world_size or len(message.nonce) > MOST_NONCE \
            or message.source >= world_size or len(message.nodes) > 8 * (MOST_CLASSES + 1) \
            or any(rank >= world_size or len(node) > MOST_NAME for rank, node in message.nodes.items()):
        raise WireError("a malformed answer of stacks")
    classes = []
    for one in message.classes:
        if len(one.frames) > 64:
            raise WireError("a stack deeper than any task sends")
        frames = tuple(Frame(f.file[-MOST_FILE:], f.line, f.function[:MOST_FUNCTION]) for f in one.frames)
        classes.append(StackClass(frames, one.main, one.thread[:MOST_FUNCTION], ranks_of(one.ranks, world_size),
                                  one.skipped))
    stacks = Stacks(tuple(classes), ranks_of(message.silent, world_size), message.answered,
                    ranks_of(message.others, world_size), message.dropped)
    return stacks, bytes(message.nonce), message.source, dict(message.nodes)


_MOST_COUNT = (1 << 32) - 1
"""The most a count of the wire holds (a sum of hostile counts is cut there, never an error)."""


def beyond(stacks: Stacks, subtree: Sequence[int]) -> str | None:
    """Why ``stacks`` cannot be the answer of the tasks ``subtree`` (their ranks); None where it can: it
    counts no more tasks than the subtree holds, and names no rank outside it.

    >>> beyond(Stacks.silent_tasks([3, 4]), [3, 4, 9]) is None, beyond(Stacks(answered=4), [5])
    (True, 'it counts 4 tasks, its subtree holds 1')
    """
    from bisect import bisect_right  # here: only an answer's check needs it, not a task's start

    size = len(subtree)
    counted = stacks.answered + len(stacks.silent)
    if counted > size:
        return f"it counts {counted} tasks, its subtree holds {size}"
    spans: list[tuple[int, int]] = []
    for rank in sorted(subtree):
        if spans and spans[-1][1] + 1 == rank:
            spans[-1] = (spans[-1][0], rank)
        else:
            spans.append((rank, rank))
    starts = [first for first, _ in spans]

    def within_subtree(ranks: Ranks) -> bool:
        if len(ranks) > size:
            return False
        for first, last in ranks.ranges:
            at = bisect_right(starts, first) - 1
            if at < 0 or last > spans[at][1]:
                return False
        return True

    named = (stacks.silent, stacks.others, *(one.ranks for one in stacks.classes))
    if not all(within_subtree(ranks) for ranks in named):
        return "it names ranks outside its subtree"
    return None
