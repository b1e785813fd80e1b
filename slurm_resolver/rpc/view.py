"""A verified cluster seen as TensorFlow's resolvers see one: this task, its peers, their addresses.

`Bootstrapped` answers these questions (``cluster_spec``, ``task_type``, ``master``...) so it
can stand where a resolver is expected; its rounds and its life are its own.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from ..cluster import Cluster, Task
from ..cluster_spec import ClusterSpec

__all__: list[str] = []  # internal: see Bootstrapped


class ClusterView:
    """The questions of TensorFlow's resolvers, answered from a bootstrapped (or resolved) cluster.

    Attributes:
        cluster: the cluster with the ports the servers bound (`bound_ports`).
        rank: this task.
    """

    rpc_layer = "grpc"
    environment = ""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        assert cluster.rank is not None
        self.rank: int = cluster.rank

    @property
    def me(self) -> Task:
        """This task."""
        return self.cluster.task(self.rank)

    def task(self, rank: int) -> Task:
        """The task of ``rank``."""
        return self.cluster.task(rank)

    @cached_property
    def peers(self) -> tuple[Task, ...]:
        """Every task, by rank (built on first use: prefer `task()` in large jobs)."""
        return tuple(map(self.cluster.task, range(self.world_size)))

    @property
    def world_size(self) -> int:
        """Number of tasks."""
        return self.cluster.world_size

    @property
    def launcher(self) -> str:
        """The launcher that started the tasks."""
        return self.cluster.launcher

    @property
    def job_key(self) -> str:
        """What names this launch."""
        return self.cluster.launch.key

    @property
    def task_type(self) -> str:
        """This task's job name."""
        return self.me.job

    @property
    def task_id(self) -> int:
        """This task's index within its job."""
        return self.me.index

    def cluster_spec(self) -> ClusterSpec:
        """Job names to the addresses the servers bound, in task order."""
        return self.cluster.spec()

    def framework_spec(self) -> ClusterSpec:
        """The same cluster on each task's spare port: where a framework's servers listen
        (TensorFlow's, through TF_CONFIG) while ours keep serving coordination."""
        c = self.cluster
        assert c.spare_ports is not None
        hosts = c.hosts
        return ClusterSpec._trusted(c.packing.grouped(
            [f"{hosts[n]}:{p}" for n, p in zip(c.placement.all_hosts, c.spare_ports)]))

    def master(self, task_type: str | None = None, task_id: int | None = None, rpc_layer: str | None = None) -> str:
        """The URL of a task, this one by default."""
        task_type = self.task_type if task_type is None else task_type
        task_id = self.task_id if task_id is None else task_id
        address = self.cluster_spec().task_address(task_type, task_id)
        layer = rpc_layer or self.rpc_layer
        return f"{layer}://{address}" if layer else address

    def num_accelerators(self, task_type: str | None = None, task_id: int | None = None,
                         config_proto: Any = None) -> dict[str, int]:
        """``{'GPU': n}`` for a task's GPUs; ``{}`` for none."""
        del config_proto
        rank = self.cluster.rank_of(self.task_type if task_type is None else task_type,
                                    self.task_id if task_id is None else task_id)
        count = self.cluster.gpu_count(rank)
        return {"GPU": count} if count else {}

    def describe(self) -> dict[str, Any]:
        """This task and the cluster as plain data (``SLURM_RESOLVER_TASK``, ``show --bootstrapped``)."""
        return self.cluster.describe()
