"""The fallback: one process, no launcher; a cluster of one worker on this host.

A process whose environment holds part of a launch (``SLURM_PROCID`` without the step's layout,
a step's layout without ``SLURM_PROCID``) is refused, naming the missing variable: it is a task of
something, and answering "one process" would be a silently wrong cluster. So is a process whose
``RANK``/``LOCAL_RANK`` or ``WORLD_SIZE``/``LOCAL_WORLD_SIZE`` say it is one of several workers,
started by a launcher none of the plugins knows (``torch.multiprocessing``, Lightning spawning its
devices on a workstation, the legacy ``torch.distributed.launch``).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import EnvironmentVariableError, ResolutionError
from ..layout import STEP_VARIABLES
from .base import Launch, Launcher

__all__ = ["SingleProcess"]

_FIX = ("run the task under srun, which sets every one of them, or unset the Slurm variables left from "
        "another launch (env -u ...) to run a single process")


def _partial_launch(env: Mapping[str, str]) -> EnvironmentVariableError | None:
    """The error naming what a partial Slurm launch lacks; None where there is no launch at all."""
    present = [name for name in ("SLURM_PROCID", *STEP_VARIABLES) if name in env]
    if not present:
        return None
    if "SLURM_PROCID" not in env:
        return EnvironmentVariableError("SLURM_PROCID", None, f"the task's rank, since {present[0]} is set: this "
                                        "process belongs to an srun step", _FIX)
    return EnvironmentVariableError(
        "SLURM_STEP_NODELIST", None, f"the step's nodes, since SLURM_PROCID={env['SLURM_PROCID']} is set: this "
        "process is a task of a launch whose other tasks are unknown", _FIX)


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
