"""The protocol's state as values: rounds and their kinds, sources, failures, the news a beat carries."""

from __future__ import annotations

import pytest

from slurm_resolver.faults import Cause
from slurm_resolver.rpc.messages import (
    SHOWN,
    Failure,
    News,
    Records,
    Round,
    RoundKind,
    Source,
    SourceKind,
    WireError,
    cause_on_wire,
    read_cause,
)


def test_every_kind_is_read_back_from_its_name_on_the_wire_and_nothing_else_is() -> None:
    assert [RoundKind.read(k.value) for k in RoundKind] == list(RoundKind)
    with pytest.raises(ValueError, match="no kind of round"):
        RoundKind.read("coffee")


@pytest.mark.parametrize("kind, name, count", [
    (RoundKind.TABLE, "x", 0), (RoundKind.BARRIER, "", 0), (RoundKind.NOTICE, "n", 2), (RoundKind.VOTE, "v", -1),
    (RoundKind.BARRIER, "x" * 201, 0),
])
def test_a_round_that_cannot_be_is_refused(kind: RoundKind, name: str, count: int) -> None:
    with pytest.raises(WireError, match="a round that cannot be"):
        Round(kind, name, count)


def test_rounds_are_named_for_errors_and_an_announcement_decides_its_notice() -> None:
    assert Round(RoundKind.TABLE).label == "the bootstrap" and Round.vote("go", 3).label == "'go'"
    assert Round.announce("done").heard == Round.notice("done")


def test_sources_sort_and_describe_themselves() -> None:
    assert sorted([Source.node(0), Source.task(3), Source.task(1)]) == [Source.node(0), Source.task(1), Source.task(3)]
    assert Source.task(1).kind is SourceKind.TASK and Source.node(2).describe() == "the leader of node position 2"


def test_a_failure_stays_bounded_when_merged() -> None:
    merged = Failure.missing_ranks(range(100, 120)).merge(Failure.missing_ranks(range(5)))
    merged = merged.merge(Failure.of("x" * 5000))
    assert merged.missing == (0, 1, 2, 3, 4, 100, 101, 102)[:SHOWN] and merged.missing_count == 25
    assert len(merged.reason) == 1000
    assert merged.failed_count == 1 and not Failure() and Failure().merge(Failure()) == Failure()


def test_records_extend_column_by_column() -> None:
    records = Records()
    records.extend(Records([0], [9000], [9001]))
    records.extend(Records([1], [9002], [9003], {1: "0"}))
    assert (records.ranks, list(records.ports), list(records.spares)) == ([0, 1], [9000, 9002], [9001, 9003])
    assert type(records.ports).__name__ == "array"  # columns of 2 bytes a port, extended in C (the table's read)
    assert records == Records([0, 1], [9000, 9002], [9001, 9003], {1: "0"})  # whatever holds the columns
    assert records.gpus == {1: "0"}


def test_news_is_something_only_when_it_names_a_death_or_an_end() -> None:
    assert not News() and News((3,), "killed") and News(leaving=True) and not News(hand_over=None)


def test_every_cause_is_read_back_from_its_name_on_the_wire_and_nothing_else_is() -> None:
    """`Cause.REPORTED` is sent as nothing (as a peer of an older version, which sends no cause)."""
    assert all(read_cause(cause_on_wire(cause)) is cause for cause in Cause)
    assert cause_on_wire(Cause.REPORTED) == "" and read_cause("") is Cause.REPORTED
    with pytest.raises(WireError, match="a cause that cannot be"):
        read_cause("vanished")
