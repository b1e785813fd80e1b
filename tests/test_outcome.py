"""What a supervised command came to: records that round-trip with their causes, stay bounded, survive bad
files, and read the records of an older version."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurm_resolver.errors import EnvironmentVariableError
from slurm_resolver.faults import Cause, Fault
from slurm_resolver.outcome import (
    HEARD,
    Outcome,
    Recording,
    bootstrapped_at,
    bootstrapped_step,
    mark_bootstrapped,
    read_all,
    write,
)

KILLED = Outcome("worker:3 (rank 3) on node2", Fault(Cause.EXITED, "exited with signal 9 (SIGKILL)", -9, 3, "node2",
                                                    1700000000.25, oom=True))


def test_outcomes_round_trip_through_their_directory(tmp_path: Path) -> None:
    stopped = Outcome("worker:0 (rank 0) on node1", Fault(Cause.LEFT, "stopped: x died", -15, 0, "node1", 1700000001.0),
                      (Fault(Cause.SILENT, "x died", 0, 3, "node2", 1700000000.5),
                       Fault(Cause.EXITED, "y exited", 2, 5, "node3", 1700000000.75)))
    write(KILLED, tmp_path)
    write(stopped, tmp_path)
    assert read_all(tmp_path) == {0: stopped, 3: KILLED}
    assert not list(tmp_path.glob(".*")), "no partial file is left"


def test_a_record_of_an_older_version_reads_with_the_causes_its_ending_meant() -> None:
    old = {"rank": 0, "node": "n1", "task": "worker:0 (rank 0) on n1", "status": -15, "reason": "stopped: x died",
           "oom": False, "at": 5.0, "heard": [[3, "n2", "x died"]]}
    stopped = Outcome.from_json(json.dumps({**old, "ending": "stopped"}))
    assert stopped.fault == Fault(Cause.LEFT, "stopped: x died", -15, 0, "n1", 5.0)
    assert stopped.heard == (Fault(Cause.REPORTED, "x died", 0, 3, "n2"),)
    killed = Outcome.from_json(json.dumps({**old, "ending": "killed", "status": -9}))
    failed = Outcome.from_json(json.dumps({**old, "ending": "failed", "status": 1}))
    assert killed.fault.killed and failed.fault.signature == (Cause.EXITED, 1) and not failed.fault.killed


def test_an_outcome_names_the_task_of_every_fault() -> None:
    with pytest.raises(ValueError, match="names the task of every fault"):
        Outcome("worker:0", Fault(Cause.EXITED, "exited with code 1", 1))
    with pytest.raises(ValueError, match="names the task of every fault"):
        Outcome("worker:0", KILLED.fault, (Fault(Cause.CRASHED, "died"),))


def test_a_record_is_bounded_whatever_it_is_given() -> None:
    heard = tuple(Fault(Cause.CRASHED, "w" * 5000, 0, r, "n" * 5000) for r in range(1000))
    huge = Outcome("t" * 10_000, Fault(Cause.EXITED, "r" * 100_000, 1, 1, "n" * 10_000), heard)
    text = huge.as_json()
    assert len(text) < 20_000
    back = Outcome.from_json(text)
    assert len(back.heard) == HEARD and len(back.fault.words) == 400


def test_bad_records_are_skipped_not_fatal(tmp_path: Path) -> None:
    write(KILLED, tmp_path)
    (tmp_path / "rank-1.json").write_text("{not json")
    (tmp_path / "rank-2.json").write_text(json.dumps({"rank": 2}))
    (tmp_path / "rank-4.json").write_text(KILLED.as_json() + " " * 70_000)
    (tmp_path / "rank-5.json").write_text(KILLED.as_json().replace('"exited"', '"vanished"'))  # no such cause
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
