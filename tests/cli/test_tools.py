"""The small commands: expand, collapse, launchers, variables."""

from __future__ import annotations

from typing import Any


def test_expand_collapse(cli: Any) -> None:
    assert cli("expand", "r[1-2]n[01-02]").stdout.split() == ["r1n01", "r1n02", "r2n01", "r2n02"]
    assert cli("collapse", "node10", "node9").stdout.strip() == "node[10,9]"  # the given order, as scontrol's
    assert cli("collapse", "--sort", "node10", "node9").stdout.strip() == "node[9-10]"


def test_launchers_and_variables(cli: Any) -> None:
    assert "openmpi" in cli("launchers").stdout
    assert "SLURM_STEP_TASKS_PER_NODE" in cli("variables").stdout
