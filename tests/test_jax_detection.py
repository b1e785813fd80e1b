"""What a bare ``jax.distributed.initialize()`` takes from a task's environment, mirrored in
``slurm_resolver.jax_detection``: checked against JAX's own detection code over every captured launch."""

from __future__ import annotations

import glob
import os
from pathlib import Path

import pytest

from slurm_resolver.jax_detection import jax_sees, refusal
from slurm_resolver.resolution import resolve

from .conftest import DATA, captured, require

ORTE = {"OMPI_MCA_orte_hnp_uri": "2077294592.0;tcp://192.0.2.2:33187;tcp6://[fd00::2]:56493"}
"""What Open MPI 4's mpirun adds (not captured: the capture keeps slurm_resolver's own variables)."""

MPICH_IN_SLURM = {  # mpiexec.hydra inside an allocation: srun started one proxy a node
    "PMI_RANK": "3", "PMI_SIZE": "4", "MPI_LOCALRANKID": "1", "SLURM_JOB_ID": "9", "SLURM_STEP_ID": "0",
    "SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_LOCALID": "0", "SLURM_STEP_NODELIST": "node[1-2]",
}

SYNTHETIC = [  # (what, environment, rank, world size, agrees)
    ("Open MPI 4 mpirun", {**captured("salloc_mpirun")[3], **ORTE}, 3, 4, True),
    ("Open MPI 5 mpirun in an allocation", captured("salloc_mpirun")[3], 3, 4, False),  # JAX: its prted step's
    ("MPICH/Hydra in an allocation", MPICH_IN_SLURM, 3, 4, False),
    ("MPICH/Hydra outside Slurm", {"PMI_RANK": "1", "PMI_SIZE": "2"}, 1, 2, False),
]

CASES = sorted(Path(p).stem for p in glob.glob(str(DATA / "env" / "*.jsonl")))


def _tasks(case: str) -> list[tuple[dict[str, str], int, int, str]]:
    """Each task of a captured launch with its rank, world size and launcher, as slurm_resolver resolves it
    (where a unit test can: an MPI launch needs its exchange, a shell is no task)."""
    if case in ("salloc_mpirun", "salloc_shell", "srun_gres2_n4"):  # an exchange; no task; too few GPUs to split
        return []
    found = []
    for env in captured(case):
        cluster = resolve(env, resolves=lambda n: True, gpus_per_task=0)
        found.append((env, cluster.rank or 0, cluster.world_size, cluster.launcher))
    return found


@pytest.mark.parametrize("case", CASES)
def test_jax_sees_the_task_in_every_srun_step_and_nowhere_else(case: str) -> None:
    for env, rank, world, launcher in _tasks(case):
        sees = jax_sees(env)
        agrees = (sees.num_processes, sees.process_id) == (world, rank)
        assert agrees is (launcher == "srun"), (case, rank, sees)
        assert (refusal(env, rank, world, launcher) is None) is agrees


@pytest.mark.parametrize(("env", "rank", "world", "agrees"), [c[1:] for c in SYNTHETIC], ids=[c[0] for c in SYNTHETIC])
def test_jax_sees_mpi_launchers_as_its_detection_reads_them(env: dict[str, str], rank: int, world: int,
                                                            agrees: bool) -> None:
    assert (refusal(env, rank, world, "mpi") is None) is agrees


def test_the_refusal_says_what_jax_would_take_and_the_call_that_is_right() -> None:
    error = refusal(MPICH_IN_SLURM, 3, 4, "mpich")
    assert error is not None and "would take 2 processes and process id 1 from JAX's slurm detection" in str(error)
    assert "SLURM_NTASKS=2" in str(error) and "jax_arguments(slurm_resolver.bootstrap())" in str(error)
    assert "no process count from no cluster" in str(refusal({"PMI_RANK": "1", "PMI_SIZE": "2"}, 1, 2, "mpich"))


def test_the_mirror_is_jaxs_own_detection(monkeypatch: pytest.MonkeyPatch) -> None:
    """JAX's ``ClusterEnv.auto_detect_unset_distributed_params`` over every environment above takes the count
    and id that `jax_sees()` says it takes (the installed JAX's code, not our reading of it)."""
    require("jax")
    from jax._src import clusters

    environments = [env for case in CASES for env in captured(case)] + [c[1] for c in SYNTHETIC]
    for env in environments:
        monkeypatch.setattr(os, "environ", dict(env))
        _, count, process, _ = clusters.ClusterEnv.auto_detect_unset_distributed_params(None, None, None, None,
                                                                                        None, None)
        sees = jax_sees(env)
        assert (count, process) == (sees.num_processes, sees.process_id), env
