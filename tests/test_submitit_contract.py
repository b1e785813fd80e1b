"""submitit's answers beside ours, over every captured srun step: its job environment agrees everywhere;
its PyTorch helper (``submitit.helpers.TorchDistributedEnvironment``) does not, where docs/submitit.md says."""

from __future__ import annotations

import os

import pytest

from slurm_resolver import adapters
from slurm_resolver.lightning import LightningAnswers
from slurm_resolver.resolution import resolve
from slurm_resolver.rpc.bootstrapped import Bootstrapped

from .conftest import captured, require
from .test_lightning import CASES, NO_TASK, clusters_of

SRUN_STEPS = [c for c in CASES if c not in NO_TASK and "torchrun" not in c and "mpirun" not in c]
"""The launches submitit runs its tasks in: srun steps (its own batch script starts one)."""


def _theirs(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> tuple[tuple[int, ...], str, int]:
    """submitit's job environment (rank, local rank, tasks, node), and its helper's MASTER_ADDR and
    LOCAL_WORLD_SIZE, read from ``env`` by submitit's own code."""
    import submitit
    from submitit.helpers import TorchDistributedEnvironment

    monkeypatch.setattr(os, "environ", {**env, "SUBMITIT_EXECUTOR": "slurm"})
    job = submitit.JobEnvironment()
    helper = TorchDistributedEnvironment()
    return (job.global_rank, job.local_rank, job.num_tasks, job.node), helper.master_addr, helper.local_world_size


@pytest.mark.parametrize("case", SRUN_STEPS)
def test_submitits_job_environment_agrees_and_its_torch_helper_where_the_page_says(
        case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    require("submitit")
    for env, cluster in zip(captured(case), clusters_of(case)):
        ours = LightningAnswers(cluster, main_port=1)
        torch = adapters.torch_env(Bootstrapped.from_cluster(cluster))
        job, master, local_world = _theirs(env, monkeypatch)
        assert job == (ours.global_rank(), ours.local_rank(), ours.world_size(), ours.node_rank())
        # MASTER_ADDR: the job's first node, not rank 0's where a layout puts rank 0 elsewhere
        assert (master == torch["MASTER_ADDR"]) is (case not in ("srun_arbitrary_hostfile", "srun_arbitrary_nodelist",
                                                                 "srun_het_N1n2_N1n1"))
        # LOCAL_WORLD_SIZE: tasks / the job's nodes; ours: the tasks on this node (what the capture shows)
        here = sum(other["SLURMD_NODENAME"] == env["SLURMD_NODENAME"] for other in captured(case))
        assert int(torch["LOCAL_WORLD_SIZE"]) == here
        assert local_world == int(env["SLURM_NTASKS"]) // int(env["SLURM_JOB_NUM_NODES"])
        if case in ("srun_N3_n6", "srun_gpus_per_task1", "srun_plane2"):  # 4,1,1; 3,1; 4,2
            assert local_world != here


def test_submitits_master_port_is_the_same_for_every_step_of_a_job(monkeypatch: pytest.MonkeyPatch) -> None:
    """Drawn from the job id: two steps of one job at once (two trainings in one allocation) meet on one port."""
    require("submitit")
    from submitit.helpers import TorchDistributedEnvironment

    ports = set()
    for step in ("0", "1"):
        monkeypatch.setattr(os, "environ", {**captured("sbatch_srun")[0], "SLURM_STEP_ID": step,
                                            "SUBMITIT_EXECUTOR": "slurm"})
        ports.add(TorchDistributedEnvironment().master_port)
    assert len(ports) == 1


def test_submitits_export_points_cuda_visible_devices_at_the_local_rank(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both tasks of ``--gres=gpu:2`` see GPUs 2 and 3 while another job holds 0 and 1: its export sets
    CUDA_VISIBLE_DEVICES=0 for local rank 0, a GPU of the other job; ours leave it and name ordinal 0 (GPU 2)."""
    require("submitit")
    from submitit.helpers import TorchDistributedEnvironment

    env = {**captured("srun_gres3_n2")[0], "CUDA_VISIBLE_DEVICES": "2,3", "SLURM_STEP_GPUS": "2,3",
           "GPU_DEVICE_ORDINAL": "2,3", "SUBMITIT_EXECUTOR": "slurm"}
    monkeypatch.setattr(os, "environ", dict(env))
    TorchDistributedEnvironment().export()
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0"
    b = Bootstrapped.from_cluster(resolve(env, resolves=lambda n: True))
    assert b.me.gpus == ("2",) and adapters.device_ordinals(b, env) == (0,)
