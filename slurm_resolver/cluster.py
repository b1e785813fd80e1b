"""Resolution: from an environment snapshot to the whole cluster and the calling task.

:func:`resolve` runs the pipeline once (launcher, placement, addresses, packing, ports)
and returns a frozen :class:`Cluster`. Precedence of every setting, in one place:
explicit argument > ``SLURM_RESOLVER_*`` variable > default. The cluster is kept as
columns (one tuple per attribute, indexed by rank) so that a 16,384-task job resolves in
about a millisecond.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from . import addresses, launchers, packing, placement, slurmctl
from .cluster_spec import ClusterSpec
from .environment import snapshot
from .errors import ConfigurationError, EnvironmentVariableError, PlacementError, ResolutionError
from .exchange import Exchange, MPIExchange
from .launchers.base import Launch
from .parsing import parse_jobs, read_int

__all__ = ["Task", "Cluster", "resolve"]

log = logging.getLogger("slurm_resolver")

Jobs = Mapping[str, int] | Sequence[str] | None


@dataclass(frozen=True)
class Task:
    """One task of the cluster."""

    rank: int
    job: str
    index: int
    node: str
    address: str
    local_rank: int
    gpus: tuple[str, ...] = ()


@dataclass(frozen=True)
class Cluster:
    """The resolved cluster: every task by rank, and which of them the caller is."""

    launcher: str
    rank: int | None
    nodes: tuple[str, ...]
    jobs: tuple[str, ...]
    indices: tuple[int, ...]
    addresses: tuple[str, ...]
    local_ranks: tuple[int, ...]
    gpus: Mapping[int, tuple[str, ...]] = field(default_factory=dict)
    job_id: str | None = None

    @property
    def world_size(self) -> int:
        """Number of tasks."""
        return len(self.nodes)

    def task(self, rank: int) -> Task:
        """The task of ``rank``."""
        return Task(rank, self.jobs[rank], self.indices[rank], self.nodes[rank], self.addresses[rank],
                    self.local_ranks[rank], tuple(self.gpus.get(rank, ())))

    @property
    def me(self) -> Task | None:
        """The calling task; None where the caller is not a task (salloc shell)."""
        return None if self.rank is None else self.task(self.rank)

    def rank_of(self, job: str, index: int) -> int:
        """The rank of task ``index`` of ``job``."""
        for rank, (j, i) in enumerate(zip(self.jobs, self.indices)):
            if j == job and i == index:
                return rank
        self.spec().task_address(job, index)  # ValueError naming what exists
        raise ValueError(f"No task with index {index!r} in job {job!r}")  # pragma: no cover

    def spec(self) -> ClusterSpec:
        """The ClusterSpec: job names to addresses in task order."""
        grouped: dict[str, list[str]] = {}
        for job, address in zip(self.jobs, self.addresses):
            grouped.setdefault(job, []).append(address)
        return ClusterSpec(grouped)

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
            "gpus": list(me.gpus) if me else [],
            "launcher": self.launcher,
        }


def _setting(name: str, explicit: Any, env: Mapping[str, str], variable: str,
             parse: Callable[[str], Any], default: Any) -> Any:
    """Explicit argument > ``variable`` in the environment > default; logged at DEBUG."""
    if explicit is not None:
        log.debug("%s=%r (argument)", name, explicit)
        return explicit
    if env.get(variable) is not None:
        value = parse(env[variable])
        log.debug("%s=%r (from %s)", name, value, variable)
        return value
    log.debug("%s=%r (default)", name, default)
    return default


def _override_layout(launch: Launch, tasks_per_node: int | Mapping[str, int]) -> Launch:
    nodes = [node for node, _ in launch.layout] or [launch.node or "localhost"]
    if isinstance(tasks_per_node, Mapping):
        unknown = set(tasks_per_node) - set(nodes)
        if unknown:
            raise ConfigurationError(f"tasks_per_node names nodes not in the job: {sorted(unknown)}",
                                     f"the job's nodes are {nodes}")
        counts = [int(tasks_per_node.get(n, 0)) for n in nodes]
    elif isinstance(tasks_per_node, int) and not isinstance(tasks_per_node, bool) and tasks_per_node > 0:
        counts = [tasks_per_node] * len(nodes)
    else:
        raise ConfigurationError(f"tasks_per_node={tasks_per_node!r} must be a count > 0 or a {{node: count}} dict")
    layout = tuple(zip(nodes, counts))
    if launch.world_size is not None and sum(counts) != launch.world_size:
        raise ConfigurationError(
            f"tasks_per_node={tasks_per_node!r} places {sum(counts)} tasks, but the job has {launch.world_size}",
            "leave tasks_per_node unset to use Slurm's layout, or make it add up")
    return replace(launch, layout=layout, distribution="block")


def _exchange(launch: Launch, mode: str | Exchange, timeout: float) -> Exchange | None:
    if not isinstance(mode, str):
        return mode
    if mode not in ("auto", "mpi", "none"):
        raise ConfigurationError(f"exchange={mode!r} is not known", "use 'auto', 'mpi' or 'none'")
    if mode == "mpi" or (mode == "auto" and launch.mpi):
        return MPIExchange(timeout=timeout)
    return None


def _placement_error(launch: Launch) -> PlacementError:
    return PlacementError(
        f"the {launch.launcher} launch with distribution {launch.distribution!r} does not tell which "
        "node each rank runs on, and no exchange between the ranks is available",
        "launch with srun --mpi=pmix (or pmi2) or mpirun so that ranks exchange their nodes "
        "through MPI, or use srun's default block distribution",
    )


def resolve(
    environ: Mapping[str, str] | None = None,
    *,
    jobs: Jobs = None,
    port_base: int | None = None,
    tasks_per_node: int | Mapping[str, int] | None = None,
    exchange: str | Exchange | None = None,
    timeout: float = 60.0,
    resolves: Callable[[str], bool] = addresses.resolves,
    node_addresses: Callable[[Sequence[str]], Mapping[str, str]] = slurmctl.node_addresses,
    hostname: Callable[[], str] = socket.gethostname,
) -> Cluster:
    """Resolve the cluster from ``environ`` (``os.environ`` by default).

    Args:
        jobs: ``{'ps': 1, 'worker': 3}`` (TensorFlow's packing), a list of job names
            (one per het component), or None for every task a ``worker``.
        port_base: first port of each node (default 8888); a node's tasks take
            consecutive ports.
        tasks_per_node: overrides Slurm's tasks per node (a count or ``{node: count}``).
        exchange: ``'auto'`` (MPI when an MPI launcher runs the ranks), ``'mpi'``,
            ``'none'``, or an :class:`~slurm_resolver.exchange.Exchange`.
        timeout: seconds an exchange may wait for the other ranks.
        resolves, node_addresses, hostname: seams for tests.
    """
    env = snapshot(environ)
    jobs = _setting("jobs", jobs, env, "SLURM_RESOLVER_JOBS",
                    lambda t: parse_jobs(t, "SLURM_RESOLVER_JOBS"), None)
    port_base = _setting("port_base", port_base, env, "SLURM_RESOLVER_PORT_BASE",
                         lambda _: read_int(env, "SLURM_RESOLVER_PORT_BASE", 1), 8888)
    mode = _setting("exchange", exchange, env, "SLURM_RESOLVER_EXCHANGE", str, "auto")
    launch = launchers.resolve(env)
    log.debug("launcher %s: %s", launch.launcher, launch)
    if tasks_per_node is not None:
        launch = _override_layout(launch, tasks_per_node)
    if launch.launcher == "single" and tasks_per_node is None:
        hosts: tuple[str, ...] = ("localhost",)
        return _assemble(launch, hosts, 0, {"localhost": "localhost"}, jobs, port_base)
    hosts_or_none = placement.compute(launch)
    rank = launch.rank
    own = launch.node or (hostname().split(".")[0] if launch.launcher != "salloc" else None)
    if hosts_or_none is not None:
        hosts = hosts_or_none
        placement.check_own(hosts, launch)
        probe = own if own in hosts else hosts[0]
        checked = {probe: resolves(probe)}
    else:
        group = _exchange(launch, mode, timeout)
        if group is None or own is None:
            raise _placement_error(launch)
        gathered = group.allgather([own, resolves(own)])
        hosts = tuple(str(g[0]) for g in gathered)
        checked = {str(g[0]): bool(g[1]) for g in gathered}
        for what, mine, theirs in (("rank", launch.rank, group.rank), ("size", launch.world_size, group.size)):
            if mine is not None and mine != theirs:
                raise ResolutionError(f"the launcher's {what} {mine} differs from the exchange's {theirs}",
                                      "run one process per rank of the launcher")
        rank = group.rank
    node_address = addresses.address_map(hosts, checked, node_addresses)
    return _assemble(launch, hosts, rank, node_address, jobs, port_base)


def _assemble(launch: Launch, hosts: tuple[str, ...], rank: int | None, node_address: Mapping[str, str],
              jobs: Jobs, port_base: int) -> Cluster:
    assigned = packing.assign(jobs, len(hosts), launch.components)
    ports = packing.ports(hosts, port_base)
    local = tuple(p - port_base for p in ports)
    if rank is not None and not 0 <= rank < len(hosts):
        raise EnvironmentVariableError("rank", str(rank), f"a rank below the job's {len(hosts)} tasks")
    return Cluster(
        launcher=launch.launcher,
        rank=rank,
        nodes=hosts,
        jobs=tuple(j for j, _ in assigned),
        indices=tuple(i for _, i in assigned),
        addresses=tuple(f"{node_address[h]}:{p}" for h, p in zip(hosts, ports)),
        local_ranks=local,
        job_id=launch.job_id,
    )
