"""The bootstrap's messages on the wire: records, failures, chunks, and their checks.

Every message is built and read here, from the classes generated from
``coordination.proto``. Sizes are bounded whatever the job's size: a chunk carries at
most :data:`CHUNK` records, a failure at most :data:`SHOWN` ranks and :data:`REASON`
characters. Bytes from the network are checked before they are believed: a malformed,
oversized or out-of-range message is a :class:`WireError`, never a crash.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from google.protobuf.message import DecodeError

from . import coordination_pb2 as pb

__all__ = ["CHUNK", "MAX_MESSAGE", "SHOWN", "REASON", "Records", "Table", "Failure", "Header", "WireError",
           "encode_contribution",
           "decode_contribution", "digest", "encode_result", "decode_result", "encode_identity", "decode_identity"]

CHUNK = 4096
"""Records per chunk: about 45 kB of ports; with the longest GPU lists still under :data:`MAX_MESSAGE`."""
MAX_MESSAGE = 4 * 1024 * 1024
"""gRPC's default limit on a received message; no chunk comes near it."""
SHOWN = 8
"""Ranks a failure names; the rest is a count."""
REASON = 1000
"""Characters of a failure's reason."""
_GPU_TEXT = 800
_NAME = 256


class WireError(ValueError):
    """A message that is malformed, too large, or names what cannot exist in this job."""


@dataclass
class Records:
    """Ports, spare ports and (where not computable) GPUs of some ranks, as columns."""

    ranks: list[int] = field(default_factory=list)
    ports: list[int] = field(default_factory=list)
    spares: list[int] = field(default_factory=list)
    gpus: dict[int, str] = field(default_factory=dict)
    nodes: list[int] = field(default_factory=list)
    """Each task's node position, only where the layout does not tell (then one per rank)."""

    def extend(self, other: Records) -> None:
        """Add ``other``'s records to these."""
        self.ranks.extend(other.ranks)
        self.ports.extend(other.ports)
        self.spares.extend(other.spares)
        self.gpus.update(other.gpus)
        self.nodes.extend(other.nodes)


@dataclass(frozen=True)
class Table:
    """A round's result records, in rank order (shared and read-only)."""

    ports: tuple[int, ...] = ()
    spares: tuple[int, ...] = ()
    gpus: Mapping[int, str] = field(default_factory=dict)
    nodes: tuple[int, ...] = ()
    """Each rank's node position, where the tasks exchanged it; else ()."""


@dataclass(frozen=True)
class Failure:
    """What went wrong: the lowest missing ranks (at most :data:`SHOWN`), their count, one reason.

    >>> Failure.missing_ranks(range(20)).merge(Failure.of("rank 3 failed")).missing_count
    20
    """

    missing: tuple[int, ...] = ()
    missing_count: int = 0
    reason: str = ""
    failed_count: int = 0

    @classmethod
    def missing_ranks(cls, ranks: Iterable[int], count: int | None = None) -> Failure:
        """A failure naming ``ranks`` as missing (``count`` of them, when they are a sample)."""
        listed = sorted(ranks)
        return cls(tuple(listed[:SHOWN]), len(listed) if count is None else count)

    @classmethod
    def of(cls, reason: str) -> Failure:
        """One task's failure, with its reason."""
        return cls(reason=reason[:REASON], failed_count=1)

    def __bool__(self) -> bool:
        return bool(self.missing_count or self.failed_count)

    def merge(self, other: Failure) -> Failure:
        """Both failures in one, still bounded."""
        if not other:
            return self
        if not self:
            return other
        return Failure(tuple(sorted(set(self.missing) | set(other.missing))[:SHOWN]),
                       self.missing_count + other.missing_count, self.reason or other.reason,
                       self.failed_count + other.failed_count)

    def to_pb(self) -> Any:
        """As the generated message."""
        return pb.Failure(missing=self.missing, missing_count=self.missing_count, reason=self.reason,
                          failed_count=self.failed_count)

    @classmethod
    def from_pb(cls, message: Any, world_size: int) -> Failure:
        """From the generated message, checked against a job of ``world_size`` tasks."""
        missing = tuple(message.missing)
        if len(missing) > SHOWN or len(message.reason) > REASON or any(r >= world_size for r in missing) \
                or message.missing_count > world_size or message.failed_count > world_size:
            raise WireError("a failure names more than a job can have")
        return cls(missing, message.missing_count, message.reason, message.failed_count)


@dataclass(frozen=True)
class Header:
    """Who sends a contribution, to which round of which launch."""

    job_key: str
    round: str
    source: int
    node: int = 0
    """The sender's node: its position in the step's node list."""
    credential: bytes = b""
    """The sender's MUNGE credential for this call (empty where calls are not authenticated)."""


def _chunks(count: int) -> range:
    return range(0, max(count, 1), CHUNK)


def encode_contribution(header: Header, records: Records, failure: Failure) -> list[bytes]:
    """A contribution as chunks of bytes (header and failure in the first)."""
    out = []
    for start in _chunks(len(records.ranks)):
        ranks = records.ranks[start:start + CHUNK]
        message = pb.Contribution(records=pb.Records(
            ranks=ranks, ports=records.ports[start:start + CHUNK], spare_ports=records.spares[start:start + CHUNK],
            gpus={r: records.gpus[r] for r in ranks if r in records.gpus}, nodes=records.nodes[start:start + CHUNK]))
        if start == 0:
            message.job_key, message.round, message.source = header.job_key, header.round, header.source
            message.node, message.credential = header.node, header.credential
            message.failure.CopyFrom(failure.to_pb())
        out.append(message.SerializeToString())
    return out


