"""Our resolvers drive real TensorFlow: MultiWorkerMirroredStrategy and ParameterServerStrategy.

TensorFlow is installed by scripts/test (the [tensorflow] extra); in CI a missing
TensorFlow fails these tests instead of skipping them.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from ..conftest import ROOT, require

TASK = Path(__file__).with_name("tf_task.py")


def free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def start(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": ""}
    return subprocess.Popen([sys.executable, str(TASK), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)


def result(proc: subprocess.Popen[str], timeout: float = 180) -> dict[str, object]:
    out, err = proc.communicate(timeout=timeout)
    lines = [l for l in out.splitlines() if l.startswith("{")]
    assert proc.returncode == 0 and lines, f"task failed ({proc.returncode}):\n{err[-3000:]}"
    return json.loads(lines[-1])


def test_multi_worker_mirrored_strategy_runs_a_step() -> None:
    require("tensorflow")
    cluster = json.dumps({"worker": [f"localhost:{p}" for p in free_ports(2)]})
    procs = [start("mwms", cluster, str(i)) for i in range(2)]
    results = [result(p) for p in procs]
    assert results == [{"workers": 2, "sum": 3.0}] * 2


def test_parameter_server_strategy_updates_a_variable_on_ps() -> None:
    require("tensorflow")
    chief, worker, ps = free_ports(3)
    cluster = json.dumps({"chief": [f"localhost:{chief}"], "worker": [f"localhost:{worker}"],
                          "ps": [f"localhost:{ps}"]})
    servers = [start("server", cluster, "0", "worker"), start("server", cluster, "0", "ps")]
    try:
        for s in servers:
            assert s.stdout and s.stdout.readline().startswith("{")
        outcome = result(start("chief", cluster, "0"))
        assert "/job:ps/" in str(outcome["device"]) and outcome["value"] == 2.5
    finally:
        for s in servers:
            s.kill()
            s.wait()
