"""Launch detection: each launch mode is a small plugin, tried in a fixed, tested order.

MPI launchers come first (their rank wins over ``SLURM_PROCID``), then launchers below an srun
task (torchrun, DeepSpeed: their workers are the tasks; a worker spawned below a task without
telling enough is refused), then Slurm's own modes, then the single-process fallback.
[`register()`][slurm_resolver.launchers.register] adds a plugin. Code outside
this package decides on a [`Launch`][slurm_resolver.launchers.Launch]'s capabilities, never on a launcher's name.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import ConfigurationError
from .base import Launch, Launcher
from .below import DeepSpeed, SpawnedBelow, Torchrun
from .mpi import MpichHydra, OpenMPI, PMIx
from .single import SingleProcess
from .slurm import BatchStep, SallocShell, SrunStep

__all__ = ["Launch", "Launcher", "LAUNCHERS", "detect", "launch_of", "register", "by_name", "outside_of"]

LAUNCHERS: list[type[Launcher]] = [OpenMPI, MpichHydra, PMIx, Torchrun, DeepSpeed, SpawnedBelow, SrunStep, BatchStep,
                                   SallocShell, SingleProcess]
"""The plugins in the order they are tried: MPI launchers first, then launchers below srun, the single process
last."""


def register(launcher: type[Launcher], before: type[Launcher] = SingleProcess) -> None:
    """Add a launcher plugin, tried just before ``before`` (the fallback by default).

    A plugin whose name is already taken by another plugin is refused; registering the
    same class twice changes nothing.
    """
    if launcher in LAUNCHERS:
        return
    if any(known.name == launcher.name for known in LAUNCHERS):
        raise ConfigurationError(f"a launcher named {launcher.name!r} is already registered",
                                 "give the plugin a name of its own (see slurm-resolver launchers)")
    if before not in LAUNCHERS:
        raise ConfigurationError(f"cannot register {launcher.name!r} before {before.__name__}, which is not registered")
    LAUNCHERS.insert(LAUNCHERS.index(before), launcher)


def by_name(name: str) -> type[Launcher]:
    """The plugin called ``name``; an unknown name lists the known ones."""
    for launcher in LAUNCHERS:
        if launcher.name == name:
            return launcher
    raise ConfigurationError(
        f"unknown launcher {name!r}", f"choose one of {', '.join(known.name for known in LAUNCHERS)}")


def outside_of(name: str) -> str | None:
    """The `Launcher.outside` of the plugin called ``name`` (``'batch script'`` for ``batch``); None where
    it has none or no plugin is called so (a name another process wrote)."""
    return next((launcher.outside for launcher in LAUNCHERS if launcher.name == name), None)


def detect(env: Mapping[str, str]) -> type[Launcher]:
    """The first plugin whose variables are present in ``env``."""
    return next(launcher for launcher in LAUNCHERS if launcher.detect(env))


def launch_of(env: Mapping[str, str]) -> Launch:
    """The job as the detected launcher describes it."""
    return detect(env).resolve(env)