def _parse(message: Any, data: bytes) -> Any:
    if not isinstance(data, bytes) or len(data) > MAX_MESSAGE:
        raise WireError("a message larger than any chunk")
    try:
        message.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise WireError(f"a malformed message ({exc.__class__.__name__})") from None
    return message


def _check_records(message: Any, world_size: int, listed: bool) -> None:
    n = len(message.ranks) if listed else len(message.ports)
    if n > CHUNK or len(message.ports) != n or len(message.spare_ports) != n or (not listed and message.ranks) \
            or len(message.nodes) not in (0, n):
        raise WireError("a chunk whose columns disagree or hold more than a chunk")
    if any(p >= world_size for p in message.nodes):
        raise WireError("a node position beyond the job")
    if any(not 0 < p < 65536 for p in message.ports) or any(p > 65535 for p in message.spare_ports):
        raise WireError("a port outside 1-65535")
    if listed and any(r >= world_size for r in message.ranks):
        raise WireError(f"a rank beyond the job's {world_size} tasks")
    if any(r >= world_size or len(g) > _GPU_TEXT for r, g in message.gpus.items()):
        raise WireError("GPUs of a rank beyond the job, or too long")


def digest(records: Records, failure: Failure) -> str:
    """A short fingerprint of a contribution's contents, which its credential carries."""
    body = pb.Contribution(records=pb.Records(ranks=records.ranks, ports=records.ports, spare_ports=records.spares,
                                              gpus=records.gpus, nodes=records.nodes))
    body.failure.CopyFrom(failure.to_pb())
    return hashlib.sha256(body.SerializeToString(deterministic=True)).hexdigest()[:32]


def decode_contribution(chunks: Iterable[bytes], world_size: int) -> tuple[Header, Records, Failure]:
    """Read a contribution's chunks, checked against a job of ``world_size`` tasks."""
    header: Header | None = None
    failure = Failure()
    records = Records()
    for data in chunks:
        message = _parse(pb.Contribution(), data)
        _check_records(message.records, world_size, listed=True)
        if header is None:
            if len(message.job_key) > _NAME or len(message.round) > _NAME or message.source >= world_size \
                    or message.node >= world_size or len(message.credential) > 4096:
                raise WireError("a header that names no task of this job")
            header = Header(message.job_key, message.round, message.source, message.node, message.credential)
            failure = Failure.from_pb(message.failure, world_size)
        records.ranks.extend(message.records.ranks)
        records.ports.extend(message.records.ports)
        records.spares.extend(message.records.spare_ports)
        records.gpus.update(message.records.gpus)
        records.nodes.extend(message.records.nodes)
        if len(records.nodes) not in (0, len(records.ranks)):
            raise WireError("node positions for some records only")
        if len(records.ranks) > world_size:
            raise WireError(f"more records than the job's {world_size} tasks")
    if header is None:
        raise WireError("an empty contribution")
    return header, records, failure


def encode_result(token: str, failure: Failure, ports: Sequence[int] = (), spares: Sequence[int] = (),
                  gpus: Mapping[int, str] | None = None, nodes: Sequence[int] = ()) -> list[bytes]:
    """A round's result as chunks (token and failure in the first); the records are in rank order."""
    out = []
    gpus = gpus or {}
    for start in _chunks(len(ports)):
        end = start + CHUNK
        message = pb.Result(records=pb.Records(
            ports=ports[start:end], spare_ports=spares[start:end], first=start, nodes=nodes[start:end],
            gpus={r: g for r, g in gpus.items() if start <= r < end}), total=len(ports))
        if start == 0:
            message.token = token
            message.failure.CopyFrom(failure.to_pb())
        out.append(message.SerializeToString())
    return out


@lru_cache(maxsize=4)
def decode_result(chunks: tuple[bytes, ...], world_size: int) -> tuple[str, Failure, Table]:
    """Read a result's chunks, checked: records come in order, and all of them or none.

    The result is shared between callers that pass the same chunks (many simulated tasks
    in one process read one table once): treat it as read-only.
    """
    token, failure, records, total = "", Failure(), Records(), -1
    for data in chunks:
        message = _parse(pb.Result(), data)
        _check_records(message.records, world_size, listed=False)
        if total < 0:
            if len(message.token) > _NAME or message.total not in (0, world_size):
                raise WireError("a result for another job's size")
            token, total = message.token, message.total
            failure = Failure.from_pb(message.failure, world_size)
        if message.records.first != len(records.ports):
            raise WireError("result chunks out of order")
        records.ports.extend(message.records.ports)
        records.spares.extend(message.records.spare_ports)
        records.gpus.update(message.records.gpus)
        records.nodes.extend(message.records.nodes)
    if total < 0 or len(records.ports) != total or len(records.nodes) not in (0, total):
        raise WireError("an incomplete result")
    return token, failure, Table(tuple(records.ports), tuple(records.spares), records.gpus, tuple(records.nodes))


def encode_identity(job_key: str, rank: int, node: str, job: str, index: int) -> bytes:
    """What a server says of itself."""
    return bytes(pb.Identity(job_key=job_key, rank=rank, node=node, job=job, index=index).SerializeToString())


def decode_identity(data: bytes) -> tuple[str, int, str, str, int]:
    """``(job_key, rank, node, job, index)`` from a server's identity."""
    message = _parse(pb.Identity(), data)
    if max(len(message.job_key), len(message.node), len(message.job)) > _NAME:
        raise WireError("an identity with overlong names")
    return message.job_key, message.rank, message.node, message.job, message.index


def chunked(items: Sequence[bytes]) -> Iterator[bytes]:
    """``items`` as an iterator (what a streaming call takes)."""
    return iter(items)
