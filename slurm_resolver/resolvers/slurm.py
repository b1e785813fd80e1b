"""SlurmClusterResolver: TensorFlow's constructor and methods, right on every real launch.

A thin view over one [`Cluster`][slurm_resolver.cluster.Cluster], resolved once in the
constructor by [`slurm_resolver.resolution.resolve()`][slurm_resolver.resolution.resolve] (and,
where only the step's tasks can tell the layout, completed by
`slurm_resolver.rpc.learn.learn_layout()`);
[`cluster_spec()`][slurm_resolver.resolvers.slurm.SlurmClusterResolver.cluster_spec] returns it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from ..addresses import port_in_use
from ..cluster import DEFAULT_PORT_BASE, Cluster
from ..cluster_spec import ClusterSpec
from ..environment import export
from ..errors import ResolutionError, alone, raised_from_public_call
from ..exchange import Exchange
from ..resolution import resolve
from .base import ClusterResolver

log = logging.getLogger("slurm_resolver")

__all__ = ["SlurmClusterResolver"]


class _Default(int):
    """TensorFlow's default ``port_base``, told apart from an explicit 8888 (which wins over the variable)."""

    def __repr__(self) -> str:
        return str(int(self))


_PORT_BASE = _Default(DEFAULT_PORT_BASE)


def _check_own_port(node: str, address: str) -> None:
    host, _, port = address.rpartition(":")
    if port_in_use(host, int(port)):
        raise ResolutionError(
            f"port {port} on {node} is already in use, probably by another job sharing the node; "
            "its servers would answer this job's tasks",
            "choose another port_base (or SLURM_RESOLVER_PORT_BASE), use slurm_resolver.bootstrap() "
            "which binds free ports, or pass check_port=False if this job's own server holds it",
        )


class SlurmClusterResolver(ClusterResolver):
    """The cluster of the running Slurm job, and the calling task's place in it.

    Args:
        jobs: ``{'ps': 1, 'worker': 3}`` (names taken in sorted order, as TensorFlow
            does), a list of names (one job per heterogeneous-job component), or None
            for every task a ``worker``.
        port_base: first port on each node; a node's tasks take consecutive ports. An
            explicit value wins over ``SLURM_RESOLVER_PORT_BASE``; the default does not.
        gpus_per_node: GPUs of each node to use (default: all the task can see).
        gpus_per_task: GPUs of each task: a count, or per job name such as
            ``{'ps': 0, 'worker': 2}`` (default: the node's GPUs split evenly).
        tasks_per_node: overrides Slurm's layout: a count, or ``{node: count}``.
        auto_set_gpu: write the calling task's ``CUDA_VISIBLE_DEVICES`` (in Slurm's form).
        rpc_layer: protocol of [`master()`][slurm_resolver.resolvers.slurm.SlurmClusterResolver.master] URLs.
        environ: variables to read instead of ``os.environ`` (keyword only).
        exchange: one of ``'auto'``, ``'mpi'``, ``'rendezvous'``, ``'none'``, or an
            Exchange (keyword only); see [`slurm_resolver.exchange`][slurm_resolver.exchange].
        check_port: fail when the calling task's port is already taken on its node,
            typically by another job sharing the node (keyword only). TensorFlow does
            not check, and a worker may then run its ops on another job's server.
    """

    @raised_from_public_call
    def __init__(self, jobs: Mapping[str, int] | Sequence[str] | None = None, port_base: int | None = _PORT_BASE,
                 gpus_per_node: int | None = None, gpus_per_task: int | Mapping[str, int] | None = None,
                 tasks_per_node: int | Mapping[str, int] | None = None, auto_set_gpu: bool = True,
                 rpc_layer: str | None = "grpc", *, environ: Mapping[str, str] | None = None,
                 exchange: str | Exchange | None = None, timeout: float = 60.0,
                 check_port: bool = True) -> None:
        cluster = resolve(environ, jobs=jobs, port_base=None if port_base is _PORT_BASE else port_base,
                          tasks_per_node=tasks_per_node, gpus_per_task=gpus_per_task,
                          gpus_per_node=gpus_per_node, exchange=exchange, timeout=timeout)
        if not cluster.placement.exact:  # a layout only the step's tasks can tell: learn it from them
            from ..rpc.learn import learn_layout

            cluster = learn_layout(cluster, environ, timeout)
        if cluster.launch.standalone and environ is None:  # said once: show and check say it their own way
            log.warning(alone("SlurmClusterResolver()"))
        self._cluster = cluster
        self._rpc_layer = rpc_layer
        me = self._cluster.me
        self._task_type = me.job if me else None
        self._task_id = me.index if me else None
        if auto_set_gpu and (environ is None or isinstance(environ, dict)):  # a read-only mapping is left alone
            export(cluster.device_env(), overwrite=True, environ=environ)
        if check_port and me is not None and self._cluster.launch.is_task:
            _check_own_port(me.node, me.address)

    @property
    def cluster(self) -> Cluster:
        """Everything resolved: each task's node, address, local rank and GPUs."""
        return self._cluster

    @raised_from_public_call
    def cluster_spec(self) -> ClusterSpec:
        """The job's ClusterSpec."""
        return self._cluster.spec()

    def get_task_info(self) -> tuple[str | None, int | None]:
        """``(task_type, task_id)`` of the calling task."""
        return self.task_type, self.task_id

    @raised_from_public_call
    def master(self, task_type: str | None = None, task_id: int | None = None,
               rpc_layer: str | None = None) -> str:
        """The URL of a task (the calling task by default); ``''`` when there is none."""
        return self._task_master(task_type, task_id, rpc_layer)

    @raised_from_public_call
    def num_accelerators(self, task_type: str | None = None, task_id: int | None = None,
                         config_proto: Any = None) -> dict[str, int]:
        """``{'GPU': n}`` for a task's GPUs (the calling task by default); ``{}`` for none."""
        del config_proto
        task_type = task_type if task_type is not None else self.task_type
        task_id = task_id if task_id is not None else self.task_id
        if task_type is None or task_id is None:
            return {}
        count = self._cluster.gpu_count(self._cluster.rank_of(task_type, task_id))
        return {"GPU": count} if count else {}
