"""The resolved cluster: one frozen value with every task, and the calling task's place in it.

[`slurm_resolver.resolution.resolve()`][slurm_resolver.resolution.resolve] makes it in one pass. A block
layout is kept as
nodes and counts, so that a 16,384-task job resolves in about a millisecond; per-rank
columns are built only when asked for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import Any

from .addresses import OwnNames
from .cluster_spec import ClusterSpec
from .errors import ConfigurationError, ResolutionError
from .gpus import GpuPlan, format_devices
from .launchers.base import Launch
from .packing import Packing
from .placement import Placement
from .values import PublicValue, fill

__all__ = ["Task", "Cluster", "DEFAULT_PORT_BASE"]


DEFAULT_PORT_BASE = 8888
"""The planned port of each node's first task, as TensorFlow's resolver (its port_base)."""


class Task(PublicValue):
    """One task of the cluster: who it is, where it runs, where its server listens.

    ``port`` is the planned port (``port_base`` + local rank) in a resolved cluster, and
    the port its server bound in a bootstrapped one, which also has ``spare_port``: a
    free port the task reserved for a framework (PyTorch's ``MASTER_PORT``, JAX's
    coordinator, TensorFlow's servers).
    """

    rank: int
    job: str
    index: int
    node: str
    host: str
    port: int
    local_rank: int
    gpus: tuple[str, ...] | None = ()
    """GPU ids; None where Slurm bound them on another task and only their count is known."""
    spare_port: int | None = None

    def __init__(self, rank: int, job: str, index: int, node: str, host: str, port: int, local_rank: int,
                 gpus: tuple[str, ...] | None = (), spare_port: int | None = None) -> None:
        fill(self, rank, job, index, node, host, port, local_rank, gpus, spare_port)

    @property
    def address(self) -> str:
        """``host:port`` of the task's server."""
        return f"{self.host}:{self.port}"

    @property
    def label(self) -> str:
        """How messages name the task: ``worker:3 (rank 3) on node2``."""
        return f"{self.job}:{self.index} (rank {self.rank}) on {self.node}"


class Cluster(PublicValue):
    """The resolved cluster: every task by rank, and which of them the caller is.

    Attributes:
        launch: what the launcher said, with its capabilities.
        rank: the calling task's rank; None where the caller is no task (salloc shell).
        placement: the node of every rank.
        packing: the job and index of every rank.
        hosts: each node's address, the one its peers use (its name, or Slurm's NodeAddr).
        port_base: the planned port of local rank 0 on every node.
        gpu_plan: the GPUs of every task.
        bound_ports, spare_ports: per rank, once bootstrapped
            ([`with_ports()`][slurm_resolver.cluster.Cluster.with_ports]), as the table came (read-only: its
            columns, not a tuple made of every entry).
        reported_gpus: GPUs that tasks reported in the bootstrap where Slurm bound them
            to each task (nobody else can compute them).
    """

    launch: Launch
    rank: int | None
    placement: Placement
    packing: Packing
    hosts: Mapping[str, str]
    port_base: int
    gpu_plan: GpuPlan
    bound_ports: Sequence[int] | None = None
    spare_ports: Sequence[int] | None = None
    reported_gpus: Mapping[int, tuple[str, ...]] | None = None

    def __init__(self, launch: Launch, rank: int | None, placement: Placement, packing: Packing,
                 hosts: Mapping[str, str], port_base: int, gpu_plan: GpuPlan, bound_ports: Sequence[int] | None = None,
                 spare_ports: Sequence[int] | None = None,
                 reported_gpus: Mapping[int, tuple[str, ...]] | None = None) -> None:
        fill(self, launch, rank, placement, packing, hosts, port_base, gpu_plan, bound_ports, spare_ports,
             reported_gpus)

    def __repr__(self) -> str:
        return f"Cluster(launcher={self.launcher!r}, rank={self.rank}, world_size={self.world_size})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Cluster):
            return NotImplemented
        return (self.launcher, self.rank, self.packing.runs, self.addresses, self.nodes) == \
            (other.launcher, other.rank, other.packing.runs, other.addresses, other.nodes)

    __hash__ = None  # type: ignore[assignment]

    @property
    def launcher(self) -> str:
        """The name of the launcher that started the tasks."""
        return self.launch.launcher

    @property
    def job_id(self) -> str | None:
        """The Slurm job id, when there is one."""
        return self.launch.job_id

    @property
    def world_size(self) -> int:
        """Number of tasks."""
        return self.placement.world_size

    @property
    def runs(self) -> tuple[tuple[str, int], ...]:
        """``(job, count)`` runs of consecutive ranks."""
        return self.packing.runs

    @cached_property
    def ports(self) -> tuple[int, ...]:
        """The port of every rank: bound ones once bootstrapped, else ``port_base`` + local rank."""
        if self.bound_ports is not None:
            return tuple(self.bound_ports)  # made only where asked: a task's bootstrap never reads them all
        base = self.port_base
        return tuple(base + local for local in self.placement.local_ranks)

    @cached_property
    def addresses(self) -> tuple[str, ...]:
        """``host:port`` of every rank, in rank order."""
        return tuple(self._address_list)

    @cached_property
    def _address_list(self) -> list[str]:
        """`addresses` as a list, which the spec holds where one job has every rank (neither changes it): each
        address string is made once and held once (at 16,384 tasks, each copy touches a megabyte of them)."""
        p = self.placement
        if self.bound_ports is None and p.is_block:
            node_hosts = p.nodes if isinstance(self.hosts, OwnNames) else [self.hosts[n] for n in p.nodes]
            return _block_addresses(node_hosts, p.counts, self.port_base, p.tasks_per_node)
        hosts = self.hosts
        return [f"{hosts[n]}:{port}" for n, port in zip(p.all_hosts, self.ports)]

    @property
    def nodes(self) -> tuple[str, ...]:
        """The node of every rank."""
        return self.placement.all_hosts

    @property
    def local_ranks(self) -> tuple[int, ...]:
        """The index of every rank among the ranks on its node."""
        return self.placement.local_ranks

    @property
    def jobs(self) -> tuple[str, ...]:
        """The job name of every rank."""
        return self.packing.columns[0]

    @property
    def indices(self) -> tuple[int, ...]:
        """The task index of every rank within its job."""
        return self.packing.columns[1]

    def job_of(self, rank: int) -> str:
        """The job name of ``rank``."""
        return self.packing.job_of(rank)[0]

    def task(self, rank: int) -> Task:
        """The task of ``rank``."""
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < self.world_size:
            raise ConfigurationError(f"no rank {rank!r} in a cluster of {self.world_size} tasks",
                                     f"ranks are 0-{self.world_size - 1}")
        job, index = self.packing.job_of(rank)
        node = self.placement.node_of(rank)
        local = self.placement.local_rank(rank)
        port = self.bound_ports[rank] if self.bound_ports is not None else self.port_base + local
        spare = self.spare_ports[rank] if self.spare_ports is not None else None
        gpus = self.reported_gpus.get(rank) if self.reported_gpus else None
        return Task(rank, job, index, node, self.hosts[node], port, local,
                    gpus if gpus is not None else self.gpu_plan.ids(rank), spare)

    def endpoint(self, rank: int) -> tuple[str, int]:
        """Where ``rank``'s server listens, once bootstrapped: its node's address as `hosts` names it, and its bound
        port (the rule every call to a task follows)."""
        if self.bound_ports is None:
            raise ConfigurationError(f"rank {rank} has no server yet: the cluster is not bootstrapped",
                                     "use the cluster that bootstrap() returns")
        return self.hosts[self.placement.node_of(rank)], self.bound_ports[rank]

    def label(self, rank: int) -> str:
        """How messages name ``rank``: ``worker:3 (rank 3) on node2`` (without the node where the
        layout is still to be learned and the rank is not on the caller's node)."""
        job, index = self.packing.job_of(rank)
        if not self.placement.exact and rank not in self.launch.gtids:
            return f"{job}:{index} (rank {rank})"
        return f"{job}:{index} (rank {rank}) on {self.placement.node_of(rank)}"

    @property
    def me(self) -> Task | None:
        """The calling task; None where the caller is not a task (salloc shell)."""
        return None if self.rank is None else self.task(self.rank)

    def device_env(self) -> dict[str, str]:
        """``CUDA_VISIBLE_DEVICES`` of the calling task, in Slurm's form, where this task sees the
        node's GPUs (or ``gpus_per_node`` declares them, as TensorFlow's resolver takes it) and its own
        are a part of them (write it with `export()`); ``{}`` where there is nothing to set."""
        me = self.me
        if me is None or me.gpus is None or not (self.gpu_plan.visible.ids or self.gpu_plan.per_node):
            return {}
        return {"CUDA_VISIBLE_DEVICES": format_devices(me.gpus)}

    def local_group(self, rank: int) -> tuple[str, Sequence[int]]:
        """The node of ``rank`` and every rank on that node, in local-rank order."""
        return self.placement.group(rank)

    def gpu_count(self, rank: int) -> int:
        """How many GPUs ``rank`` has (exact on the caller's node, and wherever a task reported them)."""
        reported = self.reported_gpus.get(rank) if self.reported_gpus else None
        return len(reported) if reported is not None else self.gpu_plan.count(rank)

    def rank_of(self, job: str, index: int) -> int:
        """The rank of task ``index`` of ``job``; ``ValueError`` naming what exists if none."""
        rank = self.packing.rank_of(job, index)
        if rank is None:
            self.spec().task_address(job, index)  # ValueError naming what exists
            raise ValueError(f"No task with index {index!r} in job {job!r}")  # pragma: no cover
        return rank

    def spec(self) -> ClusterSpec:
        """The ClusterSpec: job names to addresses in task order."""
        return self._spec

    @cached_property
    def _spec(self) -> ClusterSpec:
        runs = self.packing.runs
        if len(runs) == 1:
            return ClusterSpec._trusted({runs[0][0]: self._address_list})
        return ClusterSpec._trusted(self.packing.grouped(self._address_list))

    def as_rank(self, rank: int) -> Cluster:
        """The same cluster as task ``rank`` sees it (simulations run many tasks in one process)."""
        where = self.placement
        launch = self.launch._evolve(rank=rank, node=where.node_of(rank), local_rank=where.local_rank(rank))
        return self._evolve(launch=launch, rank=rank, gpu_plan=self.gpu_plan.for_caller(rank))

    def with_placement(self, placement: Placement) -> Cluster:
        """The same cluster with the placement the tasks learned from each other."""
        if placement.nodes != self.placement.nodes or placement.counts != self.placement.counts:
            raise ResolutionError("the exchanged layout disagrees with Slurm's node list or task counts",
                                  "every task must belong to the same step")
        return self._evolve(placement=placement, gpu_plan=self.gpu_plan.for_caller(self.rank, placement)
                       if self.rank is not None else self.gpu_plan)

    def with_ports(self, bound: Sequence[int], spare: Sequence[int],
                   gpus: Mapping[int, tuple[str, ...]] | None = None) -> Cluster:
        """The same cluster with the ports the servers bound, the spare ports they reserved,
        and the GPUs they reported (the sequences kept as given: never change them after)."""
        if len(bound) != self.world_size or len(spare) != self.world_size:
            raise ResolutionError(f"{len(bound)} ports for a cluster of {self.world_size} tasks",
                                  "every task must report its ports")
        return self._evolve(bound_ports=bound, spare_ports=spare, reported_gpus=gpus or None)

    # `_evolve` (`PublicValue`'s) makes its copies: neither `Cluster` nor `Launch` checks anything in its
    # ``__init__`` (a test holds it), so the copy skips no check.

    def describe(self) -> dict[str, Any]:
        """The calling task and the cluster as plain data (``slurm-resolver show --json``)."""
        me = self.me
        return {
            "task_type": me.job if me else None,
            "task_id": me.index if me else None,
            "rank": self.rank,
            "world_size": self.world_size,
            "node": me.node if me else None,
            "address": me.address if me else None,
            "cluster": self.spec().as_dict(),
            "gpus": list(me.gpus or ()) if me else [],
            "launcher": self.launcher,
            **({"array": self.launch.array} if self.launch.array else {}),
        }


def _block_addresses(node_hosts: Sequence[str], counts: Sequence[int], port_base: int,
                     per_node: int) -> list[str]:
    """Addresses of a block layout in C-level passes: no per-task Python work. Where every node has
    ``per_node`` tasks, the addresses of local rank ``i`` are one join of the hosts and one split (a host
    holds no comma: where one does, the split would tell, and each address is made alone)."""
    if per_node:
        result: list[str] = [""] * (len(node_hosts) * per_node)
        for i in range(per_node):
            suffix = f":{port_base + i}"
            column = (suffix + ",").join(node_hosts).split(",")
            if len(column) != len(node_hosts):
                break
            column[-1] += suffix
            result[i::per_node] = column
        else:
            return result
    suffixes = [f":{port_base + i}" for i in range(max(counts))]
    return [h + p for h, c in zip(node_hosts, counts) for p in suffixes[:c]]


