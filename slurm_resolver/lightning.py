"""A Lightning ``ClusterEnvironment`` of slurm_resolver's, for Fabric and Trainer, right in every launch it takes.

    from lightning.fabric import Fabric
    from slurm_resolver.lightning import SlurmResolverEnvironment

    environment = SlurmResolverEnvironment()   # in every task: srun python train.py
    fabric = Fabric(devices=environment.devices, num_nodes=environment.num_nodes, plugins=[environment])
    fabric.launch()

With ``--ntasks-per-node=N`` (``devices=N``, as Lightning's own asks), the one line that changes from
``plugins=[SLURMEnvironment()]`` is ``plugins=[SlurmResolverEnvironment()]``; with ``srun -n``, whose
layout Slurm chooses, ``devices`` and ``num_nodes`` are the environment's. Lightning's
``SLURMEnvironment`` refuses every step launched with ``srun -n`` (``--ntasks`` without
``--ntasks-per-node``) and names as main address the first node of the job's sorted list, where
rank 0 may not run (a step on part of its job, ``-m arbitrary``); its port is the job id plus
15000, which two jobs on one node share. This one answers from the bootstrap: the world size,
global, local and node rank of every launch slurm_resolver resolves (srun in any layout, het
steps, ``mpirun``, torchrun's workers), rank 0's host as main address and the free port rank 0
reserved for a framework as main port. It ignores Lightning's ``set_global_rank``/``set_world_size``
(Lightning would compute ``node_rank * devices + local_rank``, wrong in a cyclic layout), and
``validate_settings`` refuses what Lightning's DDP cannot run right, with the fix: ``num_nodes`` that
is not the launch's, ``devices`` that is not the most tasks on a node (each process takes
``devices[local_rank]``), and GPUs Slurm bound to each task (its DDP takes ``cuda:<local rank>``,
while such a task sees its one GPU as ``cuda:0``); in a layout with fewer tasks on some nodes, it says
once that Lightning's own sampler would split the data ``num_nodes * devices`` ways.

``lightning`` is an optional extra (``pip install 'slurm_resolver[lightning]'``), imported when the
class is first asked for: ``SlurmResolverEnvironment`` is Lightning's ``ClusterEnvironment`` with the answers
of [`LightningAnswers`][slurm_resolver.lightning.LightningAnswers] (its arguments are those);
[`environment_class()`][slurm_resolver.lightning.environment_class] makes it for the standalone
``lightning_fabric`` (``pytorch_lightning``) package too.
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Any

from .adapters import device_ordinals
from .environment import snapshot
from .errors import ConfigurationError, SlurmResolverError
from .optional import import_optional
from .placement import describe

if TYPE_CHECKING:  # pragma: no cover
    from .cluster import Cluster
    from .rpc.bootstrapped import Bootstrapped

__all__ = ["environment_class", "LightningAnswers"]  # and SlurmResolverEnvironment, made on first use

log = logging.getLogger("slurm_resolver")

_BASES = {"lightning": "lightning.fabric.plugins.environments",
          "lightning_fabric": "lightning_fabric.plugins.environments"}
"""Where each Lightning package keeps its ``ClusterEnvironment`` (``lightning.pytorch``'s Trainer takes
``lightning.fabric``'s; the standalone ``pytorch_lightning`` takes ``lightning_fabric``'s)."""


class LightningAnswers:
    """What the environment answers Lightning, from a bootstrapped (or resolved) cluster: the methods of
    Lightning's ``ClusterEnvironment``, with no Lightning import (the class Lightning takes adds its base).

    Args:
        source: the bootstrapped task (`slurm_resolver.bootstrap()`); a resolved `Cluster` with ``main_port``;
            or None (the default) to bootstrap here, in every task (its servers stop once it is read).
        main_port: the port of rank 0 where the processes meet; default the spare port rank 0 reserved in
            the bootstrap (free on its node).
        timeout: seconds the bootstrap may wait for the other tasks, where it runs here.

    Raises:
        ConfigurationError: a resolved cluster without ``main_port``, or a process that is no task (a batch
            script: launch the script with srun).
    """

    def __init__(self, source: Bootstrapped | Cluster | None = None, *, main_port: int | None = None,
                 timeout: float = 300.0) -> None:
        from .cluster import Cluster
        from .rpc.bootstrapped import Bootstrapped

        if source is None:
            from .rpc.bootstrap import bootstrap

            source = bootstrap(timeout=timeout)
            source.stop()  # read: Lightning's process group takes rank 0's spare port from here
        if isinstance(source, Cluster) and main_port is None:  # its planned ports: nothing reserved one
            raise ConfigurationError("a resolved cluster reserves no port where the processes can meet",
                                     "pass main_port=..., or the bootstrapped task (slurm_resolver.bootstrap())")
        task = Bootstrapped.from_cluster(source) if isinstance(source, Cluster) else source
        if not (task.cluster.launch.is_task or task.cluster.launch.standalone):
            raise ConfigurationError(
                f"this process is no task of the {task.launcher} launch (a batch script, an salloc shell): Lightning "
                f"would wait in it for the other {task.world_size - 1} tasks", "start the script with srun "
                "(srun python train.py), which runs it in every task")
        port = main_port if main_port is not None else task.task(0).spare_port
        assert port is not None  # a bootstrapped cluster has every spare port
        self.task = task
        self._port = int(port)

    @property
    def cluster(self) -> Cluster:
        """The cluster the answers come from."""
        return self.task.cluster

    @property
    def devices(self) -> int:
        """What Lightning's ``devices=`` must be here: the most tasks the launch runs on one node."""
        return max(self.cluster.placement.counts)

    @property
    def num_nodes(self) -> int:
        """What Lightning's ``num_nodes=`` must be here: the launch's nodes."""
        return len(self.cluster.placement.counts)

    @property
    def creates_processes_externally(self) -> bool:
        """True: srun (or mpirun, or torchrun) started every process."""
        return True

    @property
    def main_address(self) -> str:
        """Rank 0's host, where the processes meet."""
        return self.task.task(0).host

    @property
    def main_port(self) -> int:
        """Rank 0's port where the processes meet (its spare port, unless given)."""
        return self._port

    @staticmethod
    def detect() -> bool:
        """Whether this process is a task of a launch slurm_resolver knows (Lightning asks only where no
        environment is given)."""
        from .launchers import launch_of

        try:
            return launch_of(snapshot()).is_task
        except SlurmResolverError:
            return False

    def world_size(self) -> int:
        """The number of tasks of the launch."""
        return self.task.world_size

    def set_world_size(self, size: int) -> None:
        """Ignored: the launch's size is the world size (Lightning's ``num_nodes * devices`` is checked instead)."""
        log.debug("SlurmResolverEnvironment.set_world_size(%s) ignored: the launch has %s tasks", size,
                  self.task.world_size)

    def global_rank(self) -> int:
        """This task's rank."""
        return self.task.rank

    def set_global_rank(self, rank: int) -> None:
        """Ignored: Lightning's ``node_rank * devices + local_rank`` is not the rank in a cyclic layout."""
        log.debug("SlurmResolverEnvironment.set_global_rank(%s) ignored: this task is rank %s", rank, self.task.rank)

    def local_rank(self) -> int:
        """This task's rank among the tasks on its node."""
        return self.task.me.local_rank

    def node_rank(self) -> int:
        """The position of this task's node among the launch's nodes, in Slurm's order (``SLURM_NODEID``; the
        order of the ranks where no Slurm step lists them, as ``mpirun`` outside Slurm)."""
        launch = self.cluster.launch
        if launch.node_index is not None:  # Slurm's own (a het step numbers its components' nodes in order)
            return launch.node_index
        node = self.cluster.placement.node_of(self.task.rank)
        return (launch.nodes if node in launch.nodes else self.cluster.placement.nodes).index(node)

    def validate_settings(self, num_devices: int, num_nodes: int) -> None:
        """Refuse, with the fix, ``devices`` and ``num_nodes`` with which Lightning's DDP would not run this
        launch: ``num_nodes`` must be the launch's nodes and ``devices`` the most tasks on one of them (each
        process takes ``devices[local_rank]``), and a task's GPU must be ``cuda:<local rank>``. A layout with
        fewer tasks on some nodes (``srun -N2 -n4`` is 3 and 1 on 4-CPU nodes) runs; rank 0 says once that
        Lightning's own sampler would split the data ``num_nodes * devices`` ways, more than the tasks."""
        placement = self.cluster.placement
        counts, layout = placement.counts, describe(list(zip(placement.nodes, placement.counts)))
        if (num_devices, num_nodes) != (self.devices, self.num_nodes):
            raise ValueError(
                f"Fabric/Trainer has devices={num_devices}, num_nodes={num_nodes}, but the launch runs on "
                f"{self.num_nodes} nodes, at most {self.devices} tasks on one ({layout}). HINT: set "
                f"devices={self.devices}, num_nodes={self.num_nodes} (the environment's devices and num_nodes)")
        if len(set(counts)) > 1 and self.global_rank() == 0:
            log.warning(
                "slurm_resolver: this launch runs %s: Lightning's DistributedSampler (Fabric.setup_dataloaders, the "
                "Trainer's use_distributed_sampler) would split the data num_nodes * devices = %d ways for %d tasks, "
                "and leave part of it out; pass use_distributed_sampler=False with a DistributedSampler(dataset, "
                "num_replicas=world_size, rank=global_rank) of your own, or launch as many tasks on every node",
                layout, num_nodes * num_devices, self.world_size())
        ordinals = device_ordinals(self.task)
        if ordinals and ordinals[0] != self.local_rank():
            raise ValueError(
                f"Lightning puts each process on the GPU of its local rank (cuda:{self.local_rank()} here), but this "
                f"task's GPU is cuda:{ordinals[0]}: Slurm bound each task its own (--gpus-per-task, --gpu-bind). "
                "HINT: give the tasks the node's GPUs (--gres=gpu:N with --ntasks-per-node=N, no --gpus-per-task)")

    def teardown(self) -> None:
        """Nothing to clean up: nothing was written to the environment."""

    def __repr__(self) -> str:
        return f"SlurmResolverEnvironment(rank={self.task.rank}, world_size={self.task.world_size})"


@functools.cache
def environment_class(package: str = "lightning") -> type[Any]:
    """The ``ClusterEnvironment`` subclass for Lightning's ``package``: ``lightning`` (Fabric, and the Trainer
    of ``lightning.pytorch``) or ``lightning_fabric`` (the standalone packages); made once, on first use."""
    if package not in _BASES:
        raise ConfigurationError(f"no Lightning package {package!r}", f"choose one of {', '.join(_BASES)}")
    base = import_optional(_BASES[package], "lightning", "SlurmResolverEnvironment").ClusterEnvironment
    return type("SlurmResolverEnvironment", (LightningAnswers, base),
                {"__module__": __name__, "__doc__": LightningAnswers.__doc__})


def __getattr__(name: str) -> Any:
    """``SlurmResolverEnvironment``: Lightning's class, made on first use (importing Lightning is heavy)."""
    if name == "SlurmResolverEnvironment":
        return environment_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
