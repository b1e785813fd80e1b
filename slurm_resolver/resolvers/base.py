"""ClusterResolver, the contract of TensorFlow's resolvers, and its simplest members.

[`ClusterResolver`][slurm_resolver.resolvers.base.ClusterResolver] mirrors
``tf.distribute.cluster_resolver.ClusterResolver``;
[`SimpleClusterResolver`][slurm_resolver.resolvers.base.SimpleClusterResolver] and
[`UnionClusterResolver`][slurm_resolver.resolvers.base.UnionClusterResolver] behave as TensorFlow's.
Every resolver can also write its task's TF_CONFIG
([`ClusterResolver.tf_config()`][slurm_resolver.resolvers.base.ClusterResolver.tf_config]) and
become a genuine TensorFlow resolver
([`ClusterResolver.to_tensorflow()`][slurm_resolver.resolvers.base.ClusterResolver.to_tensorflow]).
"""

from __future__ import annotations

import abc
import json
from collections.abc import Mapping
from typing import Any

from ..cluster_spec import ClusterSpec
from ..errors import ConfigurationError, raised_from_public_call
from ..optional import import_optional

__all__ = ["ClusterResolver", "SimpleClusterResolver", "UnionClusterResolver", "format_master_url"]


def format_master_url(master: str, rpc_layer: str | None = None) -> str:
    """``rpc_layer://master``, or ``master`` alone without an RPC layer.

    >>> format_master_url("h:2222", "grpc")
    'grpc://h:2222'
    """
    return f"{rpc_layer}://{master}" if rpc_layer else master


class ClusterResolver(abc.ABC):
    """Abstract resolver: where the cluster is, and which task of it this process is.

    Subclasses implement [`cluster_spec()`][slurm_resolver.resolvers.base.ClusterResolver.cluster_spec] and
    [`master()`][slurm_resolver.resolvers.base.ClusterResolver.master], and set
    ``self._task_type``, ``self._task_id`` and ``self._rpc_layer`` where they apply.
    """

    @abc.abstractmethod
    def cluster_spec(self) -> ClusterSpec:
        """The current cluster."""

    @abc.abstractmethod
    def master(self, task_type: str | None = None, task_id: int | None = None,
               rpc_layer: str | None = None) -> str:
        """The address (URL with an RPC layer) of a task, by default the session master."""

    _environ: Mapping[str, str] | None = None
    """Where the calling task's variables are read (``os.environ`` when None)."""

    @raised_from_public_call
    def num_accelerators(self, task_type: str | None = None, task_id: int | None = None,
                         config_proto: Any = None) -> dict[str, int]:
        """The calling task's accelerators, e.g. ``{'GPU': 2}``; ``{}`` for none, or for another task.

        TensorFlow's base class lists the devices of this task's session; without one, the GPUs
        it would list are those the task can see: ``CUDA_VISIBLE_DEVICES``, else Slurm's GPU
        variables (its binding), else NVML's devices. Another task's are not known here.
        """
        del config_proto
        if (task_type is not None and task_type != self.task_type) or (task_id is not None and task_id != self.task_id):
            return {}
        from ..environment import snapshot
        from ..gpus import local

        count = len(local(snapshot(self._environ)).ids)
        return {"GPU": count} if count else {}

    def _task_master(self, task_type: str | None, task_id: int | None, rpc_layer: str | None) -> str:
        """The URL of a task, this resolver's own task by default; ``''`` when there is none."""
        task_type = task_type if task_type is not None else self.task_type
        task_id = task_id if task_id is not None else self.task_id
        if task_type is None or task_id is None:
            return ""
        return format_master_url(self.cluster_spec().task_address(task_type, task_id), rpc_layer or self.rpc_layer)

    @property
    def environment(self) -> str:
        """``''`` outside Google, as in TensorFlow."""
        return ""

    @property
    def task_type(self) -> str | None:
        """The job name of this task (``'worker'``, ``'ps'``, ``'chief'``...), or None."""
        return getattr(self, "_task_type", None)

    @task_type.setter
    def task_type(self, task_type: str | None) -> None:
        self._task_type = task_type

    @property
    def task_id(self) -> int | None:
        """The index of this task within its job, or None."""
        return getattr(self, "_task_id", None)

    @task_id.setter
    def task_id(self, task_id: int | None) -> None:
        self._task_id = task_id

    @property
    def rpc_layer(self) -> str | None:
        """The RPC protocol of the cluster (``'grpc'``), or None."""
        return getattr(self, "_rpc_layer", None)

    @rpc_layer.setter
    def rpc_layer(self, rpc_layer: str | None) -> None:
        self._rpc_layer = rpc_layer

    @raised_from_public_call
    def tf_config(self, task_type: str | None = None, task_id: int | None = None) -> str:
        """The TF_CONFIG JSON of a task (this one by default), for TensorFlow's strategies.

        >>> r = SimpleClusterResolver(ClusterSpec({"worker": ["a:1", "b:1"]}), task_type="worker", task_id=1)
        >>> r.tf_config()
        '{"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 1}}'
        """
        task_type = self.task_type if task_type is None else task_type
        task_id = self.task_id if task_id is None else task_id
        spec = self.cluster_spec()
        if task_type is None or task_id is None:
            raise ConfigurationError(
                "TF_CONFIG needs a task, but this resolver has no task_type/task_id",
                "set resolver.task_type and resolver.task_id, or pass them",
            )
        spec.task_address(task_type, task_id)  # ValueError naming what exists
        config: dict[str, Any] = {"cluster": spec.as_dict(), "task": {"type": task_type, "index": task_id}}
        if self.rpc_layer and self.rpc_layer != "grpc":
            config["rpc_layer"] = self.rpc_layer
        if self.environment:
            config["environment"] = str(self.environment)
        return json.dumps(config)

    @raised_from_public_call
    def to_tensorflow(self) -> Any:
        """A genuine ``tf.distribute.cluster_resolver.SimpleClusterResolver`` with our values (an
        HTTP proxy in the environment, which TensorFlow's gRPC would use, is said once in the log:
        see `keep_grpc_off_proxies()`)."""
        from ..environment import warn_of_grpc_proxy

        warn_of_grpc_proxy("to_tensorflow()")
        tf = import_optional("tensorflow", "tensorflow", "A TensorFlow resolver")
        return tf.distribute.cluster_resolver.SimpleClusterResolver(
            self.cluster_spec().to_tensorflow(),
            master=self.master(),
            task_type=self.task_type,
            task_id=self.task_id,
            environment=self.environment,
            num_accelerators=dict(self.num_accelerators()),
            rpc_layer=self.rpc_layer,
        )


