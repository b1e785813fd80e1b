"""Join's messages, built and read here only, bounded and checked: a call (who calls, for which round, its
failure and records), its records in chunks its header commits to, and the answer (the round's decision).

Each opens with the envelope of `slurm_resolver.rpc.wire`; a malformed, oversized or out-of-range message is a
`WireError`, never a crash. A chunk carries at most `CHUNK` records and `CHUNK_BYTES` bytes; its ports are
columns of 2 bytes a port (little-endian), read and checked whole, never a number at a time: every task reads
the whole table (16,384 ports and spare ports at 16,384 tasks), where numbers one by one cost 3.3-4.3 ms a task.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

from ...values import Value, fill
from .. import protos as pb
from ..messages import (
    MOST_KEY,
    NO_FAILURE,
    REASON,
    SHOWN,
    Failure,
    Records,
    Round,
    RoundKind,
    Source,
    Table,
    WireError,
    cause_on_wire,
    read_cause,
)
from ..primitives import sha256
from ..wire import CHUNK, CHUNK_BYTES, MOST_NAME, MOST_NONCE, Seal, envelope, most_chunks, parse_message

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)

_GPU_TEXT = 800
_DIGEST = 16


def _digest(data: bytes) -> bytes:
    return sha256(data).digest()[:_DIGEST]


# Rounds, failures and records.

def _round_pb(round: Round) -> Any:
    return pb.Round(kind=round.kind.value, name=round.name, count=round.count)


def _round(message: Any) -> Round:
    try:
        return Round(RoundKind.read(message.kind), message.name, message.count)
    except ValueError:
        raise WireError(f"a round that cannot be ({message.kind[:32]!r})") from None


def _failure_pb(failure: Failure) -> Any:
    if failure is NO_FAILURE:
        return None  # left unset: read back as `NO_FAILURE`
    return pb.Failure(missing=failure.missing, missing_count=failure.missing_count, reason=failure.reason,
                      failed_count=failure.failed_count, cause=cause_on_wire(failure.cause), status=failure.status)


def _failure(message: Any, world_size: int) -> Failure:
    if not (message.missing_count or message.failed_count or message.reason or message.missing):
        return NO_FAILURE  # nothing failed
    missing = tuple(message.missing)
    if len(missing) > SHOWN or len(message.reason) > REASON or any(r >= world_size for r in missing) \
            or message.missing_count > world_size or message.failed_count > world_size:
        raise WireError("a failure names more than a job can have")
    return Failure(missing, message.missing_count, message.reason, message.failed_count, read_cause(message.cause),
                   message.status)


def _spans(records: Records) -> list[tuple[int, int]]:
    """Where the records are cut into chunks: at most `CHUNK` records and about
    `CHUNK_BYTES` bytes each (GPU lists are what makes records long)."""
    n = len(records.ranks) if records.ranks else len(records.ports)
    if not records.gpus:
        return [(start, min(n, start + CHUNK)) for start in range(0, n, CHUNK)]
    spans, start, size = [], 0, 0
    ranks = records.ranks or range(n)
    for i, rank in enumerate(ranks):
        size += 16 + len(records.gpus.get(rank, ""))
        if i - start >= CHUNK or size > CHUNK_BYTES:
            spans.append((start, i))
            start, size = i, 16 + len(records.gpus.get(rank, ""))
    spans.append((start, n))
    return [s for s in spans if s[1] > s[0]]


def _records_pb(records: Records, start: int, end: int, listed: bool) -> Any:
    ranks = records.ranks[start:end] if listed else range(start, end)
    gpus = {r: records.gpus[r] for r in ranks if r in records.gpus} if records.gpus else None  # most jobs: none
    return pb.Records(ranks=ranks if listed else (), ports=_port_bytes(records.ports[start:end]),
                      spare_ports=_port_bytes(records.spares[start:end]), first=0 if listed else start, gpus=gpus,
                      nodes=records.nodes[start:end])


_SWAPPED = sys.byteorder == "big"
"""Whether this machine's 2-byte numbers are the wire's backwards."""


def _port_bytes(ports: Sequence[int]) -> bytes:
    """A column of ports on the wire: 2 bytes each, little-endian."""
    column = array("H", ports)
    if _SWAPPED:
        column.byteswap()
    return column.tobytes()


def _port_column(data: bytes) -> array[int]:
    """A column of ports read back (its length even: checked by the caller)."""
    column = array("H")
    column.frombytes(data)
    if _SWAPPED:
        column.byteswap()
    return column


def _holds_zero(data: bytes) -> bool:
    """Whether a column of ports holds a 0: two zero bytes at an even offset."""
    at = data.find(b"\0\0")
    while at >= 0:
        if not at % 2:
            return True
        at = data.find(b"\0\0", at + 1)
    return False


def _columns(message: Any, world_size: int, listed: bool) -> tuple[array[int], array[int]]:
    """A chunk's ports and spare ports, once its columns are checked (a port in 1-65535, a spare in 0-65535,
    a rank and a node position within the job, GPU lists bounded)."""
    n = len(message.ranks) if listed else len(message.ports) // 2
    if n > CHUNK or len(message.ports) != 2 * n or len(message.spare_ports) != 2 * n \
            or (not listed and message.ranks) or len(message.nodes) not in (0, n):
        raise WireError("a chunk whose columns disagree or hold more than a chunk")
    if message.nodes and max(message.nodes) >= world_size:
        raise WireError("a node position beyond the job")
    if _holds_zero(message.ports):
        raise WireError("a port outside 1-65535")
    if listed and n and max(message.ranks) >= world_size:
        raise WireError(f"a rank beyond the job's {world_size} tasks")
    if message.gpus and any(r >= world_size or len(g) > _GPU_TEXT for r, g in message.gpus.items()):
        raise WireError("GPUs of a rank beyond the job, or too long")
    return _port_column(message.ports), _port_column(message.spare_ports)


def _add(records: Records, message: Any, columns: tuple[array[int], array[int]]) -> None:
    records.ranks.extend(message.ranks)
    records.ports.extend(columns[0])
    records.spares.extend(columns[1])
    if message.gpus:
        records.gpus.update(message.gpus)
    records.nodes.extend(message.nodes)


# Join: a call.

class Call(Value, hidden=("first",)):  # `first`: a received message, not the call's value
    """The first message of a Join call: who calls, to which server, for which round."""

    __slots__ = ("job_key", "round", "source", "node", "nonce", "port", "failure", "chunks", "votes", "first")
    job_key: str
    round: Round
    source: int
    """The caller's rank."""
    node: int
    """The caller's node position."""
    nonce: bytes
    port: int
    """The port of the server called."""
    failure: Failure
    chunks: tuple[bytes, ...]
    """The digests of the chunks that follow."""
    votes: int
    """A vote: how many of the tasks the caller stands for vote yes."""
    first: Any
    """The first chunk of the caller's records as received: checked and read by `read_records()`
    only once the caller is believed (a stranger's records cost no work)."""

    def __init__(self, job_key: str, round: Round, source: int, node: int, nonce: bytes, port: int, failure: Failure,
                 chunks: tuple[bytes, ...] = (), votes: int = 0, first: Any = None) -> None:
        fill(self, job_key, round, source, node, nonce, port, failure, chunks, votes, first)

    def source_at(self, sources: frozenset[Source]) -> Source:
        """Who the caller is among a leader's ``sources``: a task of its node, else its node's
        leader (which the leader knows by position)."""
        task = Source.task(self.source)
        return task if task in sources else Source.node(self.node)


