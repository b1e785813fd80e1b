"""The one module that touches ``os.environ``: a frozen snapshot in, one writer out.

Everything else in slurm_resolver receives a [`Snapshot`][slurm_resolver.environment.Snapshot] (or a plain mapping, in
tests) and never reads the process environment itself.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping
from dataclasses import field
from types import MappingProxyType

from .errors import ConfigurationError
from .values import PublicValue, fill

__all__ = ["Snapshot", "snapshot", "export", "export_defaults", "for_child", "grpc_without_proxy",
           "keep_grpc_off_proxies", "warn_of_grpc_proxy"]

PREFIXES: tuple[str, ...] = (
    "SLURM_", "SLURMD_", "OMPI_COMM_WORLD_", "PMI_RANK", "PMI_SIZE", "PMI_FD",
    "PMIX_RANK", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "CUDA_VISIBLE_DEVICES",
    "GPU_DEVICE_ORDINAL", "TF_CONFIG", "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "TF_CPP_MIN_LOG_LEVEL",
    "OMPI_MCA_orte_hnp_uri", "OMPI_VERSION", "KUBERNETES_SERVICE_HOST",
    "grpc_proxy", "no_grpc_proxy", "https_proxy", "http_proxy",
    "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
    "CROSS_RANK", "LOCAL_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "JAX_PLATFORMS",
)
"""Names (or prefixes of names) copied into the environment snapshot (`slurm_resolver.variables` exports it
beside its table; it is here so that a task's start does not load the table)."""


class Snapshot(PublicValue, Mapping[str, str]):
    """An immutable copy of the launcher variables of one process.

    Behaves as a read-only mapping; build it with [`snapshot()`][slurm_resolver.environment.snapshot].
    """

    data: Mapping[str, str] = field(default_factory=dict)

    def __init__(self, data: Mapping[str, str] | None = None) -> None:
        fill(self, MappingProxyType(dict(() if data is None else data)))

    def __reduce__(self) -> tuple[type[Snapshot], tuple[dict[str, str]]]:
        return Snapshot, (dict(self.data),)

    def __getitem__(self, name: str) -> str:
        return self.data[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)

    def __hash__(self) -> int:
        return hash(tuple(sorted(self.data.items())))


def snapshot(environ: Mapping[str, str] | None = None) -> Snapshot:
    """Copy the variables slurm_resolver reads from ``environ`` (``os.environ`` by default).

    >>> snapshot({"SLURM_PROCID": "3", "HOME": "/root"}).get("SLURM_PROCID")
    '3'
    >>> "HOME" in snapshot({"HOME": "/root"})
    False
    """
    source = os.environ if environ is None else environ
    if isinstance(source, Snapshot):
        return source
    return Snapshot({k: v for k, v in source.items() if k.startswith(PREFIXES)})


def export(
    variables: Mapping[str, str],
    *,
    overwrite: bool = False,
    environ: dict[str, str] | None = None,
) -> dict[str, str]:
    """Write ``variables`` into the environment (``os.environ`` by default).

    A variable that is already set to a different value is refused unless ``overwrite``
    is true, so that what a launcher bound (``CUDA_VISIBLE_DEVICES``, ``MASTER_ADDR``)
    is never silently replaced. Returns the variables that changed.
    """
    target: dict[str, str] | os._Environ[str] = os.environ if environ is None else environ
    clashes = {k: (target[k], v) for k, v in variables.items() if k in target and target[k] != v}
    if clashes and not overwrite:
        shown = ", ".join(f"{k}={old!r} (wanted {new!r})" for k, (old, new) in sorted(clashes.items()))
        raise ConfigurationError(
            f"refusing to overwrite environment variables already set: {shown}",
            "unset them first, or pass overwrite=True (command line: --overwrite)",
        )
    changed = {k: v for k, v in variables.items() if target.get(k) != v}
    target.update(changed)
    return changed


def export_defaults(variables: Mapping[str, str], environ: dict[str, str] | None = None) -> dict[str, str]:
    """Write each of ``variables`` that is not set yet (a user's own value always wins).

    Returns the variables that were written.
    """
    target: dict[str, str] | os._Environ[str] = os.environ if environ is None else environ
    missing = {k: v for k, v in variables.items() if k not in target}
    target.update(missing)
    return missing


def for_child(defaults: Mapping[str, str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a child process: this process's (or ``environ``), with each of
    ``defaults`` that is not set there; this process's own is left as it is.

    >>> for_child({"A": "1", "B": "2"}, {"B": "x"})
    {'B': 'x', 'A': '1'}
    """
    child = dict(os.environ if environ is None else environ)
    for name, value in defaults.items():
        child.setdefault(name, value)
    return child


def grpc_without_proxy(variables: Mapping[str, str]) -> dict[str, str]:
    """``grpc_proxy=''`` where ``variables`` name an HTTP proxy (``https_proxy``, ``http_proxy``,
    often set for pip) and nothing of gRPC's own: TensorFlow's and JAX's gRPC would otherwise send
    every call between the job's tasks to that proxy, which cannot reach the nodes (TensorFlow then
    hangs). An empty ``grpc_proxy`` turns the proxy off for every gRPC client of the process and its
    children (pip, curl and other HTTP clients keep it); a user's own ``grpc_proxy`` or
    ``no_grpc_proxy`` wins (``no_grpc_proxy=<the nodes' domain or CIDR>`` keeps a proxy for gRPC
    services outside the cluster).

    >>> grpc_without_proxy({"https_proxy": "http://proxy:3128"}), grpc_without_proxy({})
    ({'grpc_proxy': ''}, {})
    """
    if "grpc_proxy" in variables or "no_grpc_proxy" in variables:
        return {}
    return {"grpc_proxy": ""} if variables.get("https_proxy") or variables.get("http_proxy") else {}


def keep_grpc_off_proxies(environ: dict[str, str] | None = None) -> dict[str, str]:
    """Write `grpc_without_proxy()` of this process's environment (or of ``environ``) into it, before
    a framework makes its first gRPC channel; returns what was written."""
    return export_defaults(grpc_without_proxy(snapshot(environ)), environ)


_warned: list[str] = []


def warn_of_grpc_proxy(what: str, environ: Mapping[str, str] | None = None) -> bool:
    """Say once, in the log, that ``what`` hands addresses to a framework whose gRPC would send its
    calls to an HTTP proxy of this process's environment (or ``environ``), and the fix; whether
    there is such a proxy. It changes nothing: the caller only describes a cluster."""
    if not grpc_without_proxy(snapshot(environ)):
        return False
    if not _warned:
        _warned.append(what)
        logging.getLogger("slurm_resolver").warning(
            "slurm_resolver: %s: https_proxy or http_proxy is set, so TensorFlow's and JAX's gRPC will send "
            "their calls between the job's tasks to that proxy, which cannot reach them (the job hangs); "
            "call slurm_resolver.environment.keep_grpc_off_proxies() first, or export grpc_proxy= in the "
            "job script", what)
    return True
