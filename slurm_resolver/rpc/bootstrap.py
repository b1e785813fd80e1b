"""bootstrap(): every task starts a real server, and all agree on one verified cluster.

`_bootstrap` reads as its phases:

1. **resolve**: the cluster this task belongs to, and how its calls are proven;
2. **start**: the task's server on its node's address, built whole once with every part it will have
   (`slurm_resolver.rpc.start`), a spare free port reserved for a framework, its place in the tree;
3. **exchange**: what nobody can compute (bound port, spare port, GPUs Slurm bound to one task), up
   and down the tree or through MPI's allgather (`slurm_resolver.rpc.exchanges`); the root (rank 0,
   under MPI) decides the table and the launch's key. In the tree, its node's leader asks each
   server who it is as its record arrives, and the table comes down verified;
4. **verify**: under MPI (or with ``verify='all'`` or a count), each task asks its peers after the
   table (`slurm_resolver.rpc.trust.verify`);
5. **arm detection**: the server's parts that answer only now learn the agreed cluster, and failure
   detection starts watching (a hang is judged at the top: `slurm_resolver.rpc.diagnosis.judge`);
6. **agree**: where servers were checked after the table, a last round proves every check passed.

Every wait is bounded by ``timeout``; a task that never comes, dies or cannot be reached
makes every other task fail with an error naming it.
"""

from __future__ import annotations

import atexit
import logging
import time
from collections.abc import Awaitable, Coroutine, Mapping
from typing import Any

from ..cluster import Cluster
from ..environment import snapshot
from ..errors import ConfigurationError, SlurmResolverError, trimmed
from ..resolution import resolve
from ..stacks.progress import Hang
from .bootstrapped import Bootstrapped
from .detection.detector import FailureDetector
from .diagnosis.stacks_call import StacksHandler
from .exchanges import settle
from .messages import NO_FAILURE
from .network.loop import LoopThread
from .options import BootstrapOptions
from .rounds.member import Member
from .start import Started, grpc_network, proof_of, start
from .transport import Network
from .tree import Checking, checked_peers
from .trust.verify import check_peers
from .waits import Settled

__all__ = ["bootstrap", "bootstrap_async"]

log = logging.getLogger("slurm_resolver")


def bootstrap(cluster: Cluster | None = None, options: BootstrapOptions | None = None, *,
              environ: Mapping[str, str] | None = None, network: Network | None = None,
              **keywords: object) -> Bootstrapped:
    """Start this task's server, agree with every other task on one cluster, verify it.

    Args:
        cluster: the resolved `Cluster`
            (``slurm_resolver.resolve(jobs=...)``); default: resolved from the environment.
        options: a `BootstrapOptions`; keywords of its fields override it (``timeout``,
            60 s by default, ``verify``, ``auth``, ``heartbeat``...: [each with its
            default][the-keywords-of-bootstrap]).
        environ: variables instead of ``os.environ`` (tests, simulations).
        network: where servers listen (default: real gRPC).

    The server and its calls run on an event loop thread of this task, which lives until
    `stop()`. `bootstrap_async()` is the same on a running loop. A failure is raised from this
    call, its message naming the task and the fix (the traceback of the loop thread too, where
    the ``slurm_resolver`` log is at DEBUG).
    """
    chosen = BootstrapOptions.of(options, keywords)
    loop = LoopThread()
    try:
        bootstrapped = loop.run(_bootstrap(cluster, chosen, environ, network, loop))
    except SlurmResolverError as exc:
        loop.close()
        short = trimmed(exc)  # from the caller's frame (this line is all a user sees of ours); None at DEBUG
        if short is None:
            raise
        raise short from None
    except BaseException:
        loop.close()
        raise
    if chosen.heartbeat:
        bootstrapped.report_crashes()  # an uncaught exception is a failure, with its reason ...
        atexit.register(bootstrapped.stop)  # ... and an interpreter that ends normally leaves normally
    return bootstrapped


class _Laps:
    """Seconds spent in each phase."""

    def __init__(self) -> None:
        self.timings: dict[str, float] = {}
        self._last = time.perf_counter()

    def __call__(self, phase: str) -> None:
        now = time.perf_counter()
        self.timings[phase] = now - self._last
        self._last = now


def bootstrap_async(cluster: Cluster | None = None, options: BootstrapOptions | None = None, *,
                    environ: Mapping[str, str] | None = None, network: Network | None = None,
                    **keywords: object) -> Coroutine[Any, Any, Bootstrapped]:
    """`bootstrap()` as a coroutine to await on the running event loop (the scale simulation runs
    thousands of tasks on one loop this way); the result's coroutines are on ``.aio``. The options
    are checked as it is called; the coroutine is the bootstrap's own (no frame of this function
    stays between the loop and the bootstrap while thousands of tasks wait)."""
    return _bootstrap(cluster, BootstrapOptions.of(options, keywords), environ, network, None)