class SimpleClusterResolver(ClusterResolver):
    """A resolver that returns exactly what it was given.

    Args:
        cluster_spec: the cluster (a [`ClusterSpec`][slurm_resolver.cluster_spec.ClusterSpec], TensorFlow's, or a dict).
        master: the session master returned by
            [`master()`][slurm_resolver.resolvers.base.SimpleClusterResolver.master] without a task.
        task_type: this task's job name.
        task_id: this task's index in its job.
        environment: ``''`` or ``'google'``.
        num_accelerators: e.g. ``{'GPU': 8}``, returned for every task.
        rpc_layer: e.g. ``'grpc'``.
    """

    def __init__(self, cluster_spec: Any, master: str = "", task_type: str | None = None,
                 task_id: int | None = None, environment: str = "",
                 num_accelerators: dict[str, int] | None = None, rpc_layer: str | None = None):
        if not isinstance(cluster_spec, ClusterSpec):
            if not (isinstance(cluster_spec, dict) or hasattr(cluster_spec, "as_dict")):
                raise TypeError("cluster_spec must be a `tf.train.ClusterSpec`.")
            cluster_spec = ClusterSpec(cluster_spec)
        if not isinstance(master, str):
            raise TypeError("master must be a string.")
        self._cluster_spec: ClusterSpec = cluster_spec
        self._master = master
        self._task_type = task_type
        self._task_id = task_id
        self._environment = environment
        self._num_accelerators = num_accelerators
        self._rpc_layer = rpc_layer

    def cluster_spec(self) -> ClusterSpec:
        """The ClusterSpec passed to the constructor."""
        return self._cluster_spec

    def master(self, task_type: str | None = None, task_id: int | None = None,
               rpc_layer: str | None = None) -> str:
        """The given task's address, or the constructor's ``master`` without a task."""
        if task_type is not None and task_id is not None:
            master = self.cluster_spec().task_address(task_type, task_id)
        else:
            master = self._master
        return format_master_url(master, rpc_layer=rpc_layer or self._rpc_layer)

    @property
    def environment(self) -> str:
        return self._environment

    def num_accelerators(self, task_type: str | None = None, task_id: int | None = None,
                         config_proto: Any = None) -> dict[str, int]:
        """The constructor's ``num_accelerators`` (``{}`` when None), for any task."""
        del task_type, task_id, config_proto
        return {} if self._num_accelerators is None else self._num_accelerators


