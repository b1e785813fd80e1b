"""``slurm-resolver show``: the calling task and the whole cluster, once for the job (rank 0)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from slurm_resolver.cli import main

from ..conftest import captured


def test_show_json_fields(cli: Any) -> None:
    env = captured("srun_N3_n6")[4]
    out = cli("show", "--json", "--all-ranks", "--jobs", "ps=1,worker=5", "--port-base", "9000", env=env)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data == {"task_type": "worker", "task_id": 3, "rank": 4, "world_size": 6, "node": "node2",
                    "address": "node2:9000", "gpus": [], "launcher": "srun",
                    "cluster": {"ps": ["node1:9000"], "worker": ["node1:9001", "node1:9002", "node1:9003",
                                                                 "node2:9000", "node3:9000"]}}


def test_show_table(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in captured("srun_N2_n4_cyclic")[1].items():
        monkeypatch.setenv(key, value)
    assert main(["show", "--all-ranks"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("launcher srun: rank 1 of 4, worker:1 on node2 at node2:8888\n") and "1*" in out


@pytest.mark.parametrize("rank", range(6))
def test_one_answer_per_job_rank_0_prints_the_table_the_others_nothing(cli: Any, rank: int) -> None:
    out = cli("show", env=captured("srun_N3_n6")[rank])
    assert out.returncode == 0 and out.stderr == ""
    if rank:
        assert out.stdout == ""
        return
    lines = out.stdout.splitlines()
    assert "the other 5 tasks print only their own problems (--all-ranks" in lines[0]
    assert len(lines) == 1 + 1 + 6 and lines[1].split() == ["rank", "job", "index", "node", "address", "gpus"]


def test_every_task_prints_its_table_with_all_ranks(cli: Any) -> None:
    tables = [cli("show", "--all-ranks", env=env).stdout for env in captured("srun_N3_n6")]
    assert all(len(t.splitlines()) == 8 and "print only their own" not in t for t in tables)
    assert len({t.split("\n", 1)[1].replace("*", " ") for t in tables}) == 1  # the same table, each its own star


@pytest.mark.parametrize("variable, value, said", [
    ("SLURM_LOCALID", "2", "rank 4 is local rank 0 in the table, but 2 for its launcher (SLURM_LOCALID)"),
    ("SLURM_GTIDS", "4,5", "the table puts ranks 4 on node2, but Slurm started 4,5 there (SLURM_GTIDS)"),
    ("SLURM_NODEID", "2", "rank 4 runs on node2 in the table, but its launcher puts it on node3 (SLURM_NODEID=2)"),
])
def test_a_task_whose_own_row_disagrees_says_so_with_its_rank(cli: Any, variable: str, value: str, said: str) -> None:
    out = cli("show", env=dict(captured("srun_N3_n6")[4], **{variable: value}))
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr == f"slurm-resolver: rank 4: disagrees: {said}\n"


def test_a_task_that_fails_says_so_with_its_rank(cli: Any) -> None:
    out = cli("show", env=dict(captured("srun_N3_n6")[3], SLURM_STEP_TASKS_PER_NODE="4,x"))
    assert out.returncode == 1 and out.stderr.startswith("slurm-resolver: error: rank 3: SLURM_STEP_TASKS_PER_NODE=")


def test_outside_any_job_show_says_it_describes_one_local_process(cli: Any) -> None:
    out = cli("show", env={"PATH": "/usr/bin:/bin"})
    assert out.returncode == 0
    assert out.stdout.startswith("no Slurm job or MPI launch found: this is one local process alone, rank 0 of 1")
    assert out.stdout.splitlines()[2].startswith("0*")


def test_show_bootstrapped_without_bootstrap(cli: Any) -> None:
    out = cli("show", "--bootstrapped", env={"PATH": "/usr/bin:/bin"})
    assert out.returncode == 1 and "slurm-resolver bootstrap -- COMMAND" in out.stderr


def test_show_bootstrapped_is_printed_by_rank_0_alone(cli: Any) -> None:
    def task(rank: int) -> dict[str, str]:
        return {"PATH": "/usr/bin:/bin", "SLURM_RESOLVER_TASK": json.dumps({"rank": rank, "cluster": {}})}

    assert json.loads(cli("show", "--bootstrapped", env=task(0)).stdout)["rank"] == 0
    assert cli("show", "--bootstrapped", env=task(1)).stdout == ""
    assert json.loads(cli("show", "--bootstrapped", "--all-ranks", env=task(1)).stdout)["rank"] == 1


def test_in_a_batch_script_show_says_no_task_runs_there(cli: Any) -> None:
    out = cli("show", env=captured("sbatch_batch_step")[0])
    lines = out.stdout.splitlines()
    assert out.returncode == 0 and lines[0].startswith("launcher batch: the job's ") and "none of them" in lines[0]
    assert "print only their own problems" not in out.stdout and "*" not in out.stdout


def test_env_in_a_batch_script_warns_that_it_describes_the_batch_step(cli: Any) -> None:
    out = cli("env", "--format", "torch", env=captured("sbatch_batch_step")[0])
    assert out.returncode == 0 and "export RANK=" in out.stdout
    assert out.stderr.startswith("slurm-resolver: warning: env describes the batch step") and \
        out.stderr.count("\n") == 1
    assert cli("env", env=captured("srun_N3_n6")[2]).stderr == ""


def test_gpus_are_counted_and_their_ids_shown_beside(cli: Any) -> None:
    out = cli("show", env={"PATH": "/usr/bin:/bin", "CUDA_VISIBLE_DEVICES": "0,1"})
    assert out.stdout.splitlines()[1:] == ["rank  job     index  node       address         gpus  gpu_ids",
                                           "0*    worker  0      localhost  localhost:8888  2     0,1"]
