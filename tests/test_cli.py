from __future__ import annotations

import json
import subprocess
import sys

import pytest

from slurm_resolver.cli import main

from .conftest import captured


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "slurm_resolver", *args], capture_output=True, text=True,
                          env=env, timeout=60)


def test_show_json_fields() -> None:
    env = captured("srun_N3_n6")[4]
    out = run("show", "--json", "--jobs", "ps=1,worker=5", "--port-base", "9000", env=env)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data == {"task_type": "worker", "task_id": 3, "rank": 4, "world_size": 6, "node": "node2",
                    "address": "node2:9000", "gpus": [], "launcher": "srun",
                    "cluster": {"ps": ["node1:9000"], "worker": ["node1:9001", "node1:9002", "node1:9003",
                                                                 "node2:9000", "node3:9000"]}}


def test_show_table(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in captured("srun_N2_n4_cyclic")[1].items():
        monkeypatch.setenv(key, value)
    assert main(["show"]) == 0
    out = capsys.readouterr().out
    assert "launcher srun: rank 1 of 4, worker:1 on node2 at node2:8888" in out and "1*" in out


def test_errors_are_one_line_with_exit_code_1() -> None:
    env = dict(captured("srun_N3_n6")[0], SLURM_STEP_TASKS_PER_NODE="4,x")
    out = run("show", env=env)
    assert out.returncode == 1
    assert out.stderr.count("\n") == 1 and "SLURM_STEP_TASKS_PER_NODE='4,x' is invalid" in out.stderr
    assert "Traceback" not in out.stderr


def test_usage_error_exit_code_2() -> None:
    assert run("frobnicate").returncode == 2


def test_expand_collapse() -> None:
    assert run("expand", "r[1-2]n[01-02]").stdout.split() == ["r1n01", "r1n02", "r2n01", "r2n02"]
    assert run("collapse", "node10", "node9").stdout.strip() == "node[9-10]"


def test_launchers_and_variables() -> None:
    assert "openmpi" in run("launchers").stdout
    assert "SLURM_STEP_TASKS_PER_NODE" in run("variables").stdout
