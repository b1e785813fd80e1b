"""The fallback: one process, no launcher; a cluster of one worker on this host.

A process whose environment holds part of a launch (``SLURM_PROCID`` without the step's layout,
a step's layout without ``SLURM_PROCID``) is refused, naming the missing variable: it is a task of
something, and answering "one process" would be a silently wrong cluster.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import EnvironmentVariableError
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


class SingleProcess(Launcher):
    """A process started by hand: rank 0 of 1."""

    name = "single"
    description = "no launcher variables: one process on this host"

    @classmethod
    def detect(cls, env: Mapping[str, str]) -> bool:
        return True

    @classmethod
    def resolve(cls, env: Mapping[str, str]) -> Launch:
        partial = _partial_launch(env)
        if partial is not None:
            raise partial
        return Launch(launcher=cls.name, world_size=1, rank=0, nodes=("localhost",), counts=(1,), node="localhost",
                      local_rank=0, standalone=True)
