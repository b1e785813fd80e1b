"""WhoAreYou's messages: a question and an identity round trip with their seals."""

from __future__ import annotations

from slurm_resolver.rpc.trust.identity import (
    Identity,
    Question,
    decode_identity,
    decode_who,
    encode_identity,
    encode_who,
)
from slurm_resolver.rpc.wire import unwrap

from ..test_wire import unsealed


def test_identity_and_who_round_trip_with_their_seal() -> None:
    identity = Identity("1.0", 3, "node2", "ps", 1)
    header, seal = unwrap(encode_identity(identity, b"nonce", lambda h: b"S" + h[:3]))
    assert decode_identity(header) == (identity, b"nonce") and seal == b"S" + header[:3]
    header, _ = unwrap(encode_who(Question("1.0", 2, b"nonce", 8001), unsealed))
    assert decode_who(header, 4) == Question("1.0", 2, b"nonce", 8001, early=False)
    header, _ = unwrap(encode_who(Question("1.0", 2, b"nonce", 8001, early=True), unsealed))
    assert decode_who(header, 4).early
