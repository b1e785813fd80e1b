"""Processes started by an MPI launcher (mpirun, mpiexec, prterun), inside or outside Slurm.

Their rank wins over ``SLURM_PROCID``, which under ``mpirun`` belongs to the launcher's
own srun step (one per node). MPI launchers place ranks their own way, so placement
comes from an exchange between the ranks.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import EnvironmentVariableError, ResolutionError
from ..layout import Distribution, Spread, in_srun_step, job_layout, launch_key
from ..parsing import optional_int, read_int
from .base import Launch, Launcher

__all__ = ["OpenMPI", "MpichHydra", "PMIx"]


def _srun_gave_rank(env: Mapping[str, str], rank_var: str) -> bool:
    """True when srun itself is the PMI server (srun --mpi=...): then Slurm's rank is MPI's."""
    return in_srun_step(env) and env.get(rank_var) == env.get("SLURM_PROCID")


_BELOW = {"TORCHELASTIC_RUN_ID": "torchrun", "CROSS_RANK": "DeepSpeed's launcher"}
"""The marks of launchers that start workers of their own (launchers/below.py), and their names."""


def _refuse_workers_below(env: Mapping[str, str], name: str, rank_var: str) -> None:
    """Refuse a worker that a launcher started below an MPI rank (``mpirun torchrun``): its workers
    all inherit their agent's MPI rank, so taken as MPI ranks they would share it."""
    below = next((launcher for marker, launcher in _BELOW.items() if marker in env), None)
    if below is not None:
        raise ResolutionError(
            f"{below} started this worker below the {name} rank {rank_var}={env[rank_var]}, which the other workers "
            f"{below} started there share: the MPI ranks are {below}'s agents, not its workers",
            f"start {below} once per node with srun instead of mpirun: srun -N<nodes> --ntasks-per-node=1 "
            f"{'torchrun --nnodes=<nodes> ...' if below == 'torchrun' else 'python -m deepspeed.launcher.launch ...'}"
            " (its workers are then each a task); or let mpirun start every worker itself")


def _mpi_launch(env: Mapping[str, str], name: str, rank_var: str, size_var: str | None,
                local_var: str | None) -> Launch:
    _refuse_workers_below(env, name, rank_var)
    rank = read_int(env, rank_var)
    size = read_int(env, size_var, minimum=1) if size_var and size_var in env else None
    if size is not None and rank >= size:
        raise EnvironmentVariableError(rank_var, env[rank_var], f"a rank below {size_var}={size}")
    nodes: tuple[str, ...] = ()
    if "SLURM_JOB_ID" in env and ("SLURM_JOB_NODELIST" in env or "SLURM_NODELIST" in env) \
            and "SLURM_TASKS_PER_NODE" in env:
        nodes = job_layout(env)[0][0]
    return Launch(
        launcher=name, world_size=size, rank=rank, nodes=nodes, counts=(0,) * len(nodes),
        node=env.get("SLURMD_NODENAME"),
        local_rank=optional_int(env, local_var) if local_var else None, distribution=Distribution(Spread.UNKNOWN),
        job_id=env.get("SLURM_JOB_ID"), key=launch_key(env), is_task=True, mpi_launched=True, mpi_capable=True,
    )


class OpenMPI(Launcher):
    """Open MPI's mpirun/mpiexec (``OMPI_COMM_WORLD_*``)."""

    name = "openmpi"
    description = "Open MPI mpirun (OMPI_COMM_WORLD_RANK)"

    @classmethod
    def detect(cls, env: Mapping[str, str]) -> bool:
        return "OMPI_COMM_WORLD_RANK" in env

    @classmethod
    def resolve(cls, env: Mapping[str, str]) -> Launch:
        return _mpi_launch(env, cls.name, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                           "OMPI_COMM_WORLD_LOCAL_RANK")


class MpichHydra(Launcher):
    """MPICH's or Intel MPI's Hydra mpiexec (``PMI_RANK``, ``PMI_SIZE``)."""

    name = "mpich"
    description = "MPICH/Hydra mpiexec (PMI_RANK, PMI_SIZE)"

    @classmethod
    def detect(cls, env: Mapping[str, str]) -> bool:
        return "PMI_RANK" in env and not _srun_gave_rank(env, "PMI_RANK")

    @classmethod
    def resolve(cls, env: Mapping[str, str]) -> Launch:
        return _mpi_launch(env, cls.name, "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID")


class PMIx(Launcher):
    """A PMIx launcher such as prterun (``PMIX_RANK``); the world size comes from MPI."""

    name = "pmix"
    description = "a PMIx launcher (PMIX_RANK)"

    @classmethod
    def detect(cls, env: Mapping[str, str]) -> bool:
        return "PMIX_RANK" in env and not _srun_gave_rank(env, "PMIX_RANK")

    @classmethod
    def resolve(cls, env: Mapping[str, str]) -> Launch:
        return _mpi_launch(env, cls.name, "PMIX_RANK", None, None)
