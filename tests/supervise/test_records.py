"""What a supervised task records for ``slurm-resolver run`` (its end, the deaths it heard) is tested through
`supervise()` in test_supervise.py; here, that outside ``run`` it writes nothing."""

from __future__ import annotations

from typing import Any

from slurm_resolver.faults import Cause, Fault
from slurm_resolver.supervise.records import Recorder


def test_outside_run_a_recorder_writes_nothing() -> None:
    class Task:
        rank, me = 0, type("Me", (), {"label": "worker:0 (rank 0) on n0"})()

    task: Any = Task()
    recorder = Recorder(task, None)
    recorder.bootstrapped(None, "0")
    recorder.record(Fault(Cause.EXITED, "exited with code 1", 1))
    assert recorder.directory is None and recorder.label == "worker:0 (rank 0) on n0"
