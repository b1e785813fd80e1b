"""The small commands: expand, collapse, launchers, variables, check."""

from __future__ import annotations

from typing import Any

from slurm_resolver.diagnostics import run_checks

from ..conftest import captured


def test_expand_collapse(cli: Any) -> None:
    assert cli("expand", "r[1-2]n[01-02]").stdout.split() == ["r1n01", "r1n02", "r2n01", "r2n02"]
    assert cli("collapse", "node10", "node9").stdout.strip() == "node[9-10]"


def test_launchers_and_variables(cli: Any) -> None:
    assert "openmpi" in cli("launchers").stdout
    assert "SLURM_STEP_TASKS_PER_NODE" in cli("variables").stdout


def test_check_reports_a_malformed_variable() -> None:
    results = run_checks(dict(captured("srun_N3_n6")[0], SLURM_STEP_TASKS_PER_NODE="4,x"))
    failed = [r for r in results if not r[0]]
    assert failed and failed[0][1] == "resolution" and "SLURM_STEP_TASKS_PER_NODE" in failed[0][2]


def test_check_warns_when_the_bootstrap_would_not_be_authenticated() -> None:
    env = dict(captured("srun_N3_n6")[0], SLURM_RESOLVER_MUNGE_SOCKET="/nonexistent/munge.socket")
    warned = [r for r in run_checks(env) if r[1] == "auth"]
    assert warned and warned[0][0] is None and "not authenticated" in warned[0][2]
