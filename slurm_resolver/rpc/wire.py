"""The bootstrap's envelope and the limits every message meets, for every call (Join's messages are built and
read in `slurm_resolver.rpc.rounds.codec`, the watch's in `slurm_resolver.rpc.detection.beats`, WhoAreYou's in
`slurm_resolver.rpc.trust.identity`; nowhere else).

The messages are those of ``coordination.proto`` (read and written by `slurm_resolver.rpc.proto3`). Every call
and every answer opens with an envelope: a header and its seal (`slurm_resolver.rpc.trust.seals` makes and
checks seals; this module only carries them). A header commits to the records chunks that follow it by their
digests, so a server checks who calls from the first message alone, and a chunk that is not the one committed
to is refused. Bytes from the network are checked before they are believed: a malformed, oversized or
out-of-range message is a `WireError`, never a crash. Sizes do not grow with the job: a chunk carries at most
`CHUNK` records and `CHUNK_BYTES` bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from . import protos as pb
from .messages import WireError
from .proto3 import Message, ProtoError, varint

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)

CHUNK = 4096
"""Records per chunk at most: about 50 kB of ports."""
CHUNK_BYTES = 256 * 1024
"""Bytes per chunk at most (long GPU lists make smaller chunks)."""
MAX_MESSAGE = 1024 * 1024
"""The largest message a server reads: a call's first message, a chunk, or a bundled call."""
MAX_ANSWER = 64 * 1024 * 1024
"""The largest bundled answer a caller reads from the server it called: a table of millions of tasks."""
NONCE = 16
"""Bytes of a call's nonce."""
MOST_NONCE = 64
"""Bytes of a nonce a message may carry (this package's are `NONCE`; room for a longer one later)."""
MOST_NAME = 256
"""Characters of a launch's key, a node's or a job's name a message may carry."""
_SEAL = 4096

M = TypeVar("M", bound=Message)

Seal = Callable[[bytes], bytes]
"""What seals a header: its bytes in, the seal out (see `slurm_resolver.rpc.trust.seals`)."""


def parse_message(message: M, data: object, limit: int = MAX_MESSAGE) -> M:
    """``message`` read from ``data``: `WireError` where it is larger than ``limit`` or malformed."""
    if not isinstance(data, bytes) or len(data) > limit:
        raise WireError("a message larger than any this protocol sends")
    try:
        message.ParseFromString(data)
    except ProtoError as exc:
        raise WireError(f"a malformed message ({exc})") from None
    return message


def bundle(messages: Sequence[bytes]) -> bytes:
    """``messages`` as one message (see `unbundle()`): a ``Bundle``'s bytes, written as protobuf writes them
    (each message a field 1 with its length) in one join: a message written field by field copies every message
    twice, 3% of a task's CPU at 16,384 tasks, where every answer carries the 66 kB table."""
    return b"".join([part for message in messages for part in (_FIELD_1 + varint(len(message)), message)])


_FIELD_1 = pb.Bundle.FIELDS[0].tag
"""The tag of a ``Bundle``'s messages."""


def unbundle(data: object, most: int, limit: int = MAX_MESSAGE) -> list[bytes]:
    """The messages of a bundle of at most ``limit`` bytes, at most ``most`` of them, each a
    message this protocol may send."""
    found = parse_message(pb.Bundle(), data, limit)
    if not 0 < len(found.messages) <= most or any(len(m) > MAX_MESSAGE for m in found.messages):
        raise WireError(f"a bundle of {len(found.messages)} messages")
    return [bytes(m) for m in found.messages]


def unwrap(data: object) -> tuple[bytes, bytes]:
    """An envelope's header (bytes, for its seal to be checked) and seal."""
    envelope = parse_message(pb.Envelope(), data)
    if len(envelope.seal) > _SEAL:
        raise WireError("a seal larger than any")
    return bytes(envelope.header), bytes(envelope.seal)


def envelope(header: Message, seal: Seal) -> bytes:
    data = header.SerializeToString()
    return pb.Envelope(header=data, seal=seal(data)).SerializeToString()


def most_chunks(world_size: int) -> int:
    """The most chunks a call or an answer in a job of ``world_size`` tasks may announce."""
    return world_size // 256 + 2
