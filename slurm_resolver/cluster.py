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
from bisect import bisect_right
from dataclasses import dataclass, replace
from functools import cached_property
from itertools import accumulate, chain, repeat
from operator import add
from typing import Any

from . import addresses, launchers, packing, placement, slurmctl
from .cluster_spec import ClusterSpec
from .environment import snapshot
from .errors import ConfigurationError, EnvironmentVariableError, PlacementError, ResolutionError
from .exchange import Exchange, MPIExchange
from .gpus import GpuPlan
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
    gpus: tuple[str, ...] | None = ()
    """GPU ids; None where Slurm bound them on another task and only their count is known."""


class Cluster:
    """The resolved cluster: every task by rank, and which of them the caller is.

    Per-rank columns (``nodes``, ``jobs``, ``indices``, ``local_ranks``) are built on first
    use; a block layout keeps only its nodes and counts, so that :meth:`task` and
    :meth:`spec` cost next to nothing per task.
    """

    def __init__(self, launcher: str, rank: int | None, addresses: Sequence[str],
                 runs: Sequence[tuple[str, int]], *, hosts: Sequence[str] | None = None,
                 block: tuple[Sequence[str], Sequence[int]] | None = None, job_id: str | None = None,
                 mpi: bool = False) -> None:
        if hosts is None and block is None:
            raise ValueError("a Cluster needs hosts per rank or a block layout")
        self.launcher = launcher
        self.rank = rank
        self.addresses = tuple(addresses)
        self.runs = tuple(runs)
        self.job_id = job_id
        self.mpi = mpi
        self.gpu_plan: GpuPlan | None = None
        self._hosts = None if hosts is None else tuple(hosts)
        self._block = block
        self._starts = None if block is None else list(accumulate(block[1], initial=0))

    def __repr__(self) -> str:
        return f"Cluster(launcher={self.launcher!r}, rank={self.rank}, world_size={self.world_size})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Cluster):
            return NotImplemented
        return (self.launcher, self.rank, self.addresses, self.runs, self.nodes) == \
            (other.launcher, other.rank, other.addresses, other.runs, other.nodes)

    __hash__ = None  # type: ignore[assignment]

    @property
    def world_size(self) -> int:
        """Number of tasks."""
        return len(self.addresses)

    def _node_and_local(self, rank: int) -> tuple[str, int]:
        if self._hosts is not None:
            return self._hosts[rank], self.local_ranks[rank]
        assert self._block is not None and self._starts is not None
        position = bisect_right(self._starts, rank) - 1
        return self._block[0][position], rank - self._starts[position]

    @cached_property
    def nodes(self) -> tuple[str, ...]:
        """The node of every rank."""
        if self._hosts is not None:
            return self._hosts
        assert self._block is not None
        return placement.block(*self._block)

    @cached_property
    def local_ranks(self) -> tuple[int, ...]:
        """The index of every rank among the ranks on its node."""
        if self._block is not None:
            return tuple(chain.from_iterable(map(range, self._block[1])))
        return tuple(packing.local_indices(self.nodes))

    @cached_property
    def _assigned(self) -> tuple[list[str], list[int]]:
        return packing.assign(self.runs)

    @property
    def jobs(self) -> tuple[str, ...]:
        """The job name of every rank."""
        return tuple(self._assigned[0])

    @property
    def indices(self) -> tuple[int, ...]:
        """The task index of every rank within its job."""
        return tuple(self._assigned[1])

    def job_of(self, rank: int) -> str:
        """The job name of ``rank``."""
        return self._job_of(rank)[0]

    def _job_of(self, rank: int) -> tuple[str, int]:
        first = 0
        seen: dict[str, int] = {}
        for job, count in self.runs:
            if rank < first + count:
                return job, seen.get(job, 0) + rank - first
            seen[job] = seen.get(job, 0) + count
            first += count
        raise IndexError(rank)

    def task(self, rank: int) -> Task:
        """The task of ``rank``."""
        if not 0 <= rank < self.world_size:
            raise ValueError(f"no rank {rank} in a cluster of {self.world_size} tasks")
        job, index = self._job_of(rank)
        node, local = self._node_and_local(rank)
        gpus = self.gpu_plan.ids(rank) if self.gpu_plan else ()
        return Task(rank, job, index, node, self.addresses[rank], local, gpus)

    def local_group(self, rank: int) -> tuple[str, Sequence[int]]:
        """The node of ``rank`` and every rank on that node, in local-rank order."""
        if self._block is not None and self._starts is not None:
            position = bisect_right(self._starts, rank) - 1
            return self._block[0][position], range(self._starts[position], self._starts[position + 1])
        node = self.nodes[rank]
        return node, [r for r, n in enumerate(self.nodes) if n == node]

    def gpu_count(self, rank: int) -> int:
        """How many GPUs ``rank`` has (exact on the caller's node)."""
        return self.gpu_plan.count(rank) if self.gpu_plan else 0

    @property
    def me(self) -> Task | None:
        """The calling task; None where the caller is not a task (salloc shell)."""
        return None if self.rank is None else self.task(self.rank)

    def rank_of(self, job: str, index: int) -> int:
        """The rank of task ``index`` of ``job``."""
        first = 0
        seen: dict[str, int] = {}
        for name, count in self.runs:
            start = seen.get(name, 0)
            if name == job and isinstance(index, int) and start <= index < start + count:
                return first + index - start
            seen[name] = start + count
            first += count
        self.spec().task_address(job, index)  # ValueError naming what exists
        raise ValueError(f"No task with index {index!r} in job {job!r}")  # pragma: no cover

    def spec(self) -> ClusterSpec:
        """The ClusterSpec: job names to addresses in task order."""
        grouped: dict[str, list[str]] = {}
        first = 0
        for job, count in self.runs:
            grouped.setdefault(job, []).extend(self.addresses[first:first + count])
            first += count
        return ClusterSpec._trusted(grouped)

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
    nodes = list(launch.nodes) or [launch.node or "localhost"]
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
    if launch.world_size is not None and sum(counts) != launch.world_size:
        raise ConfigurationError(
            f"tasks_per_node={tasks_per_node!r} places {sum(counts)} tasks, but the job has {launch.world_size}",
            "leave tasks_per_node unset to use Slurm's layout, or make it add up")
    return replace(launch, nodes=tuple(nodes), counts=tuple(counts), distribution="block")


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
        return _assemble(launch, ("localhost",), 0, {"localhost": "localhost"}, jobs, port_base)
    rank = launch.rank
    nodes = launch.nodes
    block = launch.world_size is not None and _block_layout(launch, launch.world_size)
    hosts_or_none: Sequence[str] | None = None if block else placement.compute(launch)
    own = launch.node or (hostname().split(".")[0] if launch.launcher != "salloc" else None)
    hosts: Sequence[str] | None = None
    if block or hosts_or_none is not None:
        hosts = hosts_or_none
        placement.check_own(launch, hosts)
        probe = own if own in nodes else nodes[0]
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
        nodes = tuple(dict.fromkeys(hosts))  # the exchange named the nodes; the launch may not have
    node_address = addresses.address_map(nodes, checked, node_addresses)
    return _assemble(launch, hosts, rank, node_address, jobs, port_base)