async def _bootstrap(cluster: Cluster | None, chosen: BootstrapOptions, environ: Mapping[str, str] | None,
                     network: Network | None, loop: LoopThread | None) -> Bootstrapped:
    """The bootstrap, on the running event loop (``loop``'s thread, where `bootstrap()` made one)."""
    lap = _Laps()
    env = snapshot(environ)
    mode = chosen.mode(env)
    if cluster is None:  # where the layout is not in the environment, the exchange below learns it
        from ..launchers.below import refuse_written_in_batch_step

        refuse_written_in_batch_step(env)  # before the batch step's RANK=0 reads as a launcher below srun
        cluster = resolve(env, exchange=mode, timeout=chosen.timeout)
    if not isinstance(cluster, Cluster):
        raise ConfigurationError(f"bootstrap() takes a Cluster, not {type(cluster).__name__}",
                                 "pass slurm_resolver.resolve(...) (a resolver's .cluster), or nothing")
    if not cluster.launch.can_bootstrap or cluster.rank is None:
        raise ConfigurationError(
            f"bootstrap runs in every task of a launch, not in the {cluster.launcher} step",
            "start the tasks with srun (or mpirun) and call bootstrap() in each of them")
    candidates = chosen.candidates(env, cluster.launch.key)
    proof = proof_of(chosen.auth, env, network, cluster)
    lap("resolve")
    if network is None:
        network = grpc_network(cluster, chosen.fanout)  # imports grpc: timed apart, most of a small job's start
        lap("grpc")
    task = await start(cluster, chosen, mode, network, proof, candidates)
    lap("server")
    try:
        me = cluster.task(task.plan.rank)
        table = await task.exchange.table(cluster, me, task.served.port, network.reserve(me.host), chosen.timeout)
        settled = settle(task.cluster, table)
        member = task.member.settled(settled)
        lap("exchange")
        failure = NO_FAILURE
        if task.checks_later:
            peers = checked_peers(task.plan.rank, settled.world_size, chosen.verify)
            failure = await check_peers(network, proof, settled, task.plan.rank, peers, chosen.timeout)
            lap("verify")
        task.handlers.settled.set(Settled(settled, task.plan, network))  # the parts that answer only now
        detector = _armed(task, member, settled, chosen)
        if task.checks_later:
            await task.exchange.agree(member, failure, chosen.timeout)
            lap("barrier")
    except BaseException:
        if task.inspection is not None:
            task.inspection.cancel()
        await task.served.stop(2.0)  # calls in flight (a task below waiting for a result) still get their answer
        await network.close()
        raise
    if detector is not None:
        detector.start()
    if log.isEnabledFor(logging.DEBUG):
        log.debug("%s", _decisions(task, member, chosen, lap.timings))
    return Bootstrapped(settled, member, task.served, lap.timings, task.exchange.how, proof.how, detector, loop,
                        task.handlers.parts.of(StacksHandler))


def _armed(task: Started, member: Member, settled: Cluster, options: BootstrapOptions) -> FailureDetector | None:
    """This task's failure detection, ready to start (None: off); from now on the tasks below may watch here.
    At the top of the tree it judges hangs, and a hang is said where every task is (`say_where`)."""
    if not options.heartbeat:
        task.handlers.watched.set(None)
        return None
    above, link = member.above
    stacks = task.handlers.parts.of(StacksHandler)

    def judged(hang: Hang) -> Awaitable[None]:
        from .diagnosis.judge import say_where  # loaded where a hang is judged: not in every task's start

        return say_where(hang, stacks, detector.fail_for_job)

    detector = FailureDetector(settled, task.plan, above, link, task.network, task.authority, options.heartbeat,
                               options.patience, options.hang_after, judged)
    task.handlers.watched.set(detector.watch)
    return detector


def _decisions(task: Started, member: Member, options: BootstrapOptions, timings: Mapping[str, float]) -> str:
    """One readable line of what this task did in the bootstrap (for ``-v``): its place, whom it checked, how long."""
    plan, cluster = task.plan, task.cluster
    place = task.exchange.place(cluster, member)
    if task.checks_later:
        peers = len(checked_peers(plan.rank, cluster.world_size, options.verify))
        checked = f"verified {peers} peer{'s' * (peers != 1)} after the table"
    elif task.inspection is not None:
        checked = f"verified its {len(plan.sources)} source{'s' * (len(plan.sources) != 1)} as they joined"
    else:
        nothing = options.verify.how is Checking.NONE
        checked = "verify=none: nothing verified" if nothing else f"verified by rank {member.above[0]}"
    phases = ", ".join(f"{name} {seconds:.2f}" for name, seconds in timings.items())
    return (f"bootstrap: {place}; {checked}; port {task.served.port}; table in {sum(timings.values()):.2f} s "
            f"({phases})")
