"""KubernetesClusterResolver: each job's Running pods, found by label selectors.

Behaves as TensorFlow's, with two deliberate differences: addresses are the pods' own
IPs (``podIP:port``; TensorFlow uses the node's ``hostIP``, which collides when two pods
share a node), and pods not yet Running are left out with a warning instead of failing the
whole cluster. ``task_type`` and ``task_id`` must be set by the user.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from ..cluster_spec import ClusterSpec
from ..errors import ResolutionError
from ..optional import import_optional
from .base import ClusterResolver

__all__ = ["KubernetesClusterResolver"]

log = logging.getLogger("slurm_resolver")


def _default_client() -> Any:
    client = import_optional("kubernetes.client", "kubernetes", "KubernetesClusterResolver")
    config = import_optional("kubernetes.config", "kubernetes", "KubernetesClusterResolver")
    try:
        config.load_incluster_config()
    except config.ConfigException:
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
            in-cluster configuration or ``~/.kube/config`` is loaded.
    """

    def __init__(self, job_to_label_mapping: Mapping[str, Sequence[str]] | None = None,
                 tf_server_port: int = 8470, rpc_layer: str | None = "grpc", override_client: Any = None) -> None:
        if override_client is None:
            import_optional("kubernetes", "kubernetes", "KubernetesClusterResolver")
        self._job_to_label_mapping = dict(job_to_label_mapping or {"worker": ["job-name=tensorflow"]})
        self._tf_server_port = tf_server_port
        self._override_client = override_client
        self._task_type: str | None = None
        self._task_id: int | None = None
        self._rpc_layer = rpc_layer

    def master(self, task_type: str | None = None, task_id: int | None = None,
               rpc_layer: str | None = None) -> str:
        """The URL of a task (the one set in ``task_type``/``task_id`` by default), or ``''``."""
        return self._task_master(task_type, task_id, rpc_layer)

    def cluster_spec(self) -> ClusterSpec:
        """Each job's Running pods, ordered by namespace and name, as ``podIP:port``."""
        client = self._override_client if self._override_client is not None else _default_client()
        cluster: dict[str, list[str]] = {}
        for job, selectors in self._job_to_label_mapping.items():
            if isinstance(selectors, str):
                selectors = [selectors]
            addresses: list[str] = []
            for selector in selectors:
                pods = client.list_pod_for_all_namespaces(label_selector=selector).items
                for pod in sorted(pods, key=lambda p: (p.metadata.namespace or "", p.metadata.name)):
                    if pod.status.phase != "Running":
                        log.warning("pod %s of job %r is %s, not Running: left out", pod.metadata.name, job,
                                    pod.status.phase)
                        continue
                    if not pod.status.pod_ip:
                        raise ResolutionError(f"pod {pod.metadata.name} of job {job!r} is Running without an IP",
                                              "wait until the pod has an IP, then resolve again")
                    addresses.append(f"{pod.status.pod_ip}:{self._tf_server_port}")
            cluster[job] = addresses
        return ClusterSpec(cluster)