def encode_call(call: Call, records: Records, seal: Seal) -> list[bytes]:
    """``call`` with ``records`` as the messages of a Join call."""
    spans = _spans(records) or [(0, 0)]
    more = [_records_pb(records, s, e, True).SerializeToString() for s, e in spans[1:]]
    header = pb.Call(job_key=call.job_key, round=_round_pb(call.round), source=call.source, node=call.node,
                     nonce=call.nonce, port=call.port, failure=_failure_pb(call.failure),
                     records=_records_pb(records, *spans[0], True), chunks=[_digest(c) for c in more],
                     votes=call.votes)
    return [envelope(header, seal), *more]


def decode_call(header: bytes, world_size: int) -> Call:
    """A call's first message (its header, unwrapped), checked against a job of ``world_size`` tasks."""
    message = parse_message(pb.Call(), header)
    if len(message.job_key) > MOST_NAME or message.source >= world_size or message.node >= world_size \
            or len(message.nonce) > MOST_NONCE or len(message.chunks) > most_chunks(world_size) \
            or any(map(_DIGEST.__ne__, map(len, message.chunks))) or message.port > 65535 \
            or message.votes > world_size:
        raise WireError("a call that names no task of this job")
    return Call(message.job_key, _round(message.round), message.source, message.node, bytes(message.nonce),
                message.port, _failure(message.failure, world_size), tuple(message.chunks), message.votes,
                message.records)


def read_records(call: Call, more: Iterable[bytes], world_size: int) -> Records:
    """The call's records: its first chunk, then each further chunk, checked against its digest."""
    records = Records()
    if call.first is not None:
        _add(records, call.first, _columns(call.first, world_size, listed=True))
    count = 0
    for data in more:
        if count >= len(call.chunks) or _digest(data) != call.chunks[count]:
            raise WireError("a chunk the call did not announce")
        message = parse_message(pb.Records(), data)
        _add(records, message, _columns(message, world_size, listed=True))
        count += 1
        if len(records.ranks) > world_size:
            raise WireError(f"more records than the job's {world_size} tasks")
    if count != len(call.chunks):
        raise WireError("fewer chunks than the call announced")
    if len(records.nodes) not in (0, len(records.ranks)):
        raise WireError("node positions for some records only")
    return records


