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
from slurm_resolver.rpc.messages import MOST_NEWS, SHOWN, HandOver, News, Source, WireError
from slurm_resolver.rpc.wire import unwrap

from ..test_wire import unsealed


def test_beats_and_events_round_trip_with_a_hand_over() -> None:
    first = Beat("1.0", 2, 1, b"nonce", 8001)
    assert decode_beat(unwrap(encode_first_beat(first, unsealed))[0], 4) == first
    gone = News((3,), "gone", cause=Cause.EXITED, status=-9)
    assert decode_beat(encode_beat([gone]), 4).died == (gone,)
    assert gone.fault("dead") == Fault(Cause.EXITED, "gone", -9) and News((3,)).fault("dead").words == "dead"
    assert encode_beat() == b"" and decode_beat(encode_beat([News((3,), "x")]), 4).died[0].cause is Cause.REPORTED
    assert decode_event(unwrap(encode_first_event(b"nonce", 1, unsealed))[0], 4).nonce == b"nonce"
    over = HandOver(2, None, frozenset({Source.task(3), Source.node(1)}))
    assert decode_event(encode_event([News(leaving=True, hand_over=over)]), 4).hand_over == over
    assert decode_event(encode_event([News(leaving=True, hand_over=HandOver(2, 0))]), 4).hand_over == HandOver(2, 0)
    with pytest.raises(WireError, match="more than a job"):
        decode_event(encode_event([News(leaving=True, hand_over=HandOver(9, None))]), 4)
    with pytest.raises(WireError, match="more than a job"):
        decode_beat(encode_beat([News((7,), "x", cause=Cause.CRASHED)]), 4)


def test_a_cause_travels_beside_its_words_and_one_no_version_sends_is_refused() -> None:
    from slurm_resolver.rpc import coordination_pb2 as pb

    event = decode_event(encode_event([News((2,), "cannot run 'x'", cause=Cause.UNSTARTED, status=127)]), 4)
    assert event.died[0].fault("dead") == Fault(Cause.UNSTARTED, "cannot run 'x'", 127)
    assert decode_event(pb.Event(failed=[2], reason="old").SerializeToString(), 4).died[0].cause is Cause.REPORTED
    with pytest.raises(WireError, match="a cause that cannot be"):
        decode_beat(pb.Beat(failed=[1], cause="bored").SerializeToString(), 4)


def test_one_message_carries_the_deaths_queued_for_it_each_with_its_own_reason_and_stays_bounded() -> None:
    """A burst of deaths (a process of many nodes killed) travels as a few messages a call, not one a death; an
    old reader of the protocol reads the first reason (its own fields)."""
    from slurm_resolver.rpc import coordination_pb2 as pb

    news = [News((r,), f"rank {r} died", cause=Cause.CRASHED) for r in range(MOST_NEWS + 4)]
    news.append(News(leaving=True, hand_over=HandOver(1, None)))
    event = decode_event(encode_event(news), 100)
    assert event.died == tuple(news[:MOST_NEWS]) and event.leaving and event.hand_over == HandOver(1, None)
    beat = decode_beat(encode_beat([News(tuple(range(SHOWN + 3)), "many"), News((50,), "one", leaving=True)]), 100)
    assert [d.failed for d in beat.died] == [tuple(range(SHOWN)), (50,)] and beat.leaving
    assert list(pb.Event.FromString(encode_event(news)).failed) == [0]  # the first reason in its own fields
    too_many = pb.Event(failed=[1], more=[pb.Death(failed=[2])] * MOST_NEWS).SerializeToString()
    with pytest.raises(WireError, match="more reasons than a message carries"):
        decode_event(too_many, 100)
    with pytest.raises(WireError, match="naming no task"):
        decode_beat(pb.Beat(failed=[1], more=[pb.Death(reason="nobody")]).SerializeToString(), 100)
    with pytest.raises(WireError, match="more than a job"):
        decode_event(pb.Event(more=[pb.Death(failed=list(range(SHOWN + 1)))]).SerializeToString(), 100)
