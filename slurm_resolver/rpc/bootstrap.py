"""bootstrap(): every task starts a real server, and all agree on one verified cluster.

`bootstrap_async()` reads as its phases:

1. **start**: the task's `Server` on its node's address, a
   spare free port reserved for a framework, its place in the tree of node leaders;
2. **exchange**: what nobody can compute (bound port, spare port, GPUs Slurm bound to one
   task) through MPI's allgather under an MPI launcher (and under srun with PMIx where MPI
   initialises), otherwise up and down the tree (`slurm_resolver.rpc.rounds.member`); the
   root decides the table and the launch's key;
3. **verify**: every server is asked once who it is (`slurm_resolver.rpc.trust.verify`). In the
   tree, its node's leader asks as its record arrives (its parent, for the only task of a
   node without child nodes), and the verdict goes up with the records: the table comes
   down verified. Under MPI (or with ``verify='all'`` or a count), each task asks its peers
   after the table, and
4. **agree**: a last round proves every check passed.

Failure detection starts once the task holds the verified table.

Every wait is bounded by ``timeout``; a task that never comes, dies or cannot be reached
makes every other task fail with an error naming it.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import resource
import time
from collections import Counter
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..cluster import Cluster
from ..environment import snapshot
from ..errors import ConfigurationError, ResolutionError, SlurmResolverError, alone, trimmed
from ..exchange import Exchange, ExchangeMode, mpi_exchange
from ..faults import Cause, Fault
from ..gpus import format_devices, parse_reported
from ..placement import Placement
from ..resolution import resolve
from ..speakers import Speaker
from ..stacks.progress import Hang, HangKind
from ..stacks.render import ranks_label
from .bootstrapped import Bootstrapped, Exchanged
from .detection.detector import FailureDetector
from .detection.stacks_call import StacksHandler
from .handlers import TaskHandlers
from .messages import NO_FAILURE, TABLE_ROUND, VERIFIED_ROUND, Contribution, Failure, Identity, Records, Table
from .network.callers import CALLS_SHARE, CONNECTIONS_SHARE, MOST_CALLS
from .network.loop import LoopThread
from .options import BootstrapOptions
from .rounds.member import Member
from .rounds.uplink import Uplink
from .transport import Network, Served
from .tree import Checking, Plan, checked_peers, plan_of
from .trust.choice import AuthChoice, authority
from .trust.seals import AuthMode, Authority
from .trust.verify import Inspection, check_peers

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


@dataclass
class _Task:
    """One task once started: its place, its server, and how it exchanges."""

    cluster: Cluster
    plan: Plan
    network: Network
    authority: Authority
    served: Served[TaskHandlers]
    member: Member
    group: Exchange | None
    inspection: Inspection | None
    """A leader's checks of its sources' servers in the first round (the tree's way to verify)."""
    checks_later: bool
    """Whether servers are checked after the table instead, with a last round for the verdict."""


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
    if cluster.launch.standalone and network is None:
        log.warning(alone("the bootstrap"))
    if not cluster.launch.can_bootstrap or cluster.rank is None:
        raise ConfigurationError(
            f"bootstrap runs in every task of a launch, not in the {cluster.launcher} step",
            "start the tasks with srun (or mpirun) and call bootstrap() in each of them")
    candidates = chosen.candidates(env, cluster.launch.key)
    proof = _authority(chosen.auth, env, network, cluster)
    lap("resolve")
    if network is None:
        from .network.grpc_network import GrpcNetwork

        _open_files(cluster, chosen.fanout)
        network = GrpcNetwork()  # imports grpc: timed apart, it is most of a small job's start-up
        lap("grpc")
    task = await _start(cluster, chosen, mode, network, proof, candidates)
    lap("server")
    try:
        table = await _exchange(task, chosen.timeout)
        settled = _settled(task.cluster, table)
        member = task.member.settled(settled)
        lap("exchange")
        failure = NO_FAILURE
        if task.checks_later:
            failure = await _verify(task, settled, chosen)
            lap("verify")
        detector = None
        stacks = StacksHandler(settled, task.plan, proof, task.served.port, network)
        if chosen.heartbeat:
            above, link = member.above
            detector = FailureDetector(settled, task.plan, above, link, network, proof, chosen.heartbeat,
                                       chosen.patience, chosen.hang_after, lambda hang: _hung(hang, detector, stacks))
        watched = None if detector is None else detector.watch
        task.served.handlers.watching.watch_below(watched)  # tasks below may watch now
        task.served.handlers.stacks_below(stacks)
        if task.checks_later:
            await _agree(task, member, failure, chosen.timeout)
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
    return Bootstrapped(settled, member, task.served, lap.timings, Exchanged.TREE if task.group is None else
                        Exchanged.MPI, proof.how, detector, loop, stacks)


HANG_STACKS = 10.0
"""Seconds the tasks have to give their stacks when the job hangs."""


async def _hung(hang: Hang, detector: FailureDetector | None, stacks: StacksHandler) -> None:
    """The job hangs (judged at the top of the tree): say where every task is, once, then fail the step
    (every task hears it as this task's failure, and ``run`` restarts the step)."""
    from ..stacks.job import JobStacks, nodes_of

    cluster = stacks.cluster
    found = await stacks.gather(time.monotonic() + HANG_STACKS)
    job = JobStacks(found, nodes_of(found, lambda rank: cluster.task(rank).node), f"step {cluster.launch.key}")
    odd = [c.ranks for c in job.odd()] if hang.kind is HangKind.STILL else [hang.marks.behind]
    named = "; ".join(ranks_label(ranks, lambda rank: cluster.task(rank).node) for ranks in odd[:4])
    why = f"the job hung: {hang}" + (f" (odd: {named})" if named else "")
    log.error("slurm_resolver: %s; every task's stacks:\n%s", why, job)
    if detector is not None:
        fault = Fault(Cause.HUNG, why)
        detector.deaths.failing(fault)
        await detector.fail(fault)


def _decisions(task: _Task, member: Member, options: BootstrapOptions, timings: Mapping[str, float]) -> str:
    """One readable line of what this task did in the bootstrap (for ``-v``): its place, whom it checked, how long."""
    plan, cluster = task.plan, task.cluster
    node, above = cluster.task(plan.rank).node, member.above[0]
    if task.group is not None:
        place = f"exchanged through MPI ({cluster.world_size} ranks)"
    elif plan.is_leader:
        place = f"leader of {node}" + (f", parent rank {above}" if above is not None else ", the root") + \
            f", {len(plan.sources)} below"
    else:
        place = f"on {node} under its leader, rank {plan.leader}"
    if task.checks_later:
        peers = len(checked_peers(plan.rank, cluster.world_size, options.verify))
        checked = f"verified {peers} peer{'s' * (peers != 1)} after the table"
    elif task.inspection is not None:
        checked = f"verified its {len(plan.sources)} source{'s' * (len(plan.sources) != 1)} as they joined"
    else:
        nothing = options.verify.how is Checking.NONE
        checked = "verify=none: nothing verified" if nothing else f"verified by rank {above}"
    phases = ", ".join(f"{name} {seconds:.2f}" for name, seconds in timings.items())
    return (f"bootstrap: {place}; {checked}; port {task.served.port}; table in {sum(timings.values()):.2f} s "
            f"({phases})")


def _authority(auth: AuthChoice | None, env: Mapping[str, str], network: Network | None, cluster: Cluster) -> Authority:
    """How this task's calls and answers are proven (see `auth`); in an in-process network, whose
    simulated tasks share one process anyway, nothing unless asked. A job without proof says so, once."""
    if network is not None and auth is None:  # a job's task (no network given) never loads the in-process one
        from .network.in_process import LocalNetwork

        if isinstance(network, LocalNetwork):
            return Authority(AuthMode.NONE, "not authenticated: an in-process network")
    found = authority(auth, env, cluster.launch.key)
    if found.mode is AuthMode.NONE and auth is None and cluster.rank == 0 and not cluster.launch.standalone:
        log.warning("slurm_resolver: this job's tasks do not prove who they are (%s): any local user who can "
                    "reach their ports can join or disturb the bootstrap. Give the job a secret "
                    "(export SLURM_RESOLVER_SECRET; the templates do) or run munged.", found.how)
    return found


def _open_files(cluster: Cluster, fanout: int) -> None:
    """Raise this process's limit on open files to the hard limit, as servers do: a server must not
    stop accepting its own tasks because strangers hold connections. A hard limit too low for the
    job's size (a leader's tasks and child leaders, and every stranger's share of calls) is said."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            return
    needed = 2 * MOST_CALLS + 8 * (max(cluster.placement.counts, default=1) + fanout)
    if hard != resource.RLIM_INFINITY and hard < needed:
        log.warning("slurm_resolver: this process may open only %d files; a node leader of this job needs about %d "
                    "(a few per task of its node and per child leader, and strangers' connections count too: "
                    "each may hold %d connections and %d calls): raise the hard limit (ulimit -Hn, or LimitNOFILE= "
                    "of slurmd)", hard, needed, CONNECTIONS_SHARE, CALLS_SHARE)


async def _start(cluster: Cluster, options: BootstrapOptions, mode: ExchangeMode | Exchange, network: Network,
                 proof: Authority, candidates: list[int]) -> _Task:
    """Start this task's server on its node, and its place in the tree."""
    rank = cluster.rank
    assert rank is not None
    me = cluster.task(rank)
    plan = plan_of(cluster, rank, options.fanout)
    group = mpi_exchange(cluster.launch, mode, options.timeout)
    uplink = Uplink(cluster, plan, network, proof, candidates)
    identity = Identity(cluster.launch.key, rank, me.node, me.job, me.index)
    root = uplink.position is None and plan.is_leader
    bind = candidates if options.port or (plan.is_leader and group is None) else [0]
    early = group is None and options.verify.how is Checking.ONCE  # leaders check their sources as they join
    inspection = None
    if early and plan.is_leader and plan.sources:  # a record in at the last moment still gets its check
        inspection = Inspection(cluster, plan, network, proof,
                                time.monotonic() + options.timeout * plan.tree.check_until(plan.position))
    arrived = None if inspection is None else inspection.arrived
    served = await network.serve(me.host, bind, lambda port: TaskHandlers(  # made for the port bound: seals name it
        identity, cluster.world_size, proof, port, plan.sources, root, None if root else uplink.notice, arrived))
    return _Task(cluster, plan, network, proof, served, Member(cluster, plan, uplink, served.handlers.rounds,
                                                               inspection),
                 group, inspection, checks_later=not early and options.verify.how is not Checking.NONE)


async def _exchange(task: _Task, timeout: float) -> Table:
    """The table: through MPI (on a worker thread: the server keeps serving), or up and down the tree."""
    cluster, member = task.cluster, task.member
    rank = task.plan.rank
    me = cluster.task(rank)
    port, spare = task.served.port, task.network.reserve(me.host)
    gpus = format_devices(me.gpus) if cluster.gpu_plan.visible.bound and me.gpus else None
    if task.group is None:  # each task tells its node where some may not know the layout (their host file)
        told = not cluster.placement.exact or cluster.launch.arbitrary
        nodes = [task.plan.position] if told else []
        own = Records([rank], [port], [spare], {rank: gpus} if gpus else {}, nodes)
        _, table = await member.round(TABLE_ROUND, Contribution(own), timeout)
        return table
    key = task.authority.new_key().hex() if rank == 0 else ""
    mine = _MpiRecord(port, spare, gpus or "", key)
    rows = await asyncio.get_running_loop().run_in_executor(None, task.group.allgather, list(mine))
    if len(rows) != cluster.world_size:
        raise ResolutionError(f"the MPI exchange has {len(rows)} ranks, the cluster {cluster.world_size}",
                              "run one process per task of the launch")
    records = [_MpiRecord.read(row) for row in rows]
    task.authority.learn(bytes.fromhex(records[0].key))
    return Table(tuple(r.port for r in records), tuple(r.spare for r in records),
                 {i: r.gpus for i, r in enumerate(records) if r.gpus})


class _MpiRecord(NamedTuple):
    """One task's record in the MPI exchange (a list on the way: JSON has no tuples)."""

    port: int
    spare: int
    gpus: str
    """Its GPUs where Slurm bound them to it alone, else ''."""
    key: str
    """The launch's key, in hex: rank 0's; '' for the others."""

    @classmethod
    def read(cls, row: object) -> _MpiRecord:
        """A record as another task sent it, checked."""
        if not isinstance(row, list) or len(row) != len(cls._fields):
            raise ResolutionError(f"the MPI exchange carried {str(row)[:80]!r}, not a task's record",
                                  "every task must run the same slurm_resolver version")
        port, spare, gpus, key = row
        return cls(int(port), int(spare), str(gpus), str(key))


def _settled(cluster: Cluster, table: Table) -> Cluster:
    """The cluster with the ports every task bound (and the layout they told, where Slurm's did not)."""
    reported = parse_reported(table.gpus)  # one parse of one table a process (a simulation shares it)
    if table.nodes or not cluster.placement.exact:
        learned = _learned(cluster, table)
        if cluster.placement.exact and learned.all_hosts != cluster.placement.all_hosts:
            raise ResolutionError("bootstrap: the tasks run on other nodes than this task's host file "
                                  "(SLURM_HOSTFILE) says", "launch the step with the host file it was made for")
        cluster = cluster.with_placement(learned)
    return cluster.with_ports(table.ports, table.spares, reported)


def _learned(cluster: Cluster, table: Table) -> Placement:
    """The layout the tasks told each other (each its node), checked against Slurm's counts."""
    nodes = cluster.placement.nodes
    if len(table.nodes) != cluster.world_size:
        raise ResolutionError("bootstrap: the tasks did not tell their nodes, and the layout is not in the environment",
                              "every task must run the same slurm_resolver version")
    told = Counter(table.nodes)
    if any(told.get(p, 0) != count for p, count in enumerate(cluster.placement.counts)):
        raise ResolutionError("bootstrap: the nodes the tasks reported do not add up to Slurm's tasks per node",
                              "every task must belong to the same step")
    log.debug("bootstrap: learned the layout of %s from every task's node (SLURM_NODEID)", cluster.launcher)
    return Placement(nodes, cluster.placement.counts, tuple(nodes[p] for p in table.nodes))


async def _verify(task: _Task, settled: Cluster, options: BootstrapOptions) -> Failure:
    """Ask the peers this task checks who they are, after the table; the first mismatch, as a failure."""
    peers = checked_peers(task.plan.rank, settled.world_size, options.verify)
    return await check_peers(task.network, task.authority, settled, task.plan.rank, peers, options.timeout)


async def _agree(task: _Task, member: Member, failure: Failure, timeout: float) -> None:
    """The last round: every check passed, or every task fails naming the first that did not."""
    if task.group is None:
        await member.round(VERIFIED_ROUND, Contribution(failure=failure), timeout)
        return
    rows = await asyncio.get_running_loop().run_in_executor(None, task.group.allgather, [failure.reason])
    failed = [r[0] for r in rows if r[0]]
    if failed:
        more = f" ({len(failed) - 1} more tasks reported a failure)" if len(failed) > 1 else ""
        raise ResolutionError(f"bootstrap: {failed[0]}{more}", "check the named task's output and network",
                              speaker=Speaker.FIRST)  # every rank gathered the same verdicts