# Join: the answer.

class Decision(Value):
    """A round's result as a server keeps it: what went wrong, and the table's chunks (encoded
    once, and sent as they are to every caller)."""

    __slots__ = ("failure", "chunks", "total", "key", "votes", "digests")
    failure: Failure
    chunks: tuple[bytes, ...]
    total: int
    key: bytes
    """The table round without a secret or MUNGE: the key of later calls (see `auth`)."""
    votes: int
    """A vote: how many tasks voted yes."""
    digests: tuple[bytes, ...]
    """The chunks' digests, worked out once (every answer announces them)."""

    def __init__(self, failure: Failure, chunks: tuple[bytes, ...] = (), total: int = 0, key: bytes = b"",
                 votes: int = 0, digests: tuple[bytes, ...] = ()) -> None:
        fill(self, failure, chunks, total, key, votes, digests)


def decision(failure: Failure, table: Table | None = None, key: bytes = b"", votes: int = 0) -> Decision:
    """A round's outcome: its failure, the table in rank order (where it has one), the yes votes."""
    if table is None or not table.ports:
        return Decision(failure, key=key, votes=votes)
    records = Records([], array("H", table.ports), array("H", table.spares), dict(table.gpus), list(table.nodes))
    chunks = tuple(_records_pb(records, s, e, False).SerializeToString() for s, e in _spans(records))
    return Decision(failure, chunks, len(table.ports), key, votes, tuple(map(_digest, chunks)))


class Answer(Value):
    """The first message of Join's answer."""

    __slots__ = ("nonce", "source", "failure", "total", "chunks", "key", "votes")
    nonce: bytes
    source: int
    failure: Failure
    total: int
    chunks: tuple[bytes, ...]
    key: bytes
    votes: int

    def __init__(self, nonce: bytes, source: int, failure: Failure, total: int, chunks: tuple[bytes, ...], key: bytes,
                 votes: int) -> None:
        fill(self, nonce, source, failure, total, chunks, key, votes)

    def decision(self, chunks: Sequence[bytes]) -> Decision:
        """The outcome this answer (with its ``chunks``) tells, to pass on to the tasks below."""
        return Decision(self.failure, tuple(chunks), self.total, self.key, self.votes, self.chunks)


def encode_answer(outcome: Decision, nonce: bytes, source: int, seal: Seal) -> list[bytes]:
    """The messages that answer the call of ``nonce`` with ``outcome``, from rank ``source``."""
    header = pb.Answer(nonce=nonce, source=source, failure=_failure_pb(outcome.failure), total=outcome.total,
                       chunks=outcome.digests, key=outcome.key, votes=outcome.votes)
    return [envelope(header, seal), *outcome.chunks]


def decode_answer(header: bytes, world_size: int) -> Answer:
    """An answer's first message (its header, unwrapped), checked."""
    message = parse_message(pb.Answer(), header)
    if message.total not in (0, world_size) or len(message.chunks) > most_chunks(world_size) \
            or any(map(_DIGEST.__ne__, map(len, message.chunks))) or len(message.key) > MOST_KEY \
            or message.source >= world_size or len(message.nonce) > MOST_NONCE or message.votes > world_size:
        raise WireError("an answer for another job's size")
    return Answer(bytes(message.nonce), message.source, _failure(message.failure, world_size), message.total,
                  tuple(message.chunks), bytes(message.key), message.votes)


def read_table(answer: Answer, chunks: Sequence[bytes], world_size: int) -> Table:
    """The table an answer's chunks hold, each checked against its digest: all of it, in order."""
    if len(chunks) != len(answer.chunks):
        raise WireError("chunks the answer did not announce")
    return _table(tuple(chunks), answer.chunks, answer.total, world_size)


@lru_cache(maxsize=4)
def _table(chunks: tuple[bytes, ...], digests: tuple[bytes, ...], total: int, world_size: int) -> Table:
    """The table of ``chunks``, checked against ``digests`` (shared between callers that pass the same
    chunks: many simulated tasks in one process read and check one table once; treat it as read-only)."""
    if any(_digest(c) != d for c, d in zip(chunks, digests)):
        raise WireError("chunks the answer did not announce")
    records = Records()
    for data in chunks:
        message = parse_message(pb.Records(), data)
        columns = _columns(message, world_size, listed=False)
        if message.first != len(records.ports):
            raise WireError("result chunks out of order")
        _add(records, message, columns)
    if len(records.ports) != total or len(records.nodes) not in (0, total):
        raise WireError("an incomplete result")
    return Table(records.ports, records.spares, records.gpus, tuple(records.nodes))
