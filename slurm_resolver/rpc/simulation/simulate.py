"""Many tasks of one launch bootstrapping in one process, through the real protocol code.

Each simulated task is a coroutine that runs
`bootstrap_async()` (what ``bootstrap()`` runs on its
task's event loop) with its own view of one resolved srun step, all on one event loop and
one `LocalNetwork`: the same rounds, messages, checks and
deadlines as a real job, without a process or a socket per task. The network counts
what every server handled, so the bootstrap's bounds can be checked at any size.
Resolution itself runs once (it is measured by ``benchmarks/resolve.py``).
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from ...cluster import Cluster
from ...environment import snapshot
from ...errors import SlurmResolverError
from ...exchange import ExchangeMode
from ...resolution import resolve
from ..bootstrap import bootstrap_async
from ..bootstrapped import Bootstrapped
from ..network.in_process import LocalNetwork
from ..options import BootstrapOptions
from ..tree import DEFAULT_FANOUT, ONCE, Verify

__all__ = ["Simulation", "simulate", "srun_environ"]


def srun_environ(nodes: int, tasks_per_node: int, rank: int = 0, job_id: str = "4242") -> dict[str, str]:
    """The variables of task ``rank`` of ``srun -N<nodes> --ntasks-per-node=<tasks_per_node>``."""
    total = nodes * tasks_per_node
    hostlist = f"node[1-{nodes}]" if nodes > 1 else "node1"
    return {
        "SLURM_JOB_ID": job_id, "SLURM_STEP_ID": "0", "SLURM_PROCID": str(rank),
        "SLURM_LOCALID": str(rank % tasks_per_node), "SLURM_NODEID": str(rank // tasks_per_node),
        "SLURMD_NODENAME": f"node{rank // tasks_per_node + 1}", "SLURM_STEP_NUM_TASKS": str(total),
        "SLURM_STEP_NODELIST": hostlist, "SLURM_JOB_NODELIST": hostlist,
        "SLURM_STEP_TASKS_PER_NODE": f"{tasks_per_node}(x{nodes})",
        "SLURM_TASKS_PER_NODE": f"{tasks_per_node}(x{nodes})",
        "SLURM_DISTRIBUTION": "block", "CUDA_VISIBLE_DEVICES": "",
    }


@dataclass
class Simulation:
    """What a simulated bootstrap did."""

    ranks: int
    wall_s: float
    ok: bool
    errors: dict[int, str] = field(default_factory=dict)
    """The first few tasks' errors, by rank (at most 8 kept; ``failed`` counts them all)."""
    failed: int = 0
    max_bytes_sent_by_one_server: int = 0
    max_bytes_received_by_one_server: int = 0
    max_connections_one_server: int = 0
    max_calls_one_server: int = 0
    largest_message: int = 0
    cpu_s: float = 0.0
    """CPU seconds the run took (every process of a run over gRPC)."""
    held_s: float = 0.0
    """Seconds failure detection ran once every task watched (runs over gRPC with a heartbeat)."""
    armed_s: float = 0.0
    """Seconds from every task's bootstrap until every task watched (its watch call made and answered, every
    leader called by all below it), in the slowest process: when the hold began."""
    held_cpu_s: float = 0.0
    """CPU seconds of the living processes in ``counted_s`` of those ``held_s``: what failure detection costs while
    the job runs."""
    counted_s: float = 0.0
    """The seconds of the hold whose CPU is counted: all but its first (`settling`)."""
    armed_cpu_s: float = 0.0
    """CPU seconds of every process from its own tasks' bootstrap until the hold's counted seconds begin (answering
    the others' bootstrap, making its watch calls, the hold's first seconds): once a job, not a second."""
    first_death_s: float | None = None
    """Seconds from every task's bootstrap to the first death any task heard of (negative: before it), or None."""
    dead: list[int] = field(default_factory=list)
    """The ranks declared dead while failure detection ran: with every task alive, none."""
    first_deaths: list[tuple[float, int, int, str]] = field(default_factory=list)
    """The first deaths heard (at most 4): when (seconds since the epoch), by which task, of which, and why."""
    killed: list[int] = field(default_factory=list)
    """The ranks whose process was ended on purpose while it ran. ``dead`` may name no other; it names
    the killed tasks that a living task watched (a node's leader for its node), not those watched
    only by tasks killed with them, except where they stopped (``stop``): a node's other tasks are then
    found silent by the node above too."""
    heard_s: float = 0.0
    """Seconds from that process's end until the last living task heard of a death."""
    heard_median_s: float = 0.0
    """... until half the living tasks had."""
    unheard: int = 0
    """Living tasks that never heard of one."""
    unwatching: int = 0
    """Living tasks that watched on no task above at the hold's end, or whose call there was not yet taken (rank 0
    aside, the top of the tree): cut off from failure detection, with every task below them."""
    known: list[int] = field(default_factory=list, repr=False)
    """How many deaths each living task knew of at the hold's end (of ``len(dead)`` declared), fewest first."""
    stacks_s: float = 0.0
    """With stacks asked (``over_grpc(stacks=True)``): seconds rank 0 took to gather the job's stacks."""
    stacks_answered: int = 0
    """How many tasks answered them."""
    stacks_bytes: int = 0
    """The size of the merged answer."""
    results: list[Bootstrapped | None] = field(default_factory=list, repr=False)

    def summary(self) -> dict[str, Any]:
        """The numbers, for ``--json``."""
        return {"ranks": self.ranks, "wall_s": round(self.wall_s, 3), "ok": self.ok, "failed": self.failed,
                "max_bytes_sent_by_one_server": self.max_bytes_sent_by_one_server,
                "max_bytes_received_by_one_server": self.max_bytes_received_by_one_server,
                "max_connections_one_server": self.max_connections_one_server,
                "max_calls_one_server": self.max_calls_one_server, "largest_message": self.largest_message,
                "cpu_s": round(self.cpu_s, 2),
                **({"held_s": self.held_s, "deaths": len(self.dead),
                    "held_cpu_ms_per_rank_second": round(1000 * self.held_cpu_s / max(1, self.ranks - len(self.killed))
                                                         / (self.counted_s or self.held_s), 3),
                    "armed_cpu_ms_per_rank": round(1000 * self.armed_cpu_s / self.ranks, 3),
                    "armed_s": round(self.armed_s, 3),
                    **({"first_death_s": round(self.first_death_s, 3)} if self.first_death_s is not None else {})}
                   if self.held_s else {}),
                **({"killed": len(self.killed), "declared_dead_but_alive": len(set(self.dead) - set(self.killed)),
                    "last_heard_s": round(self.heard_s, 3), "median_heard_s": round(self.heard_median_s, 3),
                    "never_heard": self.unheard, "watching_nobody": self.unwatching,
                    "deaths_known_fewest": self.known[0] if self.known else 0,
                    "deaths_known_median": self.known[len(self.known) // 2] if self.known else 0}
                   if self.killed else {}),
                **({"stacks_s": round(self.stacks_s, 3), "stacks_answered": self.stacks_answered,
                    "stacks_bytes": self.stacks_bytes} if self.stacks_answered else {})}


async def _run_all(base: Cluster, options: BootstrapOptions, network: LocalNetwork, results: list[Bootstrapped | None],
                   errors: dict[int, str], ranks: Iterable[int]) -> None:
    """Every task of ``ranks`` bootstrapped at once, each on its own asyncio task: its result in ``results``,
    or its error in ``errors``; an exception that is not the bootstrap's is raised (as `asyncio.gather` would).

    Each task's coroutine is the bootstrap's own, with nothing of the simulation's above it: no wrapper
    coroutine and no gather keep a frame or a record per task while hundreds of thousands of tasks wait
    (a few hundred bytes a task that a real task does not hold either)."""
    loop = asyncio.get_running_loop()
    everyone_done: asyncio.Future[None] = loop.create_future()
    running: dict[asyncio.Task[Bootstrapped], int] = {}  # each task's rank (a dict's entry: a third of a partial)

    def done(finished: asyncio.Task[Bootstrapped]) -> None:
        rank = running.pop(finished)
        if everyone_done.done():
            return
        if finished.cancelled():
            everyone_done.cancel()
        elif (exc := finished.exception()) is None:
            results[rank] = finished.result()
        elif isinstance(exc, SlurmResolverError):
            errors[rank] = str(exc)
        else:
            everyone_done.set_exception(exc)
        if not running and not everyone_done.done():
            everyone_done.set_result(None)

    environ = snapshot({})  # no variable: each task's view is base's; one snapshot for all (184 bytes a task)
    for rank in ranks:
        started = loop.create_task(bootstrap_async(base.as_rank(rank), options, environ=environ, network=network))
        running[started] = rank
        started.add_done_callback(done)
    if running:
        await everyone_done


def simulate(nodes: int, tasks_per_node: int, *, timeout: float = 60.0, fanout: int = DEFAULT_FANOUT,
             absent: Collection[int] = (), verify: Verify | str | int = ONCE, keep: bool = False,
             cluster: Cluster | None = None, heartbeat: float | None = None) -> Simulation:
    """Bootstrap every task of an ``nodes`` x ``tasks_per_node`` srun step in this process.

    Args:
        absent: ranks that never start (their peers must name them within ``timeout``).
        keep: keep every task's `Bootstrapped` in ``results`` (their event loop
            has ended: use them as values).
        cluster: the resolved cluster (default: resolved once from `srun_environ()`).
        heartbeat: failure detection after the bootstrap (off by default: the simulation
            measures the bootstrap).
    """
    base = cluster or resolve(srun_environ(nodes, tasks_per_node), resolves=lambda name: True)
    total = base.world_size
    network = LocalNetwork()
    results: list[Bootstrapped | None] = [None] * total
    errors: dict[int, str] = {}

    options = BootstrapOptions(exchange=ExchangeMode.RENDEZVOUS, timeout=timeout, verify=Verify.parse(verify),
                               fanout=fanout, heartbeat=heartbeat)

    async def every_task() -> float:
        start = time.perf_counter()
        await _run_all(base, options, network, results, errors, (r for r in range(total) if r not in absent))
        wall = time.perf_counter() - start
        if not keep:
            await asyncio.gather(*(r.aio.stop(0) for r in results if r is not None))
        return wall

    # The cyclic collector is paused while the tasks run: a real task holds a few thousand
    # objects, while 16,384 tasks in one process hold millions, and the collector's full
    # passes over them would cost more than the bootstrap itself (quadratically so).
    collecting = gc.isenabled()
    gc.disable()
    try:
        wall = asyncio.run(every_task())
    finally:
        if collecting:
            gc.enable()
    stats = list(network.stats.values())
    shown = dict(sorted(errors.items())[:8])
    done = Simulation(
        ranks=total, wall_s=wall,
        ok=not errors and all(r is not None for i, r in enumerate(results) if i not in absent),
        errors=shown, failed=len(errors),
        max_bytes_sent_by_one_server=max((s.bytes_sent for s in stats), default=0),
        max_bytes_received_by_one_server=max((s.bytes_received for s in stats), default=0),
        max_connections_one_server=max((s.connections for s in stats), default=0),
        max_calls_one_server=max((s.calls for s in stats), default=0),
        largest_message=max((s.largest_message for s in stats), default=0),
        results=results if keep else [])
    return done
