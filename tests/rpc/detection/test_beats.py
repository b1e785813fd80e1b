"""The watch's messages: beats and events round trip, with a hand-over, and stay bounded."""

from __future__ import annotations

import pytest

from slurm_resolver.rpc.detection.beats import (
    Beat,
    decode_beat,
    decode_event,
    encode_beat,
    encode_event,
    encode_first_beat,
    encode_first_event,
)
from slurm_resolver.rpc.messages import HandOver, Source, WireError
from slurm_resolver.rpc.wire import unwrap

from ..test_wire import unsealed


def test_beats_and_events_round_trip_with_a_hand_over() -> None:
    first = Beat("1.0", 2, 1, b"nonce", 8001)
    assert decode_beat(unwrap(encode_first_beat(first, unsealed))[0], 4) == first
    assert decode_beat(encode_beat([3], "gone"), 4).failed == (3,) and encode_beat() == b""
    assert decode_event(unwrap(encode_first_event(b"nonce", 1, unsealed))[0], 4).nonce == b"nonce"
    over = HandOver(2, None, frozenset({Source.task(3), Source.node(1)}))
    assert decode_event(encode_event(leaving=True, hand_over=over), 4).hand_over == over
    assert decode_event(encode_event(leaving=True, hand_over=HandOver(2, 0)), 4).hand_over == HandOver(2, 0)
    with pytest.raises(WireError, match="more than a job"):
        decode_event(encode_event(leaving=True, hand_over=HandOver(9, None)), 4)
    with pytest.raises(WireError, match="more than a job"):
        decode_beat(encode_beat([7], "x"), 4)
