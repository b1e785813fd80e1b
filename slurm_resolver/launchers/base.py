"""What a launcher tells about the job, what the launch can do, and the contract of a plugin."""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import ClassVar

from ..layout import BLOCK, Distribution, Spread, total_tasks
from ..values import PublicValue, fill

__all__ = ["Launch", "Launcher"]


class Launch(PublicValue):
    """The job as one launcher sees it, before placement and packing, with its capabilities.

    Attributes:
        launcher: name of the plugin that resolved it (for messages and ``describe``;
            code decides on the capabilities below, never on this name).
        world_size: number of tasks; None when only an MPI exchange can tell (PMIx).
        rank: rank of the calling process; None when it is not a task (salloc shell).
        nodes: the nodes in Slurm's order; empty when unknown.
        counts: tasks on each of ``nodes`` (0 where only an exchange can tell).
        node: the calling task's node name; None to ask the operating system.
        local_rank: rank among the tasks on the same node, when the launcher gives it.
        distribution: Slurm's distribution (``block``, ``cyclic``, ``plane=2``,
            ``arbitrary``) or ``unknown`` (MPI launchers place ranks their own way), read from its
            word by `Distribution.parse` (``layout.distribution()`` reads ``SLURM_DISTRIBUTION``).
        components: tasks of each heterogeneous-job component, in rank order; () if none.
        groups: the positions in ``nodes`` of each het component's nodes; () if none.
        node_index: the position of the caller's node in ``nodes`` (``SLURM_NODEID``).
        gtids: the ranks on the caller's node (``SLURM_GTIDS``), where Slurm says.
        hosts: the node of every rank where the launcher lists them (``srun -m arbitrary``'s
            host file, ``SLURM_HOSTFILE``, where the task can read it); () otherwise.
        job_id: the Slurm job id, when there is one.
        array: ``<array job id>_<task id>`` for an element of a job array (each element is a
            job of its own, with its own job id: two elements never share a launch key).
        key: what names this launch in all its tasks (``<job id>.<step id>``...).
        is_task: the caller is one of the launch's parallel tasks, each running this
            code (an srun task, an MPI rank): it can bootstrap, and its port is its own.
        standalone: no launcher at all: one process on this host.
        mpi_launched: an MPI launcher started the ranks: their placement and the
            bootstrap's exchange go through MPI.
        mpi_capable: MPI can initialise in this launch (an MPI launcher, or srun with
            PMIx), so the ranks may exchange through it.
        missing: launcher variables this launch lacks and that only an explicit argument can
            stand in for (``tasks_per_node=`` for ``SLURM_STEP_TASKS_PER_NODE``); resolution
            refuses, naming the first, where no argument does.
        below: the launcher that started this process below its Slurm task (``torchrun``...),
            whose workers are the launch's tasks; None where the Slurm task is the process.
    """

    launcher: str
    world_size: int | None
    rank: int | None
    nodes: tuple[str, ...] = ()
    counts: tuple[int, ...] = ()
    node: str | None = None
    local_rank: int | None = None
    distribution: Distribution = BLOCK
    components: tuple[int, ...] = ()
    groups: tuple[tuple[int, ...], ...] = ()
    node_index: int | None = None
    gtids: tuple[int, ...] = ()
    hosts: tuple[str, ...] = ()
    job_id: str | None = None
    array: str | None = None
    key: str = "local"
    is_task: bool = False
    standalone: bool = False
    mpi_launched: bool = False
    mpi_capable: bool = False
    missing: tuple[str, ...] = ()
    below: str | None = None

    def __init__(self, launcher: str, world_size: int | None, rank: int | None, nodes: tuple[str, ...] = (),
                 counts: tuple[int, ...] = (), node: str | None = None, local_rank: int | None = None,
                 distribution: Distribution = BLOCK, components: tuple[int, ...] = (),
                 groups: tuple[tuple[int, ...], ...] = (), node_index: int | None = None, gtids: tuple[int, ...] = (),
                 hosts: tuple[str, ...] = (), job_id: str | None = None, array: str | None = None, key: str = "local",
                 is_task: bool = False, standalone: bool = False, mpi_launched: bool = False,
                 mpi_capable: bool = False, missing: tuple[str, ...] = (), below: str | None = None) -> None:
        fill(self, launcher, world_size, rank, nodes, counts, node, local_rank, distribution, components, groups,
             node_index, gtids, hosts, job_id, array, key, is_task, standalone, mpi_launched, mpi_capable, missing,
             below)

    @property
    def arbitrary(self) -> bool:
        """Whether the tasks run in the order of a host file (``srun -m arbitrary``): only that list tells."""
        return self.distribution.spread is Spread.ARBITRARY

    @property
    def layout(self) -> tuple[tuple[str, int], ...]:
        """``(node, tasks)`` pairs in Slurm's order."""
        return tuple(zip(self.nodes, self.counts))

    @property
    def can_bootstrap(self) -> bool:
        """Whether this process may call ``bootstrap()``: it is a task, or the only process."""
        return self.is_task or self.standalone

    @property
    def learnable(self) -> bool:
        """Whether the caller's node and its ranks are known (``node_index``, ``gtids``) and every other
        rank's node can be learned from the tasks themselves (a het step, ``-m arbitrary`` without its
        host file, workers of a launcher below srun)."""
        spread = self.distribution.spread
        return bool(self.groups or spread in (Spread.ARBITRARY, Spread.UNKNOWN)) and self.node_index is not None \
            and bool(self.gtids)

    @property
    def needs_exchange(self) -> bool:
        """Whether the node of every rank is unknown without an exchange between the ranks."""
        if not self.nodes or self.world_size is None or self.world_size != total_tasks(self.counts):
            return True
        if self.groups:  # each het component is laid out on its own, with a distribution nobody is told
            return not all(len(g) == 1 or max(self.counts[p] for p in g) == 1 for g in self.groups)
        if self.arbitrary:  # any order, even with one task per node: only a list tells
            return not self.hosts
        if self.distribution.spread is Spread.UNKNOWN:  # the launcher's own order (below srun, MPI)
            return len(self.nodes) != 1
        return not (self.distribution.computed or max(self.counts) == 1)


class Launcher(abc.ABC):
    """A launch mode: a cheap test for its variables, and a reader of them.

    ``detect`` must have no side effects and cost next to nothing; ``resolve`` reads
    only the given mapping (and a file it names, such as ``SLURM_HOSTFILE``) and raises the
    package's errors on malformed values.
    """

    name: ClassVar[str]
    description: ClassVar[str]
    outside: ClassVar[str | None] = None
    """What the process this launcher describes is called where it sees the whole job but is none of its
    tasks (``'batch script'``, ``'salloc shell'``): where ``slurm-resolver env`` writes the job's variables
    for srun to pass on to every task. None where the process is a task (or alone)."""

    @classmethod
    @abc.abstractmethod
    def detect(cls, env: Mapping[str, str]) -> bool:
        """Whether this launcher started the process described by ``env``."""

    @classmethod
    @abc.abstractmethod
    def resolve(cls, env: Mapping[str, str]) -> Launch:
        """The job as this launcher describes it."""
