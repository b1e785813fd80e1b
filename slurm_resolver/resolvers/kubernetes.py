"""KubernetesClusterResolver: each job's Running pods, found by label selectors.

Behaves as TensorFlow's, with three deliberate differences: addresses are the pods' own
IPs (``podIP:port``; TensorFlow uses the node's ``hostIP``, which collides when two pods
share a node); pods not Running are left out with a warning instead of failing the whole
cluster; and a task's index stays that pod's place among all its job's pods (a pod left out
leaves a gap, a sparse job, instead of renumbering every later task). ``task_type`` and
``task_id`` must be set by the user.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from ..cluster_spec import ClusterSpec
from ..errors import ConfigurationError, ResolutionError, raised_from_public_call
from ..optional import import_optional
from .base import ClusterResolver

__all__ = ["KubernetesClusterResolver", "ExecutableLocation", "KubernetesExecutableLocation"]

log = logging.getLogger("slurm_resolver")


class ExecutableLocation(enum.Enum):
    """Where the calling code runs, which says how to reach the Kubernetes API (TensorFlow's enum).

    ``WITHIN_CLUSTER``: in a pod, with its service account (falling back to ``~/.kube/config`` where the
    process is in no pod); ``OFF_CLUSTER``: anywhere else, with ``~/.kube/config`` (or ``KUBECONFIG``).
    """

    WITHIN_CLUSTER = 0
    OFF_CLUSTER = 1


KubernetesExecutableLocation = ExecutableLocation
"""TensorFlow's public name: ``tf.distribute.cluster_resolver.KubernetesExecutableLocation``."""


def _default_client(location: ExecutableLocation) -> Any:
    client = import_optional("kubernetes.client", "kubernetes", "KubernetesClusterResolver")
    config = import_optional("kubernetes.config", "kubernetes", "KubernetesClusterResolver")
    if location is ExecutableLocation.OFF_CLUSTER:
        config.load_kube_config()
        return client.CoreV1Api()
    try:
        config.load_incluster_config()
    except config.ConfigException:
        log.debug("KubernetesClusterResolver: not in a pod; using the kube config")
        config.load_kube_config()
    return client.CoreV1Api()


class KubernetesClusterResolver(ClusterResolver):
    """The cluster from Kubernetes pods.

    Args:
        job_to_label_mapping: job name to a list of label selectors; default
            ``{'worker': ['job-name=tensorflow']}``.
        tf_server_port: the port every task's server listens on.
        rpc_layer: protocol of [`master()`][slurm_resolver.resolvers.kubernetes.KubernetesClusterResolver.master] URLs.
        override_client: an object with ``list_pod_for_all_namespaces(label_selector=...)``
            (a ``kubernetes.client.CoreV1Api``, or a stand-in for tests); without it the
            configuration ``executable_location`` says is loaded.
        executable_location: [`ExecutableLocation`][slurm_resolver.resolvers.kubernetes.ExecutableLocation]
            (TensorFlow's own enum is taken too); anything else is a ``ValueError``.
    """

    @raised_from_public_call
    def __init__(self, job_to_label_mapping: Mapping[str, Sequence[str]] | None = None,
                 tf_server_port: int = 8470, rpc_layer: str | None = "grpc", override_client: Any = None,
                 executable_location: ExecutableLocation = ExecutableLocation.WITHIN_CLUSTER) -> None:
        if isinstance(executable_location, enum.Enum) and not isinstance(executable_location, ExecutableLocation) \
                and executable_location.name in ExecutableLocation.__members__:  # TensorFlow's enum
            executable_location = ExecutableLocation[executable_location.name]
        if not isinstance(executable_location, ExecutableLocation):
            raise ConfigurationError(
                f"The executable location provided is invalid: executable_location={executable_location!r}",
                "pass ExecutableLocation.WITHIN_CLUSTER (in a pod) or ExecutableLocation.OFF_CLUSTER "
                "(from slurm_resolver.resolvers.kubernetes, or TensorFlow's KubernetesExecutableLocation)")
        self._executable_location = executable_location
        if override_client is None:
            import_optional("kubernetes", "kubernetes", "KubernetesClusterResolver")
        self._job_to_label_mapping = dict(job_to_label_mapping or {"worker": ["job-name=tensorflow"]})
        self._tf_server_port = tf_server_port
        self._override_client = override_client
        self._task_type: str | None = None
        self._task_id: int | None = None
        self._rpc_layer = rpc_layer

    @raised_from_public_call
    def master(self, task_type: str | None = None, task_id: int | None = None,
               rpc_layer: str | None = None) -> str:
        """The URL of a task (the one set in ``task_type``/``task_id`` by default), or ``''``."""
        return self._task_master(task_type, task_id, rpc_layer)

    @raised_from_public_call
    def cluster_spec(self) -> ClusterSpec:
        """Each job's Running pods as ``podIP:port``, indexed by their place among all the job's pods
        (ordered by namespace and name): a pod left out leaves a gap, and no later task is renumbered."""
        client = self._override_client if self._override_client is not None else \
            _default_client(self._executable_location)
        cluster: dict[str, dict[int, str]] = {}
        for job, selectors in self._job_to_label_mapping.items():
            if isinstance(selectors, str):
                selectors = [selectors]
            tasks: dict[int, str] = {}
            index = 0
            for selector in selectors:
                pods = client.list_pod_for_all_namespaces(label_selector=selector).items
                for pod in sorted(pods, key=lambda p: (p.metadata.namespace or "", p.metadata.name)):
                    index += 1
                    if pod.status.phase != "Running":
                        log.warning("pod %s of job %r is %s, not Running: left out (task %d of %r has no address; "
                                    "later tasks keep their indices)", pod.metadata.name, job, pod.status.phase,
                                    index - 1, job)
                        continue
                    if not pod.status.pod_ip:
                        raise ResolutionError(f"pod {pod.metadata.name} of job {job!r} is Running without an IP",
                                              "wait until the pod has an IP, then resolve again")
                    tasks[index - 1] = f"{pod.status.pod_ip}:{self._tf_server_port}"
            cluster[job] = tasks
        return ClusterSpec(cluster)
