"""The watch's messages: beats and events round trip, with a hand-over, and stay bounded."""

from __future__ import annotations

import pytest

from slurm_resolver.faults import Cause, Fault
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
    assert decode_beat(encode_beat([3], Fault(Cause.EXITED, "gone", -9)), 4).fault == Fault(Cause.EXITED, "gone", -9)
    assert encode_beat() == b"" and decode_beat(encode_beat([3], Fault(Cause.REPORTED, "x")), 4).cause is Cause.REPORTED
    assert decode_event(unwrap(encode_first_event(b"nonce", 1, unsealed))[0], 4).nonce == b"nonce"
    over = HandOver(2, None, frozenset({Source.task(3), Source.node(1)}))
    assert decode_event(encode_event(leaving=True, hand_over=over), 4).hand_over == over
    assert decode_event(encode_event(leaving=True, hand_over=HandOver(2, 0)), 4).hand_over == HandOver(2, 0)
    with pytest.raises(WireError, match="more than a job"):
        decode_event(encode_event(leaving=True, hand_over=HandOver(9, None)), 4)
    with pytest.raises(WireError, match="more than a job"):
        decode_beat(encode_beat([7], Fault(Cause.CRASHED, "x")), 4)


def test_a_cause_travels_beside_its_words_and_one_no_version_sends_is_refused() -> None:
    from slurm_resolver.rpc import coordination_pb2 as pb

    event = decode_event(encode_event([2], Fault(Cause.UNSTARTED, "cannot run 'x'", 127)), 4)
    assert event.fault == Fault(Cause.UNSTARTED, "cannot run 'x'", 127)
    assert decode_event(pb.Event(failed=[2], reason="old").SerializeToString(), 4).cause is Cause.REPORTED
    with pytest.raises(WireError, match="a cause that cannot be"):
        decode_beat(pb.Beat(failed=[1], cause="bored").SerializeToString(), 4)
