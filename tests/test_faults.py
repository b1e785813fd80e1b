"""A task's failure, typed: causes named as the wire and the records name them, faults recorded for their task."""

from __future__ import annotations

import dataclasses

import pytest

from slurm_resolver.faults import Cause, Fault


def test_each_cause_keeps_its_name_on_the_wire_and_in_records() -> None:
    """Peers and records of older versions send these names: a cause is never renamed."""
    assert {cause.value for cause in Cause} == {"exited", "unstarted", "crashed", "silent", "left", "reported", "hung"}


@pytest.mark.parametrize(("fault", "killed"), [
    (Fault(Cause.EXITED, "exited with signal 9 (SIGKILL)", -9), True),
    (Fault(Cause.EXITED, "exited with code 1", 1), False),
    (Fault(Cause.LEFT, "stopped: worker:5 died", -15), False),  # its task stopped it: no death of its own
    (Fault(Cause.CRASHED, "died", 0), False),
    (Fault(Cause.UNSTARTED, "cannot run 'x'", 127), False),
])
def test_a_fault_is_a_death_by_its_cause_and_status(fault: Fault, killed: bool) -> None:
    assert fault.killed is killed


def test_two_failures_are_alike_by_cause_and_status_whatever_their_words_and_tasks() -> None:
    one = Fault(Cause.EXITED, "worker:1: its command exited with code 1: ValueError", 1, 1, "n1", 5.0)
    other = Fault(Cause.EXITED, "worker:7: its command exited with code 1: KeyError", 1, 7, "n4", 9.0)
    assert one.signature == other.signature == (Cause.EXITED, 1)
    assert one.signature != Fault(Cause.UNSTARTED, one.words, 1).signature != Fault(Cause.EXITED, "", 2).signature


def test_a_fault_is_recorded_for_its_task() -> None:
    news = Fault(Cause.SILENT, "stopped beating", node="n2", at=3.0)
    assert news.rank is None
    assert news.of(4) == Fault(Cause.SILENT, "stopped beating", 0, 4, "n2", 3.0)
    assert news.of(4, "n3", 7.5) == Fault(Cause.SILENT, "stopped beating", 0, 4, "n3", 7.5)
    killed = Fault(Cause.EXITED, "killed", -9, oom=True)
    assert killed.of(2, "n1", 1.0) == dataclasses.replace(killed, rank=2, node="n1", at=1.0)  # every field kept