def _block_layout(launch: Launch, world_size: int) -> bool:
    """Whether the ranks fill the launch's nodes in order (no per-rank host list needed)."""
    return launch.distribution == "block" and bool(launch.counts) and sum(launch.counts) == world_size \
        and len(set(launch.nodes)) == len(launch.counts)


def _assemble(launch: Launch, hosts: Sequence[str] | None, rank: int | None, node_address: Mapping[str, str],
              jobs: Jobs, port_base: int) -> Cluster:
    """The cluster; a block layout takes a bulk path with no per-task Python work."""
    world_size = len(hosts) if hosts is not None else sum(launch.counts)
    if rank is not None and not 0 <= rank < world_size:
        raise EnvironmentVariableError("rank", str(rank), f"a rank below the job's {world_size} tasks")
    job_runs = packing.runs(jobs, world_size, launch.components)
    if hosts is None or _block_layout(launch, world_size):
        counts = launch.counts
        most = max(counts)
        packing.check_port_base(port_base, most)
        suffixes = [f":{port_base + i}" for i in range(most)]
        node_addrs = list(map(node_address.__getitem__, launch.nodes))
        if min(counts) == most:  # uniform: one C-level pass per local index
            addresses: list[str] = [""] * world_size
            for i, suffix in enumerate(suffixes):
                addresses[i::most] = list(map(add, node_addrs, repeat(suffix, len(node_addrs))))
        else:
            addresses = [a + p for a, c in zip(node_addrs, counts) for p in suffixes[:c]]
        return Cluster(launch.launcher, rank, addresses, job_runs, block=(launch.nodes, counts),
                       job_id=launch.job_id, mpi=launch.mpi)
    local = packing.local_indices(hosts)
    packing.check_port_base(port_base, max(local) + 1)
    addresses = [f"{node_address[h]}:{port_base + i}" for h, i in zip(hosts, local)]
    return Cluster(launch.launcher, rank, addresses, job_runs, hosts=hosts, job_id=launch.job_id, mpi=launch.mpi)
