"""Join's messages (the watch's and WhoAreYou's beside them): round trips, chunks committed to by their
header, bounds, hostile bytes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_resolver.faults import Cause
from slurm_resolver.rpc import coordination_pb2 as pb
from slurm_resolver.rpc.detection.beats import decode_beat, decode_event
from slurm_resolver.rpc.messages import NO_FAILURE, SHOWN, Failure, Records, Round, RoundKind, Table, WireError
from slurm_resolver.rpc.rounds import codec
from slurm_resolver.rpc.rounds.codec import (
    Call,
    decision,
    decode_answer,
    decode_call,
    encode_answer,
    encode_call,
    read_records,
    read_table,
)
from slurm_resolver.rpc.trust.identity import decode_identity, decode_who
from slurm_resolver.rpc.wire import CHUNK, CHUNK_BYTES, unwrap

from ..test_wire import unsealed


def call(round: Round | None = None, source: int = 4, failure: Failure | None = None) -> Call:
    return Call("7.0", round or Round.barrier("b", 0), source, 1, b"n" * 16, 8000,
                Failure() if failure is None else failure)


def test_a_call_round_trips_in_chunks_its_header_commits_to() -> None:
    n = 2 * CHUNK + 5
    records = Records(list(range(n)), [1000 + r % 60000 for r in range(n)], [2000] * n, {3: "0,1"})
    messages = encode_call(call(failure=Failure.missing_ranks([9])), records, unsealed)
    assert len(messages) == 3
    header, seal = unwrap(messages[0])
    back = decode_call(header, n)
    assert (back.round, back.source, back.port, back.failure.missing, seal) == (Round.barrier("b", 0), 4, 8000,
                                                                                  (9,), b"")
    assert read_records(back, messages[1:], n) == records
    with pytest.raises(WireError, match="did not announce"):
        read_records(back, messages[:0:-1], n)  # swapped chunks
    with pytest.raises(WireError, match="fewer chunks"):
        read_records(back, messages[1:2], n)


def test_long_gpu_lists_make_smaller_chunks() -> None:
    n = 2000
    records = Records(list(range(n)), [1000] * n, [2000] * n, {r: "GPU-" + "x" * 700 for r in range(n)})
    messages = encode_call(call(), records, unsealed)
    assert len(messages) > 2 and all(len(m) < CHUNK_BYTES + 4096 for m in messages)
    assert read_records(decode_call(unwrap(messages[0])[0], n), messages[1:], n) == records


def test_an_answer_round_trips_and_its_chunks_are_checked() -> None:
    n = CHUNK + 1
    outcome = decision(Failure(), Table(tuple(range(1, n + 1)), (5,) * n, {n - 1: "GPU-x"}), key=b"k")
    messages = encode_answer(outcome, b"nonce", 3, unsealed)
    answer = decode_answer(unwrap(messages[0])[0], n)
    assert (answer.nonce, answer.source, answer.key, answer.total) == (b"nonce", 3, b"k", n)
    table = read_table(answer, messages[1:], n)
    assert table.ports[-1] == n and table.gpus == {n - 1: "GPU-x"}
    with pytest.raises(WireError, match="did not announce"):
        read_table(answer, messages[:0:-1], n)
    with pytest.raises(WireError, match="did not announce"):
        read_table(answer, messages[1:2], n)



def test_a_round_that_went_well_sends_no_failure_and_reads_back_the_shared_one() -> None:
    """Most rounds of most tasks end well: nothing of a failure on the wire, and no new object read."""
    quiet, told = encode_call(call(failure=NO_FAILURE), Records(), unsealed), encode_call(call(), Records(), unsealed)
    assert len(quiet[0]) < len(told[0])
    assert decode_call(unwrap(quiet[0])[0], 8).failure is NO_FAILURE
    assert decode_call(unwrap(told[0])[0], 8).failure is NO_FAILURE  # an empty one, spelled out, reads the same
    failed = Failure.of("rank 3 exited with 2", Cause.EXITED, 2)
    back = decode_answer(unwrap(encode_answer(decision(failed), b"n" * 16, 0, unsealed)[0])[0], 8).failure
    assert back == failed and back is not NO_FAILURE

@pytest.mark.parametrize("decode", [decode_call, decode_answer])
def test_a_header_whose_digests_are_not_digests_is_refused(decode: Any) -> None:
    header = pb.Call(round=pb.Round(kind="table"), chunks=[bytes(16), bytes(15)]) if decode is decode_call \
        else pb.Answer(chunks=[bytes(17)])
    with pytest.raises(WireError):
        decode(header.SerializeToString(), 100)


def test_failures_stay_bounded_whatever_the_size() -> None:
    failure = Failure()
    for start in range(0, 100_000, 1000):
        failure = failure.merge(Failure.missing_ranks(range(start, start + 1000)))
    failure = failure.merge(Failure.of("x" * 10_000))
    assert failure.missing == tuple(range(SHOWN)) and failure.missing_count == 100_000
    assert len(failure.reason) == 1000 and failure.failed_count == 1
    assert len(encode_answer(decision(failure), b"n" * 16, 0, unsealed)[0]) < 1200


def _call_bytes(**fields: object) -> bytes:
    return bytes(pb.Envelope(header=pb.Call(**fields).SerializeToString()).SerializeToString())


@pytest.mark.parametrize("fields, world, match", [
    ({"job_key": "k", "round": pb.Round(kind="table"), "source": 9}, 4, "names no task"),
    ({"job_key": "k", "round": pb.Round(kind="table"),
      "records": pb.Records(ranks=[7], ports=b"\1\0", spare_ports=b"\1\0")}, 4, "beyond the job"),
    ({"job_key": "k", "round": pb.Round(kind="table"),
      "records": pb.Records(ranks=[1], ports=b"\0\0", spare_ports=b"\1\0")}, 4, "port outside"),
    ({"job_key": "k", "round": pb.Round(kind="table"), "records": pb.Records(ranks=[1, 2], ports=b"\1\0",
                                                                               spare_ports=b"\1\0")}, 4, "disagree"),
    ({"job_key": "k", "round": pb.Round(kind="table"), "failure": pb.Failure(missing=list(range(9)))}, 40,
     "more than"),
    ({"job_key": "k" * 300, "round": pb.Round(kind="table")}, 4, "names no task"),
    ({"job_key": "k", "round": pb.Round(kind="gossip")}, 4, "cannot be"),
    ({"job_key": "k", "round": pb.Round(kind="table", name="x")}, 4, "cannot be"),
    ({"job_key": "k", "round": pb.Round(kind="barrier", name="b" * 300)}, 4, "cannot be"),
    ({"job_key": "k", "round": pb.Round(kind="table"), "chunks": [b"x" * 16] * 3}, 4, "names no task"),
    ({"job_key": "k", "round": pb.Round(kind="vote", name="v"), "votes": 5}, 4, "names no task"),
])
def test_impossible_calls_are_refused(fields: dict[str, object], world: int, match: str) -> None:
    """Refused from the header alone where it says enough; its records once the caller is believed."""
    with pytest.raises(WireError, match=match):
        read_records(decode_call(unwrap(_call_bytes(**fields))[0], world), [], world)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=200), max_size=4), st.integers(1, 10_000))
def test_hostile_bytes_are_a_wire_error_never_a_crash(messages: list[bytes], world: int) -> None:
    decoders = (lambda data: decode_call(unwrap(data)[0], world), lambda data: decode_answer(unwrap(data)[0], world),
                decode_identity, lambda data: decode_who(data, world), lambda data: decode_beat(data, world),
                lambda data: decode_event(data, world))
    for data in messages:
        for decode in decoders:
            try:
                decode(data)
            except WireError:
                pass
    if messages:
        try:
            read_records(call(), messages, world)
        except WireError:
            pass


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 99), st.integers(1, 65535), st.integers(0, 65535)), max_size=50),
       st.sampled_from([Round(RoundKind.TABLE), Round(RoundKind.VERIFIED), Round.barrier("b", 3), Round.notice("n"),
                        Round.vote("v", 1), Round.announce("done")]))
def test_every_valid_call_round_trips(rows: list[tuple[int, int, int]], round_: Round) -> None:
    records = Records([r for r, _, _ in rows], [p for _, p, _ in rows], [s for _, _, s in rows])
    messages = encode_call(call(round_, 0), records, unsealed)
    back = decode_call(unwrap(messages[0])[0], 100)
    assert back.round == round_ and read_records(back, messages[1:], 100) == records


def test_a_rounds_failure_carries_its_cause_and_missing_ranks_are_silent() -> None:
    failure = Failure.of("worker:1 (rank 1): its command exited with code 2", Cause.EXITED, 2)
    header, _ = unwrap(encode_answer(decision(failure), b"n" * 16, 0, unsealed)[0])
    said = decode_answer(header, 4).failure
    assert (said.cause, said.status, said.reason) == (Cause.EXITED, 2, failure.reason)
    assert Failure.missing_ranks([3]).cause is Cause.SILENT
    assert Failure.missing_ranks([3]).merge(failure).cause is Cause.EXITED  # the reason kept, with its cause


@pytest.mark.parametrize("ports, zero", [
    ([1, 2, 3], False),
    ([256, 1], False),  # 00 01 01 00: two zero bytes nowhere
    ([1, 256, 256], False),  # 01 00 00 01 00 01: two zero bytes at an odd offset only
    ([5, 0, 7], True),
    ([0], True),
    ([65535, 65535, 0], True),
])
def test_a_zero_port_is_found_at_its_place_only(ports: list[int], zero: bool) -> None:
    assert codec._holds_zero(codec._port_bytes(ports)) is zero
    assert list(codec._port_column(codec._port_bytes(ports))) == ports


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 65535), max_size=64))
def test_a_column_of_ports_round_trips_and_names_its_zeros(ports: list[int]) -> None:
    data = codec._port_bytes(ports)
    assert len(data) == 2 * len(ports) and data[:2] == (ports[0].to_bytes(2, "little") if ports else b"")
    assert list(codec._port_column(data)) == ports and codec._holds_zero(data) is (0 in ports)


def test_the_table_is_read_in_columns_at_the_size_of_a_large_job() -> None:
    """16,384 tasks: 4 chunks of 2-byte ports, read whole (the table's checks never walk a port at a time)."""
    n = 16_384
    ports = tuple(20000 + r % 12000 for r in range(n))
    outcome = decision(Failure(), Table(ports, tuple(p + 12000 for p in ports), {}, ()), key=b"k")
    messages = encode_answer(outcome, b"n" * 16, 0, unsealed)
    assert sum(map(len, messages[1:])) < 4.1 * n  # 2 bytes a port and a spare, and little else
    table = read_table(decode_answer(unwrap(messages[0])[0], n), messages[1:], n)
    assert tuple(table.ports) == ports and tuple(table.spares) == tuple(p + 12000 for p in ports)
