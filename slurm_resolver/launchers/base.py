"""What a launcher tells about the job, and the contract of a launcher plugin."""

from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

__all__ = ["Launch", "Launcher"]


@dataclass(frozen=True)
class Launch:
    """The job as one launcher sees it, before placement and packing.

    Attributes:
        launcher: name of the plugin that resolved it.
        world_size: number of tasks; None when only an MPI exchange can tell (PMIx).
        rank: rank of the calling process; None when it is not a task (salloc shell).
        nodes: the nodes in Slurm's order; empty when unknown.
        counts: tasks on each of ``nodes`` (0 where only an exchange can tell).
        node: the calling task's node name; None to ask the operating system.
        local_rank: rank among the tasks on the same node, when the launcher gives it.
        distribution: Slurm's distribution (``block``, ``cyclic``, ``plane=2``,
            ``arbitrary``) or ``unknown`` (MPI launchers place ranks their own way).
        components: tasks of each heterogeneous-job component, in rank order; () if none.
        job_id: the Slurm job id, when there is one.
        mpi: an MPI runtime connects the ranks, so they can exchange what they know.
    """

    launcher: str
    world_size: int | None
    rank: int | None
    nodes: tuple[str, ...] = ()
    counts: tuple[int, ...] = ()
    node: str | None = None
    local_rank: int | None = None
    distribution: str = "block"
    components: tuple[int, ...] = ()
    job_id: str | None = None
    mpi: bool = False

    @property
    def layout(self) -> tuple[tuple[str, int], ...]:
        """``(node, tasks)`` pairs in Slurm's order."""
        return tuple(zip(self.nodes, self.counts))


class Launcher(abc.ABC):
    """A launch mode: a cheap test for its variables, and a reader of them.

    ``detect`` must have no side effects and cost next to nothing; ``resolve`` reads
    only the given mapping and raises the package's errors on malformed values.
    """

    name: ClassVar[str]
    description: ClassVar[str]

    @classmethod
    @abc.abstractmethod
    def detect(cls, env: Mapping[str, str]) -> bool:
        """Whether this launcher started the process described by ``env``."""

    @classmethod
    @abc.abstractmethod
    def resolve(cls, env: Mapping[str, str]) -> Launch:
        """The job as this launcher describes it."""
