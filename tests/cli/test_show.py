"""``slurm-resolver show``: the calling task and the whole cluster, as a table or JSON."""

from __future__ import annotations

import json
from typing import Any

import pytest

from slurm_resolver.cli import main

from ..conftest import captured


def test_show_json_fields(cli: Any) -> None:
    env = captured("srun_N3_n6")[4]
    out = cli("show", "--json", "--jobs", "ps=1,worker=5", "--port-base", "9000", env=env)
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


def test_show_bootstrapped_without_bootstrap(cli: Any) -> None:
    out = cli("show", "--bootstrapped", env={"PATH": "/usr/bin:/bin"})
    assert out.returncode == 1 and "slurm-resolver bootstrap -- COMMAND" in out.stderr
