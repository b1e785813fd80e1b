"""The command line's newer commands, without the cluster: env, check, bootstrap, submit's waiting."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest

from slurm_resolver import submission
from slurm_resolver.diagnostics import run_checks

from .conftest import captured


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "slurm_resolver", *args], capture_output=True, text=True,
                          env=env, timeout=60)


@pytest.mark.parametrize(("fmt", "expected"), [
    ("torch", ["MASTER_ADDR=node1", "MASTER_PORT=8888", "RANK=4", "WORLD_SIZE=6", "LOCAL_RANK=0",
               "LOCAL_WORLD_SIZE=1"]),
    ("jax", ["JAX_COORDINATOR_ADDRESS=node1:8888", "JAX_NUM_PROCESSES=6", "JAX_PROCESS_ID=4"]),
    ("shell", ["SLURM_RESOLVER_RANK=4", "SLURM_RESOLVER_ADDRESS=node2:8888"]),
])
def test_env_formats(fmt: str, expected: list[str]) -> None:
    out = cli("env", "--format", fmt, env=dict(captured("srun_N3_n6")[4], PATH="/usr/bin:/bin"))
    assert out.returncode == 0, out.stderr
    for item in expected:
        assert f"export {item}\n" in out.stdout


def test_env_tf_config() -> None:
    out = cli("env", "--format", "tf", "--jobs", "ps=1,worker=5", env=dict(captured("srun_N3_n6")[0]))
    assert "export TF_CONFIG=" in out.stdout and '"ps": ["node1:8888"]' in out.stdout


def test_check_reports_a_malformed_variable() -> None:
    results = run_checks(dict(captured("srun_N3_n6")[0], SLURM_STEP_TASKS_PER_NODE="4,x"))
    failed = [r for r in results if not r[0]]
    assert failed and failed[0][1] == "resolution" and "SLURM_STEP_TASKS_PER_NODE" in failed[0][2]


def test_bootstrap_outside_a_launch_is_a_one_line_error() -> None:
    batch = {"SLURM_JOB_ID": "5", "SLURM_PROCID": "0", "SLURMD_NODENAME": "localhost", "PATH": "/usr/bin:/bin",
             "SLURM_JOB_NODELIST": "localhost", "SLURM_TASKS_PER_NODE": "2", "CUDA_VISIBLE_DEVICES": ""}
    out = cli("bootstrap", "--", "true", env=batch)
    assert out.returncode == 1 and out.stderr.count("\n") == 1 and "srun" in out.stderr


def test_show_bootstrapped_without_bootstrap() -> None:
    out = cli("show", "--bootstrapped", env={"PATH": "/usr/bin:/bin"})
    assert out.returncode == 1 and "slurm-resolver bootstrap -- COMMAND" in out.stderr


def test_wait_follows_states_and_returns_the_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    states = iter([[{"JobState": "PENDING", "RunTime": "0", "NodeList": "(null)"}],
                   [{"JobState": "RUNNING", "RunTime": "00:00:01", "NodeList": "node1"}],
                   [{"JobState": "FAILED", "RunTime": "00:00:02", "NodeList": "node1", "ExitCode": "2:0"}]])
    progress = io.StringIO()
    code = submission.wait("7", progress=progress, records=lambda _: next(states), poll=0)
    assert code == 2 and progress.getvalue().splitlines()[-1].startswith("job 7: FAILED")
    killed = [{"JobState": "CANCELLED", "ExitCode": "0:9"}]
    assert submission.wait("8", progress=io.StringIO(), records=lambda _: killed, poll=0) == 137


def test_wait_on_a_purged_job_is_an_error() -> None:
    with pytest.raises(submission.ResolutionError, match="no longer known"):
        submission.wait("9", progress=io.StringIO(), records=lambda _: [], poll=0)
