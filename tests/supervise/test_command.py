"""The supervised command's words: the error line of its standard error, how it ended."""

from __future__ import annotations

from slurm_resolver.faults import Cause, Fault
from slurm_resolver.supervise.command import ended_as, last_error


def test_a_commands_error_is_its_exception_line_and_its_end_is_told_with_its_status() -> None:
    assert last_error("Traceback (most recent call last):\n  File 'x'\nKeyError: 'lr'\nE1123 bye\n") == "KeyError: 'lr'"
    assert last_error("x" * 400, limit=10) == "xxxxxxx..."
    assert ended_as(2) == Fault(Cause.EXITED, "exited with code 2", 2) and not ended_as(2).killed
    assert ended_as(-15) == Fault(Cause.EXITED, "exited with signal 15 (SIGTERM)", -15) and ended_as(-15).killed
