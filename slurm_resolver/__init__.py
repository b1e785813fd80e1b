"""slurm_resolver: every task of a Slurm job knows who it is, its peers, GPUs and ports.

Importing the package loads nothing heavy: names are imported on first use, and
grpc, mpi4py, pynvml, kubernetes and tensorflow only where they are needed.

>>> import slurm_resolver
>>> resolver = slurm_resolver.SlurmClusterResolver(jobs={"ps": 1, "worker": 3})  # doctest: +SKIP
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "ClusterSpec": "cluster_spec",
    "ClusterResolver": "resolvers.base",
    "SimpleClusterResolver": "resolvers.base",
    "UnionClusterResolver": "resolvers.base",
    "TFConfigClusterResolver": "resolvers.tfconfig",
    "SlurmClusterResolver": "resolvers.slurm",
    "KubernetesClusterResolver": "resolvers.kubernetes",
    "Server": "rpc.network.server",
    "bootstrap": "rpc.bootstrap",
    "bootstrap_async": "rpc.bootstrap",
    "Bootstrapped": "rpc.bootstrapped",
    "Cluster": "cluster",
    "Task": "cluster",
    "resolve": "resolution",
    "snapshot": "environment",
    "progress": "stacks.command",
    "Preemption": "preemption",
    "requeue": "preemption",
    "restart_count": "preemption",
    "checkpoint_dir": "preemption",
    "export": "environment",
    "SlurmResolverError": "errors",
    "EnvironmentVariableError": "errors",
    "ConfigurationError": "errors",
    "ResolutionError": "errors",
    "PlacementError": "errors",
    "AddressError": "errors",
    "MissingDependencyError": "errors",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'slurm_resolver' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:  # pragma: no cover
    from .cluster import Cluster, Task
    from .cluster_spec import ClusterSpec
    from .environment import export, snapshot
    from .errors import (
        AddressError,
        ConfigurationError,
        EnvironmentVariableError,
        MissingDependencyError,
        PlacementError,
        ResolutionError,
        SlurmResolverError,
    )
    from .preemption import Preemption, checkpoint_dir, requeue, restart_count
    from .resolution import resolve
    from .resolvers.base import ClusterResolver, SimpleClusterResolver, UnionClusterResolver
    from .resolvers.kubernetes import KubernetesClusterResolver
    from .resolvers.slurm import SlurmClusterResolver
    from .resolvers.tfconfig import TFConfigClusterResolver
    from .rpc.bootstrap import bootstrap, bootstrap_async
    from .rpc.bootstrapped import Bootstrapped
    from .rpc.network.server import Server
    from .stacks.command import progress
