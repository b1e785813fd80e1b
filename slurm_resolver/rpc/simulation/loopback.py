"""Many tasks of one launch bootstrapping over real gRPC: each node on its own loopback address.

What `slurm_resolver.rpc.simulation.simulate` does without sockets, this does with them: every
task runs `bootstrap_async()` over its own
`GrpcNetwork` (its own gRPC server and channels),
each simulated node at its own address (``127.77.x.y``, as the cluster's ``NodeAddr`` would
give it), the nodes spread over ``procs`` processes (a node's tasks in one process, as on a
real node), every process one event loop. The tasks prove who they are with a secret (the
templates' default), and the run measures wall time from a common start and the CPU seconds
of every process. It is what a real job costs, on one machine's cores.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import multiprocessing
import os
import resource
import secrets
import signal
import time
from dataclasses import dataclass
from typing import Any

from ...cluster import Cluster
from ...errors import SlurmResolverError
from ...exchange import ExchangeMode
from ...faults import Fault
from ...resolution import resolve
from ..options import BootstrapOptions
from ..tree import DEFAULT_FANOUT, ONCE, Verify
from ..trust.choice import AuthChoice
from .simulate import Simulation, srun_environ

__all__ = ["over_grpc", "loopback", "many_open_files", "cpu_seconds", "next_report"]


def loopback(position: int) -> str:
    """The address of simulated node ``position``: ``127.77.0.1`` on, 250 nodes per third byte.

    >>> loopback(0), loopback(251)
    ('127.77.0.1', '127.77.1.2')
    """
    return f"127.77.{position // 250 % 256}.{position % 250 + 1}"


def _cluster(nodes: int, tasks_per_node: int, job_id: str) -> Cluster:
    """The srun step, each node at its loopback address (as Slurm's NodeAddr)."""
    return resolve(srun_environ(nodes, tasks_per_node, job_id=job_id), resolves=lambda name: False,
                   node_addresses=lambda names: {n: loopback(int(n[4:]) - 1) for n in names})


@dataclass(frozen=True)
class _Plan:
    """What every process of a run is told."""

    procs: int
    shape: tuple[int, int]
    job_id: str
    """A job id of this run's own: two runs on one machine at once (two checkouts' test suites) bind
    other ports and never meet."""
    options: BootstrapOptions
    secret: str
    hold: float
    kill: int | None
    prepare: str | None
    """``module:function`` each process calls before its tasks start (a benchmark turns a part off)."""
    stacks: bool = False
    """Once every task is bootstrapped, rank 0 asks for the job's stacks, timed."""
    marks: bool = False
    """While held, every task marks progress (a mark a second), and the root judges hangs."""
    stop: bool = False
    """The process ``kill`` stops (SIGSTOP) instead of ending: its connections stay open, and nothing answers on
    them (a node that loses power), so that only pings find it."""


@dataclass(frozen=True)
class _Signals:
    """How the processes of a run keep in step."""

    ready: Any
    go: Any
    booted: Any
    """Every process's tasks are bootstrapped."""
    armed: Any
    """Every process's tasks watch: each made its watch call and was answered, and every leader heard from all
    its sources (or gave up waiting, `_ARMING`)."""
    finished: Any
    """Every living process is done: servers may stop."""
    report: Any
    killed_at: Any
    """When the process that is killed ended (``time.time()``)."""


def _worker(index: int, plan: _Plan, signals: _Signals) -> None:
    """One process: its nodes' tasks, bootstrapped together once every process is ready; with a
    hold, failure detection then runs that long once every process's tasks are bootstrapped, and
    the deaths it declared, and when each task first heard of one, are counted before any stops.
    The process ``plan.kill`` ends abruptly a third into the hold (as a node that fails: the
    kernel closes its connections), or, with ``plan.stop``, stops there (as a node that loses power: its
    connections stay open and silent) until the run kills it."""
    from ..bootstrap import bootstrap_async
    from ..network.grpc_network import GrpcNetwork

    if plan.prepare:
        module, _, name = plan.prepare.partition(":")
        getattr(importlib.import_module(module), name)()
    many_open_files()
    nodes, per_node = plan.shape
    base = _cluster(nodes, per_node, plan.job_id)
    mine = [r for r in range(base.world_size) if r // per_node % plan.procs == index]
    errors: dict[int, str] = {}
    env = {"SLURM_RESOLVER_SECRET": plan.secret}

    async def task(rank: int) -> Any:
        try:
            return await bootstrap_async(base.as_rank(rank), environ=env, network=GrpcNetwork(),
                                         options=plan.options)
        except SlurmResolverError as exc:
            errors[rank] = str(exc)
            return None

    async def run() -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        signals.ready.put(index)
        await loop.run_in_executor(None, signals.go.wait)
        start, cpu = time.time(), resource.getrusage(resource.RUSAGE_SELF)
        done = await asyncio.gather(*(task(r) for r in mine))
        end, after = time.time(), resource.getrusage(resource.RUSAGE_SELF)
        row = {"start": start, "end": end, "failed": len(errors), "errors": dict(sorted(errors.items())[:8]),
               "cpu": cpu_seconds(cpu, after), "index": index, "ranks": mine, "held_cpu": 0.0, "dead": [], "heard": []}
        if plan.stacks:
            await loop.run_in_executor(None, signals.booted.wait)
            if 0 in mine and done[0] is not None:
                row.update(await _timed_stacks(done[0]))
        if plan.hold:
            heard: dict[int, float] = {}
            first: list[tuple[float, int, int, str]] = []  # the first deaths heard here: when, by whom, which, why

            def hear(me: int, rank: int, why: Fault) -> None:  # the benchmark's own work: as little as it can
                if me not in heard:
                    heard[me] = time.time()
                    if len(first) < 3:
                        first.append((heard[me], me, rank, str(why)))

            for b in done:
                if b is not None:
                    b.on_failure(lambda rank, why, me=b.me.rank: hear(me, rank, why))
            marking = asyncio.ensure_future(_marking([b for b in done if b is not None])) if plan.marks else None
            if not plan.stacks:
                await loop.run_in_executor(None, signals.booted.wait)
            row["booted"] = booted = time.time()
            await _armed([b for b in done if b is not None])
            row["armed_s"] = time.time() - booted
            await loop.run_in_executor(None, signals.armed.wait)  # the hold begins once every task watches
            if index == plan.kill:
                signals.report.put(row)  # its bootstrap's figures; then it fails, as a node does
                await asyncio.sleep(plan.hold / 3)
                await loop.run_in_executor(None, _flush, signals.report)
                signals.killed_at.value = time.time()
                if plan.stop:
                    os.kill(os.getpid(), signal.SIGSTOP)  # the run kills it (SIGKILL) once the others are done
                os._exit(0)
            await asyncio.sleep(settling(plan.hold))  # the last watch calls made, the first pings sent
            settled = resource.getrusage(resource.RUSAGE_SELF)
            row["armed_cpu"] = cpu_seconds(after, settled)
            await asyncio.sleep(plan.hold - settling(plan.hold))
            if marking is not None:
                marking.cancel()
            row["held_cpu"] = cpu_seconds(settled, resource.getrusage(resource.RUSAGE_SELF))
            row["dead"] = sorted({rank for b in done if b is not None for rank in b.failures()})
            row["first"] = first
            row["heard"] = [heard.get(b.me.rank) for b in done if b is not None]
            detectors = [b._detector for b in done if b is not None and b._detector is not None]
            row["unwatching"] = sum(d.deaths.rank != 0 and (d.heartbeat.above is None or not d.heartbeat.answered)
                                    for d in detectors)
            row["known"] = [len(d.deaths.failed) for d in detectors]
        await loop.run_in_executor(None, signals.finished.wait)  # every process is done: servers may stop
        await asyncio.gather(*(b.aio.stop(0) for b in done if b is not None))
        return row

    gc.disable()  # as in the simulation: thousands of tasks' objects in one process
    signals.report.put(asyncio.run(run()))


def over_grpc(nodes: int, tasks_per_node: int, procs: int = 4, *, timeout: float = 120.0,
              fanout: int = DEFAULT_FANOUT, verify: Verify | str | int = ONCE, heartbeat: float | None = None,
              hold: float = 0.0, kill: int | None = None, prepare: str | None = None, stacks: bool = False,
              marks: bool = False, stop: bool = False) -> Simulation:
    """Bootstrap every task of an ``nodes`` x ``tasks_per_node`` srun step over real gRPC, spread over
    ``procs`` processes; the result's ``cpu_s`` is the CPU seconds of every process together.

    With a ``heartbeat`` (seconds; patience five beats) and ``hold`` seconds, failure detection
    runs that long after every task's bootstrap: the result lists the tasks it declared dead
    (``dead``) and counts the living processes' CPU seconds (``held_cpu_s``). Where every task
    lives, none may be declared dead. With ``kill``, process number ``kill`` ends abruptly a
    third into the hold, with its nodes' tasks (``killed``): no other task may be declared dead
    (those a living task watched are), and the result says how long the last living task took
    to hear of a death (``heard_s``) and how many never did (``unheard``); with ``stop`` too, that process
    stops instead (SIGSTOP: a node that loses power, found by pings alone). Without a
    heartbeat, the run measures the bootstrap alone (failure detection off). ``prepare``
    (``module:function``) is called in every process before its tasks start. With ``stacks``, rank 0
    asks for the job's stacks once every task is bootstrapped (``stacks_s``, ``stacks_answered``,
    ``stacks_bytes``). With ``marks`` (and a hold), every task marks progress while held, the beats carry
    the marks up and the root judges hangs (none, if it is right: ``dead`` stays empty).
    """
    if marks and not hold:
        raise ValueError("marks= needs a hold: the marks ride the beats of failure detection")
    if hold and not heartbeat:
        raise ValueError("hold= needs a heartbeat: failure detection is what runs while held")
    if kill is not None and not (hold and 0 <= kill < procs and procs > 1):
        raise ValueError(f"kill={kill} needs a hold and names one of {procs} processes (more than one)")
    if stop and kill is None:
        raise ValueError("stop= needs kill=: the process that stops")
    context = multiprocessing.get_context("spawn")  # gRPC must not be initialised before a fork
    living = procs - (kill is not None)
    signals = _Signals(context.Queue(), context.Event(), _Done(context.Barrier(procs)), _Done(context.Barrier(procs)),
                       _Done(context.Barrier(living)), context.Queue(), context.Value("d", 0.0))
    options = BootstrapOptions(exchange=ExchangeMode.RENDEZVOUS, timeout=timeout, verify=Verify.parse(verify),
                               fanout=fanout, heartbeat=heartbeat, auth=AuthChoice.SECRET,
                               patience=5 * heartbeat if heartbeat else 5.0,
                               hang_after=6 * (hold + timeout) if marks else None)
    plan = _Plan(procs, (nodes, tasks_per_node), str(100_000 + secrets.randbelow(900_000)), options,
                 secrets.token_urlsafe(24), hold, kill, prepare, stacks, marks, stop)
    workers = [context.Process(target=_worker, args=(i, plan, signals)) for i in range(procs)]
    for worker in workers:
        worker.start()
    try:
        for _ in workers:
            next_report(signals.ready, workers, 120)
        signals.go.set()
        rows = [next_report(signals.report, workers, timeout + hold + 120) for _ in workers]
    finally:
        for worker in workers:
            worker.join(0 if stop and worker is workers[kill or 0] else 30)
            if worker.is_alive():
                worker.kill()
    errors: dict[int, str] = {}
    for row in rows:
        errors.update(row["errors"])
    failed = sum(row["failed"] for row in rows)
    heard = [t for row in rows for t in row["heard"]]
    killed = signals.killed_at.value
    after = sorted(t - killed for t in heard if t is not None) if kill is not None else []
    dead = sorted({rank for r in rows for rank in r["dead"]})
    return Simulation(ranks=nodes * tasks_per_node, wall_s=max(r["end"] for r in rows) - min(r["start"] for r in rows),
                      ok=failed == 0, errors=dict(sorted(errors.items())[:8]), failed=failed,
                      cpu_s=sum(r["cpu"] for r in rows), held_s=hold, held_cpu_s=sum(r["held_cpu"] for r in rows),
                      counted_s=hold - settling(hold), armed_cpu_s=sum(r.get("armed_cpu", 0.0) for r in rows),
                      armed_s=max((r.get("armed_s", 0.0) for r in rows), default=0.0),
                      first_death_s=_first_death(heard, rows) if kill is None else None,
                      dead=dead,
                      first_deaths=sorted(f for r in rows for f in r.get("first", []))[:4],
                      killed=[r for row in rows if row["index"] == kill for r in row["ranks"]],
                      unheard=sum(t is None for t in heard) if kill is not None else 0,
                      unwatching=sum(r.get("unwatching", 0) for r in rows),
                      known=sorted(n for r in rows for n in r.get("known", ())),
                      heard_s=after[-1] if after else 0.0, heard_median_s=after[len(after) // 2] if after else 0.0,
                      **next(({k: r[k] for k in ("stacks_s", "stacks_answered", "stacks_bytes")}
                              for r in rows if "stacks_s" in r), {}))


async def _marking(tasks: list[Any]) -> None:
    """Every task marks progress, a step a second (as a training loop would, far more often than a beat)."""
    step = 0
    while True:
        step += 1
        for b in tasks:
            b.progress(step)
        await asyncio.sleep(1.0)


async def _timed_stacks(b: Any) -> dict[str, Any]:
    """The job's stacks asked by ``b`` (rank 0): how long they took, how many answered, the answer's size."""
    from ..diagnosis.stacks_wire import encode_stacks

    start = time.monotonic()
    found = await b.aio.stacks(30.0)
    took = time.monotonic() - start
    size = len(encode_stacks(found.stacks, bytes(16), 0, lambda header: bytes(32)))
    return {"stacks_s": took, "stacks_answered": found.stacks.answered, "stacks_bytes": size}


def _flush(queue: Any) -> None:
    """Wait until what this process put on ``queue`` has left it (before an abrupt end)."""
    queue.close()
    queue.join_thread()


def many_open_files() -> None:
    """Let this process open as many files as it may (up to 65,536): thousands of tasks' servers
    and connections in one process."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 65536 if hard == resource.RLIM_INFINITY else min(hard, 65536)
    if wanted > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


def _first_death(heard: list[float | None], rows: list[dict[str, Any]]) -> float | None:
    """Seconds from every task's bootstrap to the first death heard (negative: before it); None: none heard."""
    times = [t for t in heard if t is not None]
    return min(times) - min(r["booted"] for r in rows if "booted" in r) if times else None


_ARMING = 300.0
"""Seconds a process waits at most for its tasks to watch before its hold begins anyway."""


async def _armed(tasks: list[Any]) -> None:
    """Return once every task of ``tasks`` watches: its call up answered (or none: the top), and, for a leader, a
    call from every task below it (at most `_ARMING` seconds: a run that never gets there still holds)."""
    until = time.monotonic() + _ARMING

    def watching(b: Any) -> bool:
        detector = b._detector
        return detector is None or ((detector.heartbeat.above is None or detector.heartbeat.answered)
                                    and not detector.watch.unheard())

    while not all(watching(b) for b in tasks) and time.monotonic() < until:
        await asyncio.sleep(0.5)


def settling(hold: float) -> float:
    """Seconds at the start of a hold (every task watching) that are not counted in its CPU a second: the first
    pings, the last calls' first beats (once a job; counted with the bootstrap's tail instead)."""
    return min(5.0, hold / 4)


def cpu_seconds(before: Any, after: Any) -> float:
    """CPU seconds (user and system) between two ``getrusage`` readings."""
    return float(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)


def next_report(queue: Any, workers: list[Any], timeout: float) -> Any:
    """The next item of ``queue``; an error as soon as a worker died without one, or after ``timeout``."""
    import queue as queues

    deadline = time.monotonic() + timeout
    while True:
        try:
            return queue.get(timeout=0.5)
        except queues.Empty:
            dead = [w.exitcode for w in workers if w.exitcode not in (None, 0)]
            if dead or time.monotonic() > deadline:
                raise RuntimeError(f"a worker process of the run over gRPC failed or did not report within "
                                   f"{timeout:g} s (exit codes {dead})") from None


class _Done:
    """A barrier that one process crossing it for the others' sake never holds up for long."""

    def __init__(self, barrier: Any) -> None:
        self._barrier = barrier

    def wait(self) -> None:
        try:
            self._barrier.wait(300)
        except Exception:  # noqa: BLE001 - a broken barrier (a process died): stop anyway
            pass
