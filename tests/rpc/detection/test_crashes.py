"""A process's uncaught exception is its task's failure while the task runs, and nothing at a prompt."""

from __future__ import annotations

import pytest

from slurm_resolver.faults import Cause
from slurm_resolver.rpc.bootstrap import bootstrap

from ..test_bootstrap import env


def test_an_uncaught_exception_is_reported_only_while_the_task_runs_and_not_at_a_prompt(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import sys
    import weakref

    from slurm_resolver.rpc.detection import crashes

    monkeypatch.setattr(crashes, "_reporting", weakref.WeakSet())  # apart from other tests' tasks
    monkeypatch.setattr(sys, "excepthook", sys.__excepthook__)
    before = sys.excepthook
    b = bootstrap(environ=env(0, 1, "41"), timeout=10)
    reported: list[tuple[str, Cause]] = []
    monkeypatch.setattr(b, "fail", lambda why, cause=Cause.REPORTED, status=0: reported.append((why, cause)))
    try:
        assert sys.excepthook is not before
        monkeypatch.setattr(sys, "ps1", ">>> ", raising=False)  # an interactive prompt: the process goes on
        sys.excepthook(ValueError, ValueError("a typo"), None)
        assert reported == []
        monkeypatch.delattr(sys, "ps1")
        sys.excepthook(ValueError, ValueError("a bad batch"), None)  # the interpreter ends: a failure
        assert reported == [("worker:0 (rank 0) on localhost raised ValueError: a bad batch", Cause.CRASHED)]
    finally:
        b.stop()
    assert sys.excepthook is before
    assert "a bad batch" in capsys.readouterr().err  # the traceback still shows
