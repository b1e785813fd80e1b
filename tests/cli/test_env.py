"""``slurm-resolver env``: a framework's variables as export lines, from the planned cluster."""

from __future__ import annotations

from typing import Any

import pytest

from ..conftest import captured


@pytest.mark.parametrize(("fmt", "expected"), [
    ("torch", ["MASTER_ADDR=node1", "MASTER_PORT=8888", "RANK=4", "WORLD_SIZE=6", "LOCAL_RANK=0",
               "LOCAL_WORLD_SIZE=1", "SLURM_RESOLVER_DEVICES=''"]),
    ("jax", ["JAX_COORDINATOR_ADDRESS=node1:8888"]),
    ("shell", ["SLURM_RESOLVER_RANK=4", "SLURM_RESOLVER_ADDRESS=node2:8888"]),
])
def test_env_formats(cli: Any, fmt: str, expected: list[str]) -> None:
    out = cli("env", "--format", fmt, env=dict(captured("srun_N3_n6")[4], PATH="/usr/bin:/bin"))
    assert out.returncode == 0, out.stderr
    for item in expected:
        assert f"export {item}\n" in out.stdout
    assert "JAX_NUM_PROCESSES" not in out.stdout and "JAX_PROCESS_ID" not in out.stdout  # JAX reads neither


@pytest.mark.parametrize(("case", "rank", "taken"), [
    ("sbatch_batch_step", 0, "no process count from no cluster in JAX's detection"),
    ("srun_N1_torchrun_standalone3", 0, "1 processes and process id 0 from JAX's slurm detection"),
])
def test_env_format_jax_refuses_where_a_bare_initialize_would_be_wrong(cli: Any, case: str, rank: int,
                                                                       taken: str) -> None:
    env = dict(captured(case)[rank], PATH="/usr/bin:/bin")
    out = cli("env", "--format", "jax", env=env)
    assert out.returncode == 1 and f"would take {taken}" in out.stderr, out.stderr
    assert "jax_arguments(slurm_resolver.bootstrap())" in out.stderr and not out.stdout
    if len(captured(case)) > 1:  # said once for the job: the other tasks exit 1 without a word
        other = cli("env", "--format", "jax", env=dict(captured(case)[1], PATH="/usr/bin:/bin"))
        assert other.returncode == 1 and not other.stderr and not other.stdout


def test_env_tf_config(cli: Any) -> None:
    out = cli("env", "--format", "tf", "--jobs", "ps=1,worker=5", env=dict(captured("srun_N3_n6")[0]))
    assert "export TF_CONFIG=" in out.stdout and '"ps": ["node1:8888"]' in out.stdout


@pytest.mark.parametrize(("fmt", "said"), [("tf", True), ("jax", True), ("torch", False)])
def test_env_turns_grpcs_proxy_off_for_tensorflow_and_jax(cli: Any, fmt: str, said: bool) -> None:
    env = dict(captured("srun_N3_n6")[0], https_proxy="http://proxy.example:3128")
    out = cli("env", "--format", fmt, env=env)
    assert out.returncode == 0, out.stderr
    assert ("export grpc_proxy=''\n" in out.stdout) is said


def test_in_a_task_what_env_wrote_in_the_batch_step_is_not_mistaken_for_a_launcher_below(cli: Any) -> None:
    """``eval "$(slurm-resolver env --format torch)"`` in the batch script, then ``srun``: the batch step's
    ``RANK=0`` reaches every task, and is neither this task's rank nor the sign of a launcher below srun."""
    batch = cli("env", "--format", "torch", env=dict(captured("sbatch_batch_step")[0], PATH="/usr/bin:/bin"))
    written = dict(line.removeprefix("export ").split("=", 1) for line in batch.stdout.splitlines())
    task = dict(captured("srun_N3_n6")[4], PATH="/usr/bin:/bin",
                **{k: v.strip("'") for k, v in written.items() if k != "SLURM_RESOLVER_TASK"},
                SLURM_RESOLVER_TASK=written["SLURM_RESOLVER_TASK"].strip("'"))
    assert task["RANK"] == "0"
    out = cli("env", "--format", "torch", env=task)
    assert out.returncode == 0 and "export RANK=4\n" in out.stdout, out.stderr
    show = cli("show", "--all-ranks", env=task)
    assert show.returncode == 0 and "rank 4 of 6" in show.stdout, show.stderr
    below = cli("show", env=dict(captured("srun_N3_n6")[4], PATH="/usr/bin:/bin", RANK="0"))
    assert below.returncode == 1 and "a launcher below the Slurm task" in below.stderr  # no env in the batch step
