"""The fallback: one process, no launcher; a cluster of one worker on this host.

"No launch at all" is decided once, from the variable table: a process holding none of the variables
that tell a place in a launch (`slurm_resolver.variables.Variable.launched_with`: Slurm's rank, node
and job variables, MPI's, torchrun's and DeepSpeed's markers) is one process alone. A process that
holds any of them, and that no launcher plugin recognised, holds part of a launch (``SLURM_PROCID``
without the step's layout, ``SLURM_LOCALID`` alone, ``SLURM_NODELIST`` without ``SLURM_JOB_ID``): it is
refused, naming the first partner that is missing, since answering "one process" would be a silently wrong
cluster. So is a process whose ``RANK``/``LOCAL_RANK`` or
``WORLD_SIZE``/``LOCAL_WORLD_SIZE`` say it is one of several workers, started by a launcher none of the
plugins knows (``torch.multiprocessing``, Lightning spawning its devices on a workstation, the legacy
``torch.distributed.launch``); with the values of a process alone (``RANK=0``...) they are PyTorch's
convention, not a launch.

srun's input variables (``SLURM_NTASKS``, ``SLURM_NPROCS``, ``SLURM_NNODES``, ``SLURM_NTASKS_PER_NODE``:
srun(1) reads them as ``-n``, ``-N`` and ``--ntasks-per-node``) tell no place in a launch: a user may export
them in a shell before ``srun``, and a process started by hand in that shell is one process alone.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import EnvironmentVariableError, ResolutionError
from .base import Launch, Launcher

__all__ = ["SingleProcess"]

_FIX = ("run the task under its launcher (srun sets every Slurm variable of a task), or unset the variables left "
        "from another launch (env -u ...) to run a single process")

_WHAT = {"SLURM_PROCID": "the task's rank", "SLURM_STEP_NODELIST": "the step's nodes", "SLURM_JOB_ID": "the job's id",
         "SLURM_JOB_NODELIST": "the job's nodes"}
"""How the refusal names a missing partner (any other by its name alone)."""


def _short(value: str) -> str:
    """``value`` as a message shows it: at most 40 characters (a node list can be long).

    >>> _short("node[1-4]"), _short("x" * 50)[-20:]
    ('node[1-4]', 'x... (50 characters)')
    """
    return value if len(value) <= 40 else f"{value[:37]}... ({len(value)} characters)"


def _partial_launch(env: Mapping[str, str]) -> EnvironmentVariableError | None:
    """The error naming what a partial launch lacks; None where there is no launch at all."""
    from ..variables import launch_variables  # here: the table loads where no other launcher took the process

    present = launch_variables(env)
    if not present:
        return None
    name, row = next(((n, v) for n, v in present if v.launched_with not in env), present[0])
    missing = row.launched_with
    return EnvironmentVariableError(
        missing, None, f"{_WHAT.get(missing, missing)}, since {name}={_short(env[name])} is set ({row.source}): this "
        "process is part of a launch whose other variables are missing", _FIX)


_ONE_OF_ONE = (("RANK", "0"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1"), ("LOCAL_WORLD_SIZE", "1"))
"""The worker variables of PyTorch's convention, and their value in a process that is alone."""


def _worker_of_several(env: Mapping[str, str]) -> ResolutionError | None:
    """The error for a process that a launcher's variables make one of several workers; None where
    they are absent or say it is alone."""
    told = [(name, env[name]) for name, alone in _ONE_OF_ONE if name in env and env[name].strip() != alone]
    if not told:
        return None
    shown = ", ".join(f"{name}={value}" for name, value in told)
    return ResolutionError(
        f"{shown}: a launcher started this process as one of several workers, outside Slurm and without "
        "the variables of a launcher slurm_resolver knows, so its other workers are unknown",
        "start the workers with torchrun (torchrun --standalone --nproc-per-node=<workers> on one host), or let "
        "srun start every worker (srun --ntasks-per-node=<workers>); or unset RANK, LOCAL_RANK, WORLD_SIZE and "
        "LOCAL_WORLD_SIZE to run a single process")


class SingleProcess(Launcher):
    """A process started by hand: rank 0 of 1."""

    name = "single"
    description = "no launcher variables: one process on this host"

    @classmethod
    def detect(cls, env: Mapping[str, str]) -> bool:
        return True

    @classmethod
    def resolve(cls, env: Mapping[str, str]) -> Launch:
        refusal = _partial_launch(env) or _worker_of_several(env)
        if refusal is not None:
            raise refusal
        return Launch(launcher=cls.name, world_size=1, rank=0, nodes=("localhost",), counts=(1,), node="localhost",
                      local_rank=0, standalone=True)