class UnionClusterResolver(ClusterResolver):
    """The union of several resolvers' clusters; other properties come from the first.

    A job present in several clusters gets the concatenation of their task lists; where
    any of them is sparse, the tasks are merged by index and a duplicate index is a
    ``KeyError``, as in TensorFlow.
    """

    def __init__(self, *args: ClusterResolver, **kwargs: Any) -> None:
        self._rpc_layer = kwargs.pop("rpc_layer", None)
        self._task_type = kwargs.pop("task_type", None)
        self._task_id = kwargs.pop("task_id", None)
        if kwargs:
            raise ValueError(f"Unexpected kwargs provided {kwargs!r}")
        if not args:
            raise ValueError("At least one ClusterResolver is required.")
        for resolver in args:
            if not _is_resolver(resolver):
                raise TypeError("All arguments must be a sub-class of `ClusterResolver.`")
        self._cluster_resolvers = args

    @raised_from_public_call
    def cluster_spec(self) -> ClusterSpec:
        """The merged cluster of every resolver, in the order they were given."""
        specs = [ClusterSpec(r.cluster_spec()).as_dict() for r in self._cluster_resolvers]
        sparse = {job for spec in specs for job, tasks in spec.items() if isinstance(tasks, dict)}
        merged: dict[str, Any] = {}
        for spec in specs:
            for job, tasks in spec.items():
                if job not in sparse:
                    merged.setdefault(job, []).extend(tasks)
                    continue
                as_dict = dict(enumerate(tasks)) if isinstance(tasks, list) else dict(tasks)
                target = merged.setdefault(job, {})
                duplicates = set(as_dict) & set(target)
                if duplicates:
                    raise KeyError(f"Duplicate keys detected when merging two ClusterSpecs: {duplicates!r}")
                target.update(as_dict)
        return ClusterSpec(merged)

    @raised_from_public_call
    def master(self, task_type: str | None = None, task_id: int | None = None,
               rpc_layer: str | None = None) -> str:
        """The given task's address, or the first resolver's master."""
        if task_type is not None and task_id is not None:
            master = self.cluster_spec().task_address(task_type, task_id)
            return format_master_url(master, rpc_layer or self._rpc_layer)
        return str(self._cluster_resolvers[0].master(rpc_layer=rpc_layer))

    @property
    def task_type(self) -> str | None:
        return self._task_type or self._cluster_resolvers[0].task_type

    @task_type.setter
    def task_type(self, task_type: str | None) -> None:
        self._task_type = task_type

    @property
    def task_id(self) -> int | None:
        return self._task_id or self._cluster_resolvers[0].task_id

    @task_id.setter
    def task_id(self, task_id: int | None) -> None:
        self._task_id = task_id

    @property
    def environment(self) -> str:
        return str(self._cluster_resolvers[0].environment)

    @raised_from_public_call
    def num_accelerators(self, task_type: str | None = None, task_id: int | None = None,
                         config_proto: Any = None) -> dict[str, int]:
        return dict(self._cluster_resolvers[0].num_accelerators(task_type, task_id, config_proto))

    @property
    def rpc_layer(self) -> str | None:
        return self._rpc_layer or self._cluster_resolvers[0].rpc_layer

    @rpc_layer.setter
    def rpc_layer(self, rpc_layer: str | None) -> None:
        self._rpc_layer = rpc_layer


def _is_resolver(obj: object) -> bool:
    """Ours, TensorFlow's, or anything with the resolver contract (duck-typed)."""
    return isinstance(obj, ClusterResolver) or all(
        callable(getattr(obj, name, None)) for name in ("cluster_spec", "master", "num_accelerators")
    )
