"""The bootstrap's messages: round trips, chunks, bounds, and hostile bytes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_resolver.rpc import coordination_pb2 as pb
from slurm_resolver.rpc.wire import (
    CHUNK,
    SHOWN,
    Failure,
    Header,
    Records,
    WireError,
    decode_contribution,
    decode_identity,
    decode_result,
    encode_contribution,
    encode_identity,
    encode_result,
)


def test_contribution_round_trip_in_chunks() -> None:
    n = 2 * CHUNK + 5
    records = Records(list(range(n)), [1000 + r % 60000 for r in range(n)], [2000] * n, {3: "0,1"})
    chunks = encode_contribution(Header("7.0", "table", 4), records, Failure.missing_ranks([9]))
    assert len(chunks) == 3
    header, back, failure = decode_contribution(chunks, n)
    assert header == Header("7.0", "table", 4) and back == records and failure.missing == (9,)


def test_result_round_trip_in_chunks_and_order() -> None:
    n = CHUNK + 1
    chunks = encode_result("token", Failure(), list(range(1, n + 1)), [5] * n, {n - 1: "GPU-x"})
    token, failure, table = decode_result(tuple(chunks), n)
    assert token == "token" and not failure and table.ports[-1] == n and table.gpus == {n - 1: "GPU-x"}
    with pytest.raises(WireError, match="order"):
        decode_result(tuple(reversed(chunks)), n)
    with pytest.raises(WireError, match="incomplete"):
        decode_result(tuple(chunks[:1]), n)


def test_failures_stay_bounded_whatever_the_size() -> None:
    failure = Failure()
    for start in range(0, 100_000, 1000):
        failure = failure.merge(Failure.missing_ranks(range(start, start + 1000)))
    failure = failure.merge(Failure.of("x" * 10_000))
    assert failure.missing == tuple(range(SHOWN)) and failure.missing_count == 100_000
    assert len(failure.reason) == 1000 and failure.failed_count == 1
    assert len(encode_result("", failure)[0]) < 1200


@pytest.mark.parametrize("message, world, match", [
    (pb.Contribution(job_key="k", round="r", source=9), 4, "names no task"),
    (pb.Contribution(job_key="k", round="r", source=0, records=pb.Records(ranks=[7], ports=[1], spare_ports=[1])), 4,
     "beyond the job"),
    (pb.Contribution(job_key="k", round="r", source=0, records=pb.Records(ranks=[1], ports=[70000], spare_ports=[1])),
     4, "port outside"),
    (pb.Contribution(job_key="k", round="r", source=0, records=pb.Records(ranks=[1, 2], ports=[1], spare_ports=[1])),
     4, "disagree"),
    (pb.Contribution(job_key="k", round="r", source=0, failure=pb.Failure(missing=list(range(9)))), 40, "more than"),
    (pb.Contribution(job_key="k" * 300, round="r", source=0), 4, "names no task"),
])
def test_impossible_contributions_are_refused(message: pb.Contribution, world: int, match: str) -> None:
    with pytest.raises(WireError, match=match):
        decode_contribution([message.SerializeToString()], world)


def test_too_many_records_and_empty_calls_are_refused() -> None:
    chunk = pb.Contribution(job_key="k", round="r", source=0,
                            records=pb.Records(ranks=[1, 2, 3], ports=[1, 1, 1], spare_ports=[1, 1, 1]))
    with pytest.raises(WireError, match="more records"):
        decode_contribution([chunk.SerializeToString()] * 2, 4)
    with pytest.raises(WireError, match="empty"):
        decode_contribution([], 4)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=200), max_size=4), st.integers(1, 10_000))
def test_hostile_bytes_are_a_wire_error_never_a_crash(chunks: list[bytes], world: int) -> None:
    for decode in (lambda: decode_contribution(chunks, world), lambda: decode_result(tuple(chunks), world)):
        try:
            decode()
        except WireError:
            pass
    if chunks:
        try:
            decode_identity(chunks[0])
        except WireError:
            pass


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 99), st.integers(1, 65535), st.integers(0, 65535)), max_size=50),
       st.sampled_from(["table", "verified", "b#3"]))
def test_every_valid_contribution_round_trips(rows: list[tuple[int, int, int]], round_: str) -> None:
    records = Records([r for r, _, _ in rows], [p for _, p, _ in rows], [s for _, _, s in rows])
    header, back, _ = decode_contribution(encode_contribution(Header("j.s", round_, 0), records, Failure()), 100)
    assert header.round == round_ and back == records


def test_identity_round_trip() -> None:
    assert decode_identity(encode_identity("1.0", 3, "node2", "ps", 1)) == ("1.0", 3, "node2", "ps", 1)
