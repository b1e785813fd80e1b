"""What a supervised command came to: records that round-trip, stay bounded, and survive bad files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurm_resolver.errors import EnvironmentVariableError
from slurm_resolver.outcome import (
    HEARD,
    Death,
    Ending,
    Outcome,
    Recording,
    bootstrapped_at,
    bootstrapped_step,
    mark_bootstrapped,
    read_all,
    write,
)

KILLED = Outcome(3, "node2", "worker:3 (rank 3) on node2", Ending.KILLED, -9, "exited with signal 9 (SIGKILL)",
                 False, (), 1700000000.25)


def test_outcomes_round_trip_through_their_directory(tmp_path: Path) -> None:
    stopped = Outcome(0, "node1", "worker:0 (rank 0) on node1", Ending.STOPPED, -15, "stopped: x died",
                      heard=(Death(3, "node2", "x died"),), at=1700000001.0)
    write(KILLED, tmp_path)
    write(stopped, tmp_path)
    assert read_all(tmp_path) == {0: stopped, 3: KILLED}
    assert not list(tmp_path.glob(".*")), "no partial file is left"


def test_a_record_is_bounded_whatever_it_is_given() -> None:
    heard = tuple(Death(r, "n" * 5000, "w" * 5000) for r in range(1000))
    huge = Outcome(1, "n" * 10_000, "t" * 10_000, Ending.FAILED, 1, "r" * 100_000, heard=heard)
    text = huge.as_json()
    assert len(text) < 20_000
    back = Outcome.from_json(text)
    assert len(back.heard) == HEARD and len(back.reason) == 400


def test_bad_records_are_skipped_not_fatal(tmp_path: Path) -> None:
    write(KILLED, tmp_path)
    (tmp_path / "rank-1.json").write_text("{not json")
    (tmp_path / "rank-2.json").write_text(json.dumps({"rank": 2}))
    (tmp_path / "rank-4.json").write_text(KILLED.as_json() + " " * 70_000)
    assert list(read_all(tmp_path)) == [3]
    assert read_all(tmp_path / "missing") == {}


@given(st.text(max_size=300))
def test_any_text_is_an_outcome_or_a_value_error(text: str) -> None:
    try:
        Outcome.from_json(text)
    except ValueError:
        pass


def test_the_bootstrapped_mark(tmp_path: Path) -> None:
    assert bootstrapped_at(tmp_path) is None
    mark_bootstrapped(tmp_path, 1700000000.5)
    assert bootstrapped_at(tmp_path) == 1700000000.5 and bootstrapped_step(tmp_path) is None
    mark_bootstrapped(tmp_path, 1700000001.25, "3")
    assert bootstrapped_at(tmp_path) == 1700000001.25 and bootstrapped_step(tmp_path) == "3"
    (tmp_path / "bootstrapped").write_text("soon 3; rm -rf")
    assert bootstrapped_at(tmp_path) is None and bootstrapped_step(tmp_path) is None


def test_the_recording_travels_in_the_environment() -> None:
    assert Recording.of({}) is None
    assert Recording.of({"SLURM_RESOLVER_OUTCOMES": "/x", "SLURM_RESOLVER_FAILED_AT": ""}) == Recording(Path("/x"))
    with pytest.raises(EnvironmentVariableError, match="SLURM_RESOLVER_ATTEMPT='0' is invalid"):
        Recording.of({"SLURM_RESOLVER_OUTCOMES": "/x", "SLURM_RESOLVER_ATTEMPT": "0"})
    with pytest.raises(EnvironmentVariableError, match="SLURM_RESOLVER_FAILED_AT='soon' is invalid"):
        Recording.of({"SLURM_RESOLVER_OUTCOMES": "/x", "SLURM_RESOLVER_FAILED_AT": "soon"})
