"""The envelope every call and answer opens with, bundles, and the limits every message meets."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_resolver.rpc import coordination_pb2 as pb
from slurm_resolver.rpc.messages import WireError
from slurm_resolver.rpc.wire import MAX_MESSAGE, bundle, envelope, most_chunks, unbundle, unwrap


def unsealed(header: bytes) -> bytes:
    return b""


def test_an_envelope_carries_its_header_and_the_seal_made_for_it() -> None:
    sent = envelope(pb.Who(job_key="7.0", source=3), lambda header: b"seal of " + header[:4])
    header, seal = unwrap(sent)
    assert pb.Who.FromString(header).source == 3 and seal.startswith(b"seal of ")
    with pytest.raises(WireError, match="seal larger"):
        unwrap(pb.Envelope(header=b"", seal=b"s" * 5000).SerializeToString())
    with pytest.raises(WireError):
        unwrap(b"\xff\xff\xff")


def test_a_bundle_round_trips_within_its_bounds() -> None:
    assert unbundle(bundle([b"a", b"bc"]), 2) == [b"a", b"bc"]
    with pytest.raises(WireError, match="a bundle of 3"):
        unbundle(bundle([b"a", b"b", b"c"]), 2)
    with pytest.raises(WireError, match="a bundle of 0"):
        unbundle(bundle([]), 2)
    with pytest.raises(WireError, match="larger than any"):
        unbundle(b"x" * (MAX_MESSAGE + 1), 2)
    assert most_chunks(256) == 3


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(st.binary(max_size=300), st.integers(0, 20_000).map(bytes)), max_size=8))
def test_a_bundle_is_the_bytes_protobuf_writes(messages: list[bytes]) -> None:
    """Written in one join, read back by protobuf: the same bytes as ``Bundle(messages=...)``, lengths of every
    varint width included."""
    assert bundle(messages) == pb.Bundle(messages=messages).SerializeToString()
    if messages:
        assert unbundle(bundle(messages), len(messages)) == messages
