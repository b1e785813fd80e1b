"""The supervised command's words: the error line of its standard error, how it ended."""

from __future__ import annotations

from slurm_resolver.outcome import Ending
from slurm_resolver.supervise.command import ended_as, last_error


def test_a_commands_error_is_its_exception_line_and_its_end_is_told_with_its_status() -> None:
    assert last_error("Traceback (most recent call last):\n  File 'x'\nKeyError: 'lr'\nE1123 bye\n") == "KeyError: 'lr'"
    assert last_error("x" * 400, limit=10) == "xxxxxxx..."
    assert ended_as(2) == (Ending.FAILED, "exited with code 2")
    assert ended_as(-15) == (Ending.KILLED, "exited with signal 15 (SIGTERM)")
