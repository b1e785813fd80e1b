"""How a training program's task starts: its framework checked first, then its layout, then the bootstrap."""

from __future__ import annotations

import sys

import pytest

from slurm_resolver.errors import ConfigurationError
from slurm_resolver.training.task import start_task


def test_a_missing_framework_is_one_line_naming_the_extra_before_any_bootstrap(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # not importable, even where another test imported it
    assert start_task("ddp", None, 5.0, needs="torch") is None
    assert capsys.readouterr().err == ("ddp: error: The ddp job needs the Python module 'torch', which is not "
                                       "installed (hint: pip install 'slurm_resolver[torch]')\n")


def test_a_refused_layout_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    def refuse(layout: object) -> None:
        raise ConfigurationError(f"no chief in {layout}", "add chief=1")

    assert start_task("parameter_server", "ps=1,worker=2", 5.0, refuse) is None
    said = capsys.readouterr().err
    assert said == "parameter_server: error: no chief in {'ps': 1, 'worker': 2} (hint: add chief=1)\n"


def test_a_bad_layout_names_the_option(capsys: pytest.CaptureFixture[str]) -> None:
    assert start_task("resumable", "ps=x", 5.0) is None
    assert "resumable: error:" in capsys.readouterr().err
