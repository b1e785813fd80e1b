"""TFConfigClusterResolver: the cluster and task from the ``TF_CONFIG`` variable.

Behaves as TensorFlow's: TF_CONFIG is read again at every call, explicit arguments win
over its values, a missing ``cluster`` gives an empty ClusterSpec, ``session_master`` wins
in [`master()`][slurm_resolver.resolvers.tfconfig.TFConfigClusterResolver.master]. Unlike TensorFlow, a
malformed TF_CONFIG is an error that names the
field and the fix, and ``environment`` is also read from TF_CONFIG (TensorFlow 2.21 takes
it only from the constructor).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..cluster_spec import ClusterSpec
from ..environment import snapshot
from ..errors import EnvironmentVariableError, raised_from_public_call
from .base import ClusterResolver, format_master_url

__all__ = ["TFConfigClusterResolver", "parse_tf_config"]

_HINT = ('TF_CONFIG looks like {"cluster": {"worker": ["host:port", ...]}, '
         '"task": {"type": "worker", "index": 0}}')


def parse_tf_config(text: str | None) -> dict[str, Any]:
    """Parse and check TF_CONFIG; an unset or empty value is ``{}``. A numeric ``task.type`` becomes a
    string and a string ``task.index`` of digits an int, as TensorFlow casts them."""
    if text is None or not text.strip():
        return {}
    try:
        config = json.loads(text)
    except ValueError as exc:
        raise EnvironmentVariableError("TF_CONFIG", text, f"JSON ({exc})", _HINT) from None
    if not isinstance(config, dict):
        raise EnvironmentVariableError("TF_CONFIG", text, "a JSON object", _HINT)
    cluster = config.get("cluster", {})
    try:
        spec = ClusterSpec(cluster)
    except (TypeError, ValueError) as exc:
        raise EnvironmentVariableError("TF_CONFIG", text, f"a valid 'cluster' member ({exc})", _HINT) from None
    task = config.get("task", {})
    if not isinstance(task, dict):
        raise EnvironmentVariableError("TF_CONFIG", text, "'task' to be an object with 'type' and 'index'", _HINT)
    index = _whole(task.get("index"))
    if index is not None and (isinstance(index, bool) or not isinstance(index, int) or index < 0):
        raise EnvironmentVariableError("TF_CONFIG", text, f"'task.index' to be a whole number >= 0, not {index!r}",
                                       _HINT)
    kind = task.get("type")
    if kind is not None and not isinstance(kind, str):  # TensorFlow casts it: 123456 names job '123456'
        if isinstance(kind, (bool, dict, list, float)):
            raise EnvironmentVariableError("TF_CONFIG", text, f"'task.type' to be a job name, not {kind!r}", _HINT)
        kind = str(kind)
    if kind is not None and spec and kind not in spec.jobs:
        raise EnvironmentVariableError(
            "TF_CONFIG", text, f"'task.type' {kind!r} to be one of the cluster's jobs {spec.jobs}", _HINT)
    if kind is not None and index is not None and spec and index not in spec.task_indices(kind):
        raise EnvironmentVariableError(
            "TF_CONFIG", text, f"'task.index' {index} to exist in job {kind!r} "
            f"(indices {spec.task_indices(kind)})", _HINT)
    if "task" in config:
        config = {**config, "task": {**task, **({} if kind is None else {"type": kind}),
                                     **({} if index is None else {"index": index})}}
    return config


def _whole(value: Any) -> Any:
    """A task index as TensorFlow takes it: ``"1"`` is 1 (it casts with ``int()``); anything else as given.

    >>> _whole("1"), _whole(2), _whole("x")
    (1, 2, 'x')
    """
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit() and len(value.strip()) < 10:
        return int(value)
    return value


class TFConfigClusterResolver(ClusterResolver):
    """Reads the cluster, task, RPC layer and environment from ``TF_CONFIG``.

    Args:
        task_type: overrides TF_CONFIG's task type.
        task_id: overrides TF_CONFIG's task index.
        rpc_layer: overrides TF_CONFIG's RPC layer.
        environment: overrides TF_CONFIG's environment.
        environ: where to read TF_CONFIG (``os.environ`` by default); for tests.
    """

    def __init__(self, task_type: str | None = None, task_id: int | None = None,
                 rpc_layer: str | None = None, environment: str | None = None,
                 *, environ: Mapping[str, str] | None = None) -> None:
        self._task_type = task_type
        self._task_id = task_id
        self._rpc_layer = rpc_layer
        self._environment = environment
        self._environ = environ

    def _config(self) -> dict[str, Any]:
        return parse_tf_config(snapshot(self._environ).get("TF_CONFIG"))

    @property
    @raised_from_public_call
    def task_type(self) -> str | None:
        if self._task_type is not None:
            return self._task_type
        kind = self._config().get("task", {}).get("type")  # str() as TensorFlow
        return None if kind is None else str(kind)

    @task_type.setter
    def task_type(self, task_type: str | None) -> None:
        self._task_type = task_type

    @property
    @raised_from_public_call
    def task_id(self) -> int | None:
        if self._task_id is not None:
            return self._task_id
        index = self._config().get("task", {}).get("index")
        return None if index is None else int(index)

    @task_id.setter
    def task_id(self, task_id: int | None) -> None:
        self._task_id = task_id

    @property
    @raised_from_public_call
    def environment(self) -> str | None:  # type: ignore[override]
        """The constructor's value, else TF_CONFIG's ``environment``, else None (as TensorFlow)."""
        if self._environment is not None:
            return self._environment
        value = self._config().get("environment")
        return None if value is None else str(value)

    @property
    @raised_from_public_call
    def rpc_layer(self) -> str | None:
        return self._rpc_layer if self._rpc_layer is not None else self._config().get("rpc_layer")

    @rpc_layer.setter
    def rpc_layer(self, rpc_layer: str | None) -> None:
        self._rpc_layer = rpc_layer

    @raised_from_public_call
    def cluster_spec(self) -> ClusterSpec:
        """The ``cluster`` of TF_CONFIG; empty when TF_CONFIG has none."""
        return ClusterSpec(self._config().get("cluster", {}))

    @raised_from_public_call
    def master(self, task_type: str | None = None, task_id: int | None = None,
               rpc_layer: str | None = None) -> str:
        """TF_CONFIG's ``session_master`` if set; ``''`` for a cluster of at most one task;
        else the address of a task (this one by default), as TensorFlow."""
        config = self._config()
        if config.get("session_master") is not None:
            return str(config["session_master"])
        spec = self.cluster_spec()
        if not spec.jobs or (len(spec.jobs) == 1 and len(spec.job_tasks(spec.jobs[0])) == 1):
            return ""
        task_type = task_type if task_type is not None else self.task_type
        task_id = task_id if task_id is not None else self.task_id
        rpc_layer = rpc_layer if rpc_layer is not None else self.rpc_layer
        return format_master_url(spec.task_address(task_type, task_id), rpc_layer)  # type: ignore[arg-type]
