"""SlurmClusterResolver: TensorFlow's constructor and methods, right on every real launch.

Resolution happens once, in the constructor, from a snapshot of the environment (see
:func:`slurm_resolver.cluster.resolve`); :meth:`cluster_spec` returns that result.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .. import gpus
from ..addresses import port_in_use
from ..environment import export, snapshot
from ..gpus import GpuPlan
from ..cluster import Cluster, resolve
from ..cluster_spec import ClusterSpec
from ..errors import ConfigurationError, ResolutionError
from ..exchange import Exchange
from .base import ClusterResolver

__all__ = ["SlurmClusterResolver"]


def _nvml_ids(env: Mapping[str, str]) -> list[str] | None:
    """NVML's GPUs as UUIDs (MIG instances where enabled), only when Slurm and CUDA say nothing."""
    if any(name in env for name in gpus.SOURCES):
        return None
    from .. import nvml

    found = nvml.devices()
    return None if found is None else [u for d in found for u in (d.mig or (d.uuid,))]


def _check_gpu_count(name: str, value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise ConfigurationError(f"{name}={value!r} must be a whole number >= 0 (0 means no GPU)")


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
        port_base: first port on each node; a node's tasks take consecutive ports.
        gpus_per_node: GPUs of each node to use (default: all the task can see).
        gpus_per_task: GPUs of each task: a count, or per job name such as
            ``{'ps': 0, 'worker': 2}`` (default: the node's GPUs split evenly).
        tasks_per_node: overrides Slurm's layout: a count, or ``{node: count}``.
        auto_set_gpu: write the calling task's ``CUDA_VISIBLE_DEVICES`` (in Slurm's form).
        rpc_layer: protocol of :meth:`master` URLs.
        environ: variables to read instead of ``os.environ`` (keyword only).
        exchange: ``'auto'``, ``'mpi'``, ``'none'`` or an Exchange (keyword only).
        check_port: fail when the calling task's port is already taken on its node,
            typically by another job sharing the node (keyword only). TensorFlow does
            not check, and a worker may then run its ops on another job's server.
    """

    def __init__(self, jobs: Mapping[str, int] | Sequence[str] | None = None, port_base: int | None = 8888,
                 gpus_per_node: int | None = None, gpus_per_task: int | Mapping[str, int] | None = None,
                 tasks_per_node: int | Mapping[str, int] | None = None, auto_set_gpu: bool = True,
                 rpc_layer: str | None = "grpc", *, environ: Mapping[str, str] | None = None,
                 exchange: str | Exchange | None = None, timeout: float = 60.0,
                 check_port: bool = True) -> None:
        _check_gpu_count("gpus_per_node", gpus_per_node)
        if not isinstance(gpus_per_task, Mapping):
            _check_gpu_count("gpus_per_task", gpus_per_task)
        self._gpus_per_node = gpus_per_node
        self._gpus_per_task = gpus_per_task
        self._auto_set_gpu = auto_set_gpu
        self._rpc_layer = rpc_layer
        env = snapshot(environ)
        self._cluster = resolve(env, jobs=jobs, port_base=None if port_base == 8888 else port_base,
                                tasks_per_node=tasks_per_node, exchange=exchange, timeout=timeout)
        self._cluster.gpu_plan = GpuPlan(gpus.visible(env, _nvml_ids(env)), self._cluster.rank,
                                         self._cluster.local_group, self._cluster.job_of,
                                         per_task=gpus_per_task, per_node=gpus_per_node)
        self._spec = self._cluster.spec()
        me = self._cluster.me
        if auto_set_gpu and me is not None and me.gpus is not None and self._cluster.gpu_plan.visible.ids \
                and self._cluster.launcher != "salloc":
            if environ is None or isinstance(environ, dict):  # a read-only mapping is left alone
                export({"CUDA_VISIBLE_DEVICES": gpus.format_devices(me.gpus)}, overwrite=True, environ=environ)
        if check_port and me is not None and self._cluster.launcher not in ("batch", "salloc", "single"):
            _check_own_port(me.node, me.address)
        self._task_type = me.job if me else None
        self._task_id = me.index if me else None

    @property
    def cluster(self) -> Cluster:
        """Everything resolved: each task's node, address, local rank and GPUs."""
        return self._cluster

    def cluster_spec(self) -> ClusterSpec:
        """The job's ClusterSpec."""
        return self._spec

    def get_task_info(self) -> tuple[str | None, int | None]:
        """``(task_type, task_id)`` of the calling task."""
        return self.task_type, self.task_id

    def master(self, task_type: str | None = None, task_id: int | None = None,
               rpc_layer: str | None = None) -> str:
        """The URL of a task (the calling task by default); ``''`` when there is none."""
        return self._task_master(task_type, task_id, rpc_layer)

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
