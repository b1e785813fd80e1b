"""bootstrap(): every task starts a real server, and all agree on one verified cluster.

1. The task resolves the cluster (or is given one), starts its
   :class:`~slurm_resolver.rpc.server.Server` on its node's address, and reserves a spare
   free port for a framework.
2. The tasks exchange what nobody can compute (bound port, spare port, GPUs Slurm bound
   to one task): through MPI's allgather under an MPI launcher (and under srun with PMIx
   where MPI initialises), otherwise up and down the tree of node leaders
   (:mod:`~slurm_resolver.rpc.protocol`). Rank 0 adds the job's token.
3. Each task checks its ring neighbours (health, then identity with the token), so every
   server is checked by a peer; the last round proves every check passed.

Every wait is bounded by ``timeout``; a task that never comes, dies or cannot be reached
makes every other task fail with an error naming it.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import secrets
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from ..cluster import Cluster
from ..environment import snapshot
from ..errors import ConfigurationError, ResolutionError
from ..exchange import Exchange, check_mode, mpi_exchange
from ..gpus import format_devices, parse_devices
from ..placement import Placement
from ..resolution import resolve
from .auth import Authority, authority
from .bootstrapped import Bootstrapped
from .coordinator import Coordinator, Identity
from .loop import LoopThread
from .ports import candidates_of, rendezvous_ports
from .protocol import TABLE, VERIFIED, Member
from .transport import Link, LinkError, Network
from .tree import DEFAULT_FANOUT, plan_of
from .watch import Watchtower
from .wire import Failure, Records, Table, WireError, decode_identity

__all__ = ["bootstrap", "bootstrap_async", "rendezvous_ports", "verified_peers"]

log = logging.getLogger("slurm_resolver")

def verified_peers(rank: int, size: int, verify: str | int) -> list[int]:
    """The peers ``rank`` checks: ring neighbours by default, so every server is checked.

    >>> verified_peers(0, 5, "ring"), verified_peers(2, 5, 2), verified_peers(1, 3, "all")
    ([1, 4], [0, 1, 3, 4], [0, 2])
    """
    if verify in ("ring", "auto"):
        reach = 1
    elif isinstance(verify, int) and not isinstance(verify, bool) and verify > 0:
        reach = verify
    elif verify not in ("all", "none"):
        raise ConfigurationError(f"verify={verify!r} is not known",
                                 "use 'ring', 'all', 'none' or a count of neighbours")
    if verify == "none" or size == 1:
        return []
    if verify == "all":
        return [r for r in range(size) if r != rank]
    return sorted({(rank + d) % size for d in range(-reach, reach + 1)} - {rank})


def _check_watch(heartbeat: float | None, patience: float) -> None:
    """Refuse a heartbeat or patience that would declare live tasks dead or never beat."""
    if heartbeat is None or heartbeat == 0:
        return
    if not isinstance(heartbeat, (int, float)) or isinstance(heartbeat, bool) or not 0.05 <= heartbeat <= 3600:
        raise ConfigurationError(f"heartbeat={heartbeat!r} is not a number of seconds from 0.05 to 3600",
                                 "use e.g. heartbeat=1.0 (the default), or heartbeat=None for no failure detection")
    if not isinstance(patience, (int, float)) or isinstance(patience, bool) or not patience >= 2 * heartbeat:
        raise ConfigurationError(f"patience={patience!r} must be at least twice the heartbeat ({heartbeat} s)",
                                 "a silent task is declared dead after the patience: give it a few beats, "
                                 "e.g. patience=5 * heartbeat")


async def _check(link: Link, cluster: Cluster, rank: int, token: str, timeout: float) -> str:
    """Why the server of ``rank`` is not who the table says; ``''`` if it is."""
    task = cluster.task(rank)
    try:
        if not await link.healthy(timeout):
            return f"the server of {task.job}:{task.index} (rank {rank}) at {task.address} is not SERVING"
        job_key, their_rank, node, job, index = decode_identity(await link.who(token, timeout))
    except LinkError as exc:
        if exc.code == "unauthenticated":
            return (f"the server at {task.address}, expected to be {task.job}:{task.index} (rank {rank}) on "
                    f"{task.node}, belongs to another job (it refused this job's token)")
        return f"task {task.job}:{task.index} (rank {rank}) on {task.node} does not answer at {task.address} ({exc})"
    except WireError as exc:
        return f"the server at {task.address} sent a malformed identity ({exc})"
    if (job_key, their_rank) != (cluster.launch.key, rank) or (node, job, index) != (task.node, task.job, task.index):
        return (f"rank {rank} at {task.address} says it is {job}:{index} (rank {their_rank}) on {node} of launch "
                f"{job_key}, but the table has {task.job}:{task.index} on {task.node}")
    return ""


def bootstrap(cluster: Cluster | Any = None, *, exchange: str | Exchange | None = None, timeout: float = 60.0,
              port: int = 0, verify: str | int = "ring", environ: Mapping[str, str] | None = None,
              rendezvous: Sequence[int] | None = None, fanout: int = DEFAULT_FANOUT,
              network: Network | None = None, auth: str | None = None, heartbeat: float | None = 1.0,
              patience: float = 5.0) -> Bootstrapped:
    """Start this task's server, agree with every other task on one cluster, verify it.

    Args:
        cluster: a resolved :class:`~slurm_resolver.cluster.Cluster`, or a resolver with a
            ``cluster`` (``SlurmClusterResolver(jobs=...)``); default: resolved from the
            environment.
        exchange: ``'auto'`` (MPI under an MPI launcher, and under srun with PMIx where MPI
            initialises; else the rendezvous), ``'mpi'``, ``'rendezvous'``, or an
            :class:`~slurm_resolver.exchange.Exchange`. Default: ``SLURM_RESOLVER_EXCHANGE``
            or ``'auto'``.
        timeout: seconds for the whole bootstrap.
        port: the port every task binds (0: any free port; leaders then bind one of the
            launch's rendezvous ports).
        verify: ``'ring'`` (each task checks its two ring neighbours), ``'all'``,
            ``'none'``, or how many neighbours on each side.
        environ: variables instead of ``os.environ`` (tests, simulations).
        rendezvous: the ports leaders try to bind (default: derived from the launch's
            key, or ``SLURM_RESOLVER_RENDEZVOUS_PORTS``).
        fanout: children per leader in the tree of node leaders.
        network: where servers listen (default: real gRPC).
        auth: ``'auto'`` (MUNGE credentials where munged answers, else the launch's key
            alone), ``'munge'`` (an error without it), ``'none'``. Default:
            ``SLURM_RESOLVER_AUTH`` or ``'auto'``. See :mod:`slurm_resolver.rpc.auth`.
        heartbeat: seconds between the heartbeats that detect a task dying after the
            bootstrap (:meth:`Bootstrapped.failures`, :meth:`Bootstrapped.on_failure`);
            None: no detection.
        patience: seconds of silence after which a task is declared dead (one whose
            process dies is declared at once).

    The server and its calls run on an event loop thread of this task, which lives until
    :meth:`Bootstrapped.stop`. :func:`bootstrap_async` is the same on a running loop.
    """
    loop = LoopThread()
    try:
        done = loop.run(bootstrap_async(cluster, exchange=exchange, timeout=timeout, port=port, verify=verify,
                                        environ=environ, rendezvous=rendezvous, fanout=fanout, network=network,
                                        auth=auth, heartbeat=heartbeat, patience=patience))
    except BaseException:
        loop.close()
        raise
    done.attach(loop)
    if heartbeat:
        done.report_crashes()  # an uncaught exception is a failure, with its reason ...
        atexit.register(done.stop)  # ... and an interpreter that ends normally leaves normally
    return done


async def bootstrap_async(cluster: Cluster | Any = None, *, exchange: str | Exchange | None = None,
                          timeout: float = 60.0, port: int = 0, verify: str | int = "ring",
                          environ: Mapping[str, str] | None = None, rendezvous: Sequence[int] | None = None,
                          fanout: int = DEFAULT_FANOUT, network: Network | None = None,
                          auth: str | None = None, heartbeat: float | None = 1.0,
                          patience: float = 5.0) -> Bootstrapped:
    """:func:`bootstrap` as a coroutine on the running event loop (the scale simulation runs
    thousands of tasks on one loop this way); the result's :meth:`~Bootstrapped.barrier` and
    :meth:`~Bootstrapped.stop` have coroutine twins ``abarrier`` and ``astop``."""
    clock = [time.perf_counter()]
    timings: dict[str, float] = {}

    def lap(phase: str) -> None:
        now = time.perf_counter()
        timings[phase] = now - clock[0]
        clock[0] = now

    env = snapshot(environ)
    mode = exchange if exchange is not None else env.get("SLURM_RESOLVER_EXCHANGE", "auto")
    check_mode(mode, "exchange" if exchange is not None else "SLURM_RESOLVER_EXCHANGE")
    if mode == "none":
        raise ConfigurationError("bootstrap needs an exchange between the tasks, not exchange='none'",
                                 "use 'auto', 'mpi' or 'rendezvous'")
    if cluster is None:  # where the layout is not in the environment, the exchange below learns it
        cluster = resolve(env, exchange=mode, timeout=timeout, provisional=True)
    elif not isinstance(cluster, Cluster):
        cluster = cluster.cluster  # a resolver: SlurmClusterResolver(...)
    if not cluster.launch.can_bootstrap or cluster.rank is None:
        raise ConfigurationError(
            f"bootstrap runs in every task of a launch, not in the {cluster.launcher} step",
            "start the tasks with srun (or mpirun) and call bootstrap() in each of them")
    verified_peers(0, 1, verify)  # an unknown verify= fails before anything starts
    _check_watch(heartbeat, patience)
    candidates = candidates_of(env, cluster.launch.key, rendezvous, port)
    authority = _authority(auth, env, network)
    lap("resolve")
    if network is None:
        from .grpc_network import GrpcNetwork

        network = GrpcNetwork()  # imports grpc: timed apart, it is most of a small job's start-up
        lap("grpc")
    rank = cluster.rank
    me = cluster.task(rank)
    plan = plan_of(cluster, rank, fanout)
    group = mpi_exchange(cluster.launch, mode, timeout)
    coordinator = Coordinator(Identity(cluster.launch.key, rank, me.node, me.job, me.index), cluster.world_size,
                              plan.sources, root=plan.position == 0 and plan.is_leader, authority=authority)
    bind = candidates if port or (plan.is_leader and group is None) else [0]
    served = await network.serve(me.host, bind, coordinator)
    coordinator.port = served.port
    lap("server")
    member = Member(cluster, rank, network, coordinator, plan, candidates)
    try:
        spare = network.reserve(me.host)
        gpus = format_devices(me.gpus) if cluster.gpu_plan.visible.bound and me.gpus else None
        token, table = await _exchange(group, member, rank, served.port, spare, gpus, timeout)
        coordinator.set_token(token)
        reported = {r: parse_devices(g, "GPUs reported by a peer") for r, g in table.gpus.items()}
        if not cluster.placement.exact:
            cluster = _learned(cluster, table)
        done = cluster.with_ports(table.ports, table.spares, reported)
        member.use(done)
        lap("exchange")
        reasons = [await _check(network.connect(done.hosts[done.placement.node_of(peer)], done.ports[peer]), done,
                                peer, token, min(timeout, 30.0))
                   for peer in verified_peers(rank, done.world_size, verify)]
        failure = next((Failure.of(f"rank {rank} could not verify a peer: {r}") for r in reasons if r), Failure())
        lap("verify")
        tower = Watchtower(member, heartbeat, patience) if heartbeat else None
        coordinator.tower = tower  # before the last round: the tasks below may start watching as soon as it ends
        if group is None:
            await member.round(VERIFIED, Records(), failure, timeout)
        else:
            rows = await asyncio.get_running_loop().run_in_executor(None, group.allgather, [failure.reason])
            failed = [r[0] for r in rows if r[0]]
            if failed:
                more = f" ({len(failed) - 1} more tasks reported a failure)" if len(failed) > 1 else ""
                raise ResolutionError(f"bootstrap: {failed[0]}{more}", "check the named task's output and network")
        lap("barrier")
    except BaseException:
        await served.stop(2.0)  # calls in flight (a task below waiting for a result) still get their answer
        await network.close()
        raise
    if tower is not None:
        tower.start()
    return Bootstrapped(done, member, served, token, timings, "tree" if group is None else "mpi", authority.how,
                        tower)


def _authority(auth: str | None, env: Mapping[str, str], network: Network | None) -> Authority:
    """MUNGE for real networks (see :func:`~.auth.authority`); none in an in-process network, whose
    simulated tasks share one uid and one process anyway."""
    from .local import LocalNetwork

    if isinstance(network, LocalNetwork) and auth in (None, "auto"):
        return Authority(None, "not authenticated: an in-process network")
    return authority(auth, env)


def _learned(cluster: Cluster, table: Table) -> Cluster:
    """The cluster on the layout the tasks told each other (each its node), checked against Slurm's."""
    nodes = cluster.placement.nodes
    if len(table.nodes) != cluster.world_size:
        raise ResolutionError("bootstrap: the tasks did not tell their nodes, and the layout is not in the environment",
                              "every task must run the same slurm_resolver version")
    learned = Placement(nodes, cluster.placement.counts, tuple(nodes[p] for p in table.nodes))
    told = Counter(table.nodes)
    if any(told.get(p, 0) != count for p, count in enumerate(learned.counts)):
        raise ResolutionError("bootstrap: the nodes the tasks reported do not add up to Slurm's tasks per node",
                              "every task must belong to the same step")
    log.debug("bootstrap: learned the layout of %s from every task's node (SLURM_NODEID)", cluster.launcher)
    return cluster.with_placement(learned)


async def _exchange(group: Exchange | None, member: Member, rank: int, port: int, spare: int, gpus: str | None,
                    timeout: float) -> tuple[str, Table]:
    """The token and the table: through MPI (on a worker thread: the server keeps serving), or the tree."""
    if group is None:
        nodes = [] if member.cluster.placement.exact else [member.plan.position]
        own = Records([rank], [port], [spare], {rank: gpus} if gpus else {}, nodes)
        return await member.round(TABLE, own, Failure(), timeout)
    token = secrets.token_urlsafe(24) if rank == 0 else ""
    rows = await asyncio.get_running_loop().run_in_executor(None, group.allgather, [port, spare, gpus or "", token])
    if len(rows) != member.cluster.world_size:
        raise ResolutionError(f"the MPI exchange has {len(rows)} ranks, the cluster {member.cluster.world_size}",
                              "run one process per task of the launch")
    table = Table(tuple(int(r[0]) for r in rows), tuple(int(r[1]) for r in rows),
                  {i: str(r[2]) for i, r in enumerate(rows) if r[2]})
    return str(rows[0][3]), table
