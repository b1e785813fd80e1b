"""Resolution: from an environment snapshot to the complete, frozen cluster, in one pass.

[`resolve()`][slurm_resolver.resolution.resolve] takes one snapshot of the environment and goes down once: settings
(explicit argument > ``SLURM_RESOLVER_*`` variable > default, in `_setting()`), the
launch, the placement of every rank (computed; or learned from every task's node, through
MPI where it initialises, else a rendezvous of the step's tasks), the packing into jobs,
the GPUs, the addresses. Out comes one frozen [`Cluster`][slurm_resolver.cluster.Cluster].
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from . import addresses, launchers, placement
from .cluster import DEFAULT_PORT_BASE, Cluster
from .environment import snapshot
from .errors import (
    ConfigurationError,
    EnvironmentVariableError,
    PlacementError,
    ResolutionError,
    raised_from_public_call,
)
from .exchange import Exchange, ExchangeMode, mpi_exchange, parse_mode
from .gpus import SOURCES, GpuPlan, Visible, local, visible
from .launchers.base import Launch
from .layout import BLOCK
from .packing import Jobs, check_port_base, pack
from .parsing import parse_jobs, read_int
from .placement import Placement

__all__ = ["resolve"]

log = logging.getLogger("slurm_resolver")


def _setting(name: str, explicit: Any, env: Mapping[str, str], variable: str,
             parse: Callable[[str], Any], default: Any, shown: Callable[[Any], str] = str) -> Any:
    """Explicit argument > ``variable`` in the environment > default; said at DEBUG in one line, the
    value as ``shown`` spells it and where it came from (an unset one: what ``shown`` says that means)."""
    if explicit is not None:
        value, source = explicit, "argument"
    elif env.get(variable) is not None:
        value, source = parse(env[variable]), variable
    else:
        value, source = default, "default"
    log.debug("%s: %s%s", name, shown(value), "" if value is None else f" ({source})")
    return value


def _shown_jobs(jobs: Jobs) -> str:
    """``jobs`` as the command line and ``SLURM_RESOLVER_JOBS`` spell them.

    >>> _shown_jobs({"ps": 1, "worker": 2}), _shown_jobs(["ps", "worker"]), _shown_jobs(None)
    ('ps=1,worker=2', 'ps,worker (one job per het component)', "not set (one job 'worker')")
    """
    if jobs is None:
        return "not set (one job 'worker')"
    if isinstance(jobs, Mapping):
        return ",".join(f"{name}={count}" for name, count in jobs.items())
    if isinstance(jobs, str):
        return jobs
    return f"{','.join(map(str, jobs))} (one job per het component)"


def _shown_exchange(mode: str | ExchangeMode | Exchange) -> str:
    """An exchange mode by its name, an `Exchange` given by its class.

    >>> _shown_exchange("auto"), _shown_exchange(ExchangeMode.MPI)
    ('auto', 'mpi')
    """
    if isinstance(mode, ExchangeMode):
        return mode.value
    return mode if isinstance(mode, str) else f"an exchange of its own ({type(mode).__name__})"


def _launch_line(launch: Launch) -> str:
    """The launch as ``-v`` says it, in one line.

    >>> from slurm_resolver.launchers.base import Launch
    >>> _launch_line(Launch(launcher="srun", world_size=4, rank=3, local_rank=0, node="node2", nodes=("node1", "node2"),
    ...                     counts=(3, 1)))
    'launcher srun: rank 3 of 4 on node2 (local rank 0); 2 nodes, distribution block'
    >>> _launch_line(Launch(launcher="salloc", world_size=4, rank=None, nodes=("node1", "node2"), counts=(2, 2)))
    'launcher salloc: no task of its own; 4 tasks on 2 nodes, distribution block'
    """
    nodes = f"{len(launch.nodes)} node{'s' * (len(launch.nodes) != 1)}"
    if launch.rank is None:
        tasks = "" if launch.world_size is None else f"{launch.world_size} tasks on "
        return f"launcher {launch.launcher}: no task of its own; {tasks}{nodes}, distribution {launch.distribution}"
    place = f"rank {launch.rank}" + ("" if launch.world_size is None else f" of {launch.world_size}")
    place += "" if launch.node is None else f" on {launch.node}"
    place += "" if launch.local_rank is None else f" (local rank {launch.local_rank})"
    return f"launcher {launch.launcher}: {place}; {nodes}, distribution {launch.distribution}"


def _override_layout(launch: Launch, tasks_per_node: int | Mapping[str, int]) -> Launch:
    if isinstance(tasks_per_node, Mapping) and not launch.nodes:
        nodes = list(tasks_per_node)  # {node: count} names the nodes where no node list does
    elif "SLURM_STEP_NODELIST" in launch.missing:
        return launch  # a count names no node: _check_complete() says what is missing
    else:
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
    if launch.rank is not None and launch.rank >= sum(counts):
        raise ConfigurationError(
            f"tasks_per_node={tasks_per_node!r} places {sum(counts)} tasks, but this task's rank is {launch.rank}",
            "leave tasks_per_node unset to use the launcher's layout, or give it room for every rank")
    keep = [(n, c) for n, c in zip(nodes, counts) if c]
    return replace(launch, nodes=tuple(n for n, _ in keep), counts=tuple(c for _, c in keep),
                   distribution=BLOCK, world_size=sum(counts), missing=())


def _check_complete(launch: Launch) -> None:
    """Refuse a launch that lacks a variable no argument stood in for, naming it and the stand-in."""
    if not launch.missing:
        return
    if launch.missing[0] == "SLURM_STEP_NODELIST":
        raise EnvironmentVariableError(
            "SLURM_STEP_NODELIST", None, f"the step's nodes, since SLURM_PROCID={launch.rank} is set: this process "
            "is a task of an srun step", "run the task under srun, which sets it, or pass tasks_per_node="
            "{node: tasks}, which names the nodes")
    told = f"SLURM_STEP_NUM_TASKS={launch.world_size} tasks" if launch.world_size is not None else "the tasks"
    raise EnvironmentVariableError(
        launch.missing[0], None, f"the tasks on each node: {told} on {len(launch.nodes)} nodes "
        "can be laid out in several ways", "run the task under srun, which sets it, or pass tasks_per_node=N "
        "(tasks on every node) or tasks_per_node={node: tasks}")


def _placement_error(launch: Launch) -> PlacementError:
    if launch.below:
        return PlacementError(
            f"{placement.unknown(launch)}: which node runs which ranks is not in the environment, and this "
            "process cannot learn it from the other workers here (exchange='none')",
            "resolve in every worker at once, which learn it from each other: slurm_resolver.bootstrap(), "
            "SlurmClusterResolver() in each worker, or `slurm-resolver bootstrap -- CMD`")
    if launch.groups:
        mixed = next(c for c, g in enumerate(launch.groups) if len(g) > 1 and max(launch.counts[p] for p in g) > 1)
        group = launch.groups[mixed]
        layout = placement.describe([(launch.nodes[p], launch.counts[p]) for p in group])
        return PlacementError(
            f"het component {mixed} of this step runs several tasks on each of its nodes ({layout}), laid out with a "
            f"distribution the environment does not tell (SLURM_DISTRIBUTION={str(launch.distribution)!r} is the "
            "step's, not the component's), and this process cannot learn it from the step's other tasks",
            "resolve in every task of the step, which learn the layout from each other: slurm_resolver.bootstrap(), "
            "SlurmClusterResolver() in each task, or `slurm-resolver bootstrap -- CMD`; or give each component one "
            "node, or one task per node")
    if launch.mpi_launched:
        return PlacementError(
            f"the {launch.launcher} launch (ranks started by mpirun or mpiexec) does not tell which node "
            "each rank runs on, and no exchange between the ranks is available",
            "let the ranks exchange their nodes through MPI: exchange='auto' or 'mpi' (the default), with "
            "mpi4py installed (pip install 'slurm_resolver[mpi]')")
    if launch.arbitrary:
        return PlacementError(
            f"the {launch.launcher} launch with distribution 'arbitrary' does not tell which node each rank runs "
            "on: this task cannot read its host file (SLURM_HOSTFILE), and cannot learn the layout from the "
            "other tasks here (exchange='none', or no SLURM_NODEID and SLURM_GTIDS)",
            "make SLURM_HOSTFILE readable by every task (a shared file system), or let the tasks learn the "
            "layout from each other (exchange='auto', in every task of the step)")
    return PlacementError(
        f"the {launch.launcher} launch with distribution {str(launch.distribution)!r} does not tell which node each "
        "rank runs on, and no exchange between the ranks is available",
        "launch with srun --mpi=pmix so that ranks exchange their nodes through MPI, or use srun's block, "
        "cyclic or plane distribution",
    )


def _exchanged(launch: Launch, group: Exchange, own: str, resolves: Callable[[str], bool]
               ) -> tuple[int, Placement, dict[str, bool]]:
    """Rank, placement and name checks learned from every rank through ``group``."""
    gathered = group.allgather([own, resolves(own)])
    hosts = tuple(str(g[0]) for g in gathered)
    for what, mine, theirs in (("rank", launch.rank, group.rank), ("size", launch.world_size, group.size)):
        if mine is not None and mine != theirs:
            raise ResolutionError(f"the launcher's {what} {mine} differs from the exchange's {theirs}",
                                  "run one process per rank of the launcher")
    return group.rank, Placement.from_hosts(hosts), {str(g[0]): bool(g[1]) for g in gathered}


@raised_from_public_call
def resolve(
    environ: Mapping[str, str] | None = None,
    *,
    jobs: Jobs = None,
    port_base: int | None = None,
    tasks_per_node: int | Mapping[str, int] | None = None,
    gpus_per_task: int | Mapping[str, int] | None = None,
    gpus_per_node: int | None = None,
    exchange: str | ExchangeMode | Exchange | None = None,
    timeout: float = 60.0,
    resolves: Callable[[str], bool] | None = None,
    node_addresses: Callable[[Sequence[str]], Mapping[str, str]] | None = None,
    hostname: Callable[[], str] = socket.gethostname,
    gpu_devices: Callable[[], Sequence[str] | None] | None = None,
) -> Cluster:
    """Resolve the cluster from ``environ`` (``os.environ`` by default), in one pass.

    Args:
        jobs: ``{'ps': 1, 'worker': 3}`` (TensorFlow's packing), a list of job names
            (one per het component), or None for every task a ``worker``.
        port_base: first port of each node (default 8888); a node's tasks take
            consecutive ports.
        tasks_per_node: overrides Slurm's tasks per node (a count or ``{node: count}``).
        gpus_per_task: GPUs of each task, a count or per job (``{'ps': 0}``); default an
            even split of the node's GPUs.
        gpus_per_node: GPUs of each node to use (default: all the task can see).
        exchange: one of [`MODES`][slurm_resolver.exchange.MODES], or an
            [`Exchange`][slurm_resolver.exchange.Exchange]; used only where the environment
            does not place every rank.
        timeout: seconds an exchange may wait for the other ranks.
        resolves: seam for tests: whether a name resolves (``getaddrinfo``).
        node_addresses: seam for tests: Slurm's ``NodeAddr`` of nodes (``scontrol``).
        hostname: seam for tests: this host's name.
        gpu_devices: seam for tests: NVML's device ids.

    Resolution opens no socket. A heterogeneous step whose components run several tasks on
    each of several nodes is laid out with distributions the environment does not tell:
    under MPI the ranks exchange their nodes here; otherwise the cluster is returned
    provisional (``placement.exact`` false: this task's node exact), and the layout is
    learned from the other tasks by ``bootstrap()`` in its own exchange, or by
    `slurm_resolver.rpc.learn.learn_layout()` (which ``SlurmClusterResolver`` calls);
    ``exchange='none'`` refuses instead.
    """
    env = snapshot(environ)
    resolves = resolves or addresses.resolves
    jobs = _setting("jobs", jobs, env, "SLURM_RESOLVER_JOBS", lambda t: parse_jobs(t, "SLURM_RESOLVER_JOBS"), None,
                    _shown_jobs)
    port_base = _setting("port_base", port_base, env, "SLURM_RESOLVER_PORT_BASE",
                         lambda _: read_int(env, "SLURM_RESOLVER_PORT_BASE", 1), DEFAULT_PORT_BASE)
    source = "SLURM_RESOLVER_EXCHANGE" if exchange is None and "SLURM_RESOLVER_EXCHANGE" in env else "exchange"
    mode = parse_mode(_setting("exchange", exchange, env, "SLURM_RESOLVER_EXCHANGE", str, "auto", _shown_exchange),
                      source)
    launch = launchers.launch_of(env)
    log.debug("%s", _launch_line(launch))
    if tasks_per_node is not None:
        launch = _override_layout(launch, tasks_per_node)
    _check_complete(launch)
    rank = launch.rank
    own = launch.node or (hostname().split(".")[0] if rank is not None else None)
    computed = placement.compute(launch)
    if computed is not None:
        placement.check_own(launch, computed)  # a task's node is the one computed for its rank: one of the nodes
        probe = launch.node if launch.node is not None and rank is not None else \
            own if own in launch.nodes else launch.nodes[0]
        checked = {probe: resolves(probe)}
        where = computed
    else:
        group = mpi_exchange(launch, mode, timeout)
        learnable = placement.provisional(launch)
        if group is not None and own is not None:
            rank, where, checked = _exchanged(launch, group, own, resolves)
        elif learnable is not None and mode is not ExchangeMode.NONE and launch.is_task:
            placement.check_own(launch, learnable)  # this node's ranks are Slurm's: the rest is learned below
            checked = {str(launch.node): resolves(str(launch.node))}
            where = learnable
        else:
            raise _placement_error(launch)
    if rank is not None and not 0 <= rank < where.world_size:
        raise EnvironmentVariableError("rank", str(rank), f"a rank below the job's {where.world_size} tasks")
    packing = pack(jobs, where.world_size, launch.components, alone=launch.standalone)
    check_port_base(port_base, where.most)
    hosts = addresses.address_map(where.nodes, checked, node_addresses or _ask_slurm)
    plan = GpuPlan(_visible_gpus(env, gpu_devices, launch), rank, where, packing, gpus_per_task, gpus_per_node)
    return Cluster(launch, rank, where, packing, hosts, port_base, plan)


def _ask_slurm(names: Sequence[str]) -> Mapping[str, str]:
    """Slurm's ``NodeAddr`` of ``names``, asked only where a name does not resolve: the seam to
    Slurm's commands (subprocess, shutil, a thread pool) loads then, not in every task's start."""
    from .slurmctl import node_addresses

    return node_addresses(names)


def _visible_gpus(env: Mapping[str, str], gpu_devices: Callable[[], Sequence[str] | None] | None,
                  launch: Launch) -> Visible | Callable[[], Visible]:
    """What the task sees from its variables; where none names GPUs, NVML is asked on first use.
    GPUs Slurm bound to the task of a launcher's agent are its node's, which its workers share."""
    if not any(name in env for name in SOURCES):
        return lambda: local(env, gpu_devices)
    seen = visible(env)
    return replace(seen, bound=False) if launch.below and seen.bound else seen
