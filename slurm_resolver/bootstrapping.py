"""Bootstrap: every task starts a real server, the tasks agree on one verified cluster.

1. Each task resolves its place (:class:`SlurmClusterResolver`) and starts a
   :class:`~slurm_resolver.server.Server` bound to its node's address (never ``0.0.0.0``),
   on port 0 (or ``port``), and reserves a spare free port for a framework.
2. The tasks exchange ``(job, index, rank, node, host, bound port, GPUs, spare port)``:
   - under an MPI launcher (``mpirun``, ``mpiexec``): an ``allgather``, rank 0's token
     included (srun steps, even with ``--mpi=pmix|pmi2``, use the rendezvous: MPI is not
     initialised where it is not needed, and an MPI library may not speak srun's PMI);
   - otherwise a rendezvous on rank 0's server. Rank 0's node is known to every task from
     Slurm's layout; its port is the first free one of a list every task derives from the
     launch's key (``<job id>.<step id>``), so two jobs on one node do not collide, and a
     server of another job found on a candidate port refuses the key and is skipped.
     Each task registers and receives the job's token, then waits for the full table.
3. Every task builds the same ClusterSpec from the table and verifies its peers (all of
   them up to 64 tasks, else its ring neighbours and rank 0): each must answer gRPC health
   and, with the token, name itself as the expected task of the same launch.

A rank that never arrives, dies, or cannot be reached makes every other rank fail within
``timeout`` with an error naming the missing tasks (job, index, node). The token lives in
memory only: never in the environment or on a command line.
"""

from __future__ import annotations

import hashlib
import secrets
import socket
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from .cluster import Cluster
from .cluster_spec import ClusterSpec
from .environment import snapshot
from .errors import ConfigurationError, ResolutionError
from .exchange import Exchange, MPIExchange
from .resolvers.base import ClusterResolver
from .resolvers.slurm import SlurmClusterResolver
from .server import CoordinationState, Server, credentials

__all__ = ["bootstrap", "Bootstrapped", "Peer", "job_key", "rendezvous_ports"]

_RANGE = (20000, 40000)


@dataclass(frozen=True)
class Peer:
    """One task of the verified cluster, with the port its server actually bound."""

    rank: int
    job: str
    index: int
    node: str
    host: str
    port: int
    gpus: tuple[str, ...] = ()
    spare_port: int = 0

    @property
    def address(self) -> str:
        """``host:port`` of the task's server."""
        return f"{self.host}:{self.port}"


@dataclass
class Bootstrapped(ClusterResolver):
    """The verified cluster: a resolver carrying the final spec and this task's running server."""

    peers: tuple[Peer, ...]
    rank: int
    server: Server | None
    launcher: str
    job_key: str
    _token: str = field(repr=False, default="")
    _cluster: Cluster | None = field(repr=False, default=None)
    timings: dict[str, float] = field(default_factory=dict)
    """Seconds spent in each phase: resolve, server, exchange, verify, barrier."""

    def __post_init__(self) -> None:
        me = self.peers[self.rank]
        self._task_type, self._task_id, self._rpc_layer = me.job, me.index, "grpc"

    @property
    def me(self) -> Peer:
        """This task."""
        return self.peers[self.rank]

    @property
    def world_size(self) -> int:
        """Number of tasks."""
        return len(self.peers)

    def cluster_spec(self) -> ClusterSpec:
        """Job names to the addresses the servers bound, in task order."""
        jobs: dict[str, dict[int, str]] = {}
        for peer in self.peers:
            jobs.setdefault(peer.job, {})[peer.index] = peer.address
        return ClusterSpec(jobs)

    def describe(self) -> dict[str, Any]:
        """This task and the cluster as plain data (``SLURM_RESOLVER_TASK``, ``show --bootstrapped``)."""
        return {"task_type": self.me.job, "task_id": self.me.index, "rank": self.rank,
                "world_size": self.world_size, "node": self.me.node, "address": self.me.address,
                "cluster": self.cluster_spec().as_dict(), "gpus": list(self.me.gpus), "launcher": self.launcher}

    @classmethod
    def from_cluster(cls, cluster: Cluster) -> Bootstrapped:
        """A view of a resolved (not bootstrapped) cluster: planned ports, no server."""
        if cluster.me is None:
            raise ConfigurationError(f"the {cluster.launcher} step is not a task of the job",
                                     "run this inside srun or mpirun")
        peers = []
        for rank in range(cluster.world_size):
            t = cluster.task(rank)
            host, _, port = t.address.rpartition(":")
            peers.append(Peer(rank, t.job, t.index, t.node, host, int(port), tuple(t.gpus or ()), int(port)))
        return cls(tuple(peers), cluster.rank or 0, None, cluster.launcher, "", "", cluster)

    def framework_spec(self) -> ClusterSpec:
        """The same cluster on each task's spare port: where a framework's servers listen
        (TensorFlow's, through TF_CONFIG) while ours keep serving coordination."""
        jobs: dict[str, dict[int, str]] = {}
        for peer in self.peers:
            jobs.setdefault(peer.job, {})[peer.index] = f"{peer.host}:{peer.spare_port}"
        return ClusterSpec(jobs)

    def barrier(self, name: str, timeout: float = 60.0) -> None:
        """Wait until every task has reached the barrier ``name`` (through rank 0's server)."""
        if self._cluster is None or self.server is None:
            raise ConfigurationError("this cluster was not made by bootstrap(): it has no server to meet at",
                                     "call slurm_resolver.bootstrap() first")
        _barrier(self._cluster, self.server.state, self.peers[0].address, self.rank, timeout, name)

    def master(self, task_type: str | None = None, task_id: int | None = None,
               rpc_layer: str | None = None) -> str:
        """The URL of a task, this one by default."""
        return self._task_master(task_type, task_id, rpc_layer)

    def num_accelerators(self, task_type: str | None = None, task_id: int | None = None,
                         config_proto: Any = None) -> dict[str, int]:
        """``{'GPU': n}`` for a task's GPUs as it reported them; ``{}`` for none."""
        task_type = self.task_type if task_type is None else task_type
        task_id = self.task_id if task_id is None else task_id
        for peer in self.peers:
            if peer.job == task_type and peer.index == task_id:
                return {"GPU": len(peer.gpus)} if peer.gpus else {}
        self.cluster_spec().task_address(task_type, task_id)  # type: ignore[arg-type]
        return {}  # pragma: no cover

    def stop(self, grace: float | None = 1.0) -> None:
        """Stop this task's server; calls in flight get ``grace`` seconds."""
        if self.server is not None:
            self.server.stop(grace)


def job_key(env: Mapping[str, str]) -> str:
    """What names one launch: the same in all its tasks, different in any other launch."""
    parts = [env.get(n, "") for n in ("SLURM_JOB_ID", "SLURM_STEP_ID", "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid")]
    if not parts[1]:
        parts[1] = env.get("SLURM_STEPID", "")
    key = ".".join(p for p in parts if p)
    return key or "local"


def rendezvous_ports(key: str, count: int = 12, span: tuple[int, int] = _RANGE) -> list[int]:
    """Rank 0's candidate ports, derived from the launch's key (the same in every task).

    >>> rendezvous_ports("1234.0")[:3] == rendezvous_ports("1234.0")[:3]
    True
    """
    low, high = span
    digest = hashlib.sha256(key.encode()).digest()
    ports: list[int] = []
    for i in range(0, len(digest) - 1, 2):
        port = low + int.from_bytes(digest[i:i + 2], "big") % (high - low)
        if port not in ports:
            ports.append(port)
    return ports[:count]


def _spare_port(host: str) -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.bind((host.strip("[]"), 0))
        return int(sock.getsockname()[1])


def _task_pb(peer: Peer) -> Any:
    from .proto import coordination_pb2 as pb

    return pb.Task(job=peer.job, index=peer.index, rank=peer.rank, node=peer.node, host=peer.host,
                   port=peer.port, gpus=list(peer.gpus), spare_port=peer.spare_port)


def _peer(task: Any) -> Peer:
    return Peer(task.rank, task.job, task.index, task.node, task.host, task.port, tuple(task.gpus), task.spare_port)


def _missing_error(cluster: Cluster, missing: Sequence[int], timeout: float, how: str) -> ResolutionError:
    named = [cluster.task(r) for r in missing]
    shown = ", ".join(f"{t.job}:{t.index} (rank {t.rank}) on {t.node}" for t in named[:8])
    more = f" and {len(named) - 8} more" if len(named) > 8 else ""
    return ResolutionError(
        f"bootstrap: {len(named)} of {cluster.world_size} tasks did not {how} within {timeout:g} s: {shown}{more}",
        "check those tasks' output for an earlier error; every task must call bootstrap(); raise timeout if "
        "they start slowly")


def _rendezvous(cluster: Cluster, me: Peer, state: CoordinationState, ports: Sequence[int],
                rank0_host: str, timeout: float) -> tuple[list[Peer], str]:
    """Register with rank 0's server and wait for the whole table."""
    import grpc

    from .proto import coordination_pb2 as pb
    from .proto import coordination_pb2_grpc as rpc

    deadline = time.monotonic() + timeout
    request = pb.RegisterRequest(job_key=state.job_key, task=_task_pb(me), world_size=cluster.world_size)
    pause = 0.05
    while True:
        for port in ports:
            with grpc.insecure_channel(f"{rank0_host}:{port}") as channel:
                try:
                    reply = rpc.CoordinationStub(channel).Register(request, timeout=2.0)
                except grpc.RpcError as exc:
                    if exc.code() == grpc.StatusCode.INVALID_ARGUMENT:
                        raise ResolutionError(f"bootstrap: rank 0 refused this task: {exc.details()}",
                                              "start every task of the step with the same command") from None
                    continue  # not up yet, or another job's server on a candidate port
                stub = rpc.CoordinationStub(channel)
                while True:  # short polls until every task registered or the deadline passes
                    try:
                        table = stub.Table(pb.TableRequest(timeout=max(0.0, deadline - time.monotonic())),
                                           timeout=10.0, metadata=credentials(reply.token))
                    except grpc.RpcError as exc:
                        rank0 = cluster.task(0)
                        raise ResolutionError(
                            f"bootstrap: rank 0 ({rank0.job}:{rank0.index} on {rank0.node}) ended the rendezvous "
                            f"before every task registered ({exc.code().name})",
                            "check rank 0's output for the error; raise timeout if tasks start slowly") from None
                    if not table.missing:
                        return [_peer(t) for t in table.tasks], reply.token
                    if time.monotonic() > deadline:
                        raise _missing_error(cluster, table.missing, timeout, "register with rank 0")
        if time.monotonic() > deadline:
            rank0 = cluster.task(0)
            raise ResolutionError(
                f"bootstrap: rank 0 ({rank0.job}:{rank0.index} on {rank0.node}) did not answer on {rank0_host} at "
                f"any of its rendezvous ports {list(ports)} within {timeout:g} s",
                "check rank 0's output for an error; make sure it calls bootstrap(); raise timeout")
        time.sleep(pause)
        pause = min(pause * 2, 0.5)


def _verify(peers: Sequence[Peer], rank: int, key: str, token: str, cluster: Cluster, timeout: float,
            verify: str | int) -> int:
    """Check that every chosen peer answers health and names itself; returns how many were checked."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from .proto import coordination_pb2 as pb
    from .proto import coordination_pb2_grpc as rpc

    n = len(peers)
    if verify == "none" or n == 1:
        return 0
    if verify == "all" or (verify == "auto" and n <= 64):
        chosen = [r for r in range(n) if r != rank]
    else:
        k = 2 if verify == "auto" else int(verify)
        chosen = sorted({(rank + d) % n for d in range(-k, k + 1)} | {0} - {rank})

    def ask(channel: Any) -> tuple[Any, Any]:
        health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=timeout)
        # A peer stores the job's token a moment after it learns it: retry a refusal briefly.
        settle = time.monotonic() + 2.0
        while True:
            try:
                return health, rpc.CoordinationStub(channel).WhoAreYou(pb.Empty(), timeout=timeout,
                                                                       metadata=credentials(token))
            except grpc.RpcError as exc:
                if exc.code() != grpc.StatusCode.UNAUTHENTICATED or time.monotonic() > settle:
                    raise
                time.sleep(0.05)

    def check(r: int) -> None:
        peer = peers[r]
        with grpc.insecure_channel(peer.address) as channel:
            try:
                health, who = ask(channel)
            except grpc.RpcError as exc:
                if exc.code() == grpc.StatusCode.UNAUTHENTICATED:
                    raise ResolutionError(
                        f"bootstrap: the server at {peer.address}, expected to be {peer.job}:{peer.index} on "
                        f"{peer.node}, belongs to another job (it refused this job's token)",
                        "another job reuses the port: run bootstrap again") from None
                raise ResolutionError(
                    f"bootstrap: task {peer.job}:{peer.index} (rank {r}) on {peer.node} does not answer at "
                    f"{peer.address} ({exc.code().name})",
                    "the task died or a firewall blocks the port; check its output") from None
        if health.status != health_pb2.HealthCheckResponse.SERVING or who.job_key != key or who.task.rank != r:
            raise ResolutionError(f"bootstrap: the server at {peer.address} is not {peer.job}:{peer.index} of "
                                  f"this launch (it says {who.job_key} rank {who.task.rank})",
                                  "another job reuses the port: run bootstrap again")
        if who.task.node != peer.node or (who.task.job, who.task.index) != (peer.job, peer.index):
            raise ResolutionError(
                f"bootstrap: rank {r} says it is {who.task.job}:{who.task.index} on {who.task.node}, but the "
                f"table has {peer.job}:{peer.index} on {peer.node}",
                "tasks resolved different clusters: give every task the same jobs and launch")

    with ThreadPoolExecutor(max_workers=min(8, len(chosen))) as pool:
        list(pool.map(check, chosen))
    return len(chosen)


def _barrier(cluster: Cluster, state: CoordinationState, rank0: str, rank: int, timeout: float,
             name: str = "verified") -> None:
    """Return once every task has reached ``name`` (after verification: so that none stops a server
    still being checked)."""
    import grpc

    from .proto import coordination_pb2 as pb
    from .proto import coordination_pb2_grpc as rpc

    if rank == 0:
        with state.changed:
            state.barriers.setdefault(name, set()).add(0)
            state.changed.notify_all()
        if not state.wait_for(lambda: len(state.barriers[name]) >= cluster.world_size, timeout):
            arrived = state.barriers[name]
            raise _missing_error(cluster, [r for r in range(cluster.world_size) if r not in arrived], timeout,
                                 f"reach the barrier {name!r}")
        # Leave only once every peer's barrier call was answered: stopping this server right after
        # must not cancel a reply still on its way.
        state.wait_for(lambda: state.released.get(name, 0) >= cluster.world_size - 1, 5.0)
        return
    deadline = time.monotonic() + timeout
    with grpc.insecure_channel(rank0) as channel:
        while True:  # short polls until everyone arrived or the deadline passes
            try:
                rpc.CoordinationStub(channel).Barrier(
                    pb.BarrierRequest(name=name, rank=rank, count=cluster.world_size,
                                      timeout=max(0.0, deadline - time.monotonic())),
                    timeout=10.0, metadata=credentials(state.token))
                return
            except grpc.RpcError as exc:
                if exc.code() != grpc.StatusCode.DEADLINE_EXCEEDED or time.monotonic() > deadline:
                    raise ResolutionError(f"bootstrap: not every task reached the barrier {name!r} in time "
                                          f"({exc.details()})", "check the other tasks' output for an error") from None


def bootstrap(resolver: SlurmClusterResolver | None = None, *, exchange: str | Exchange = "auto",
              timeout: float = 60.0, port: int = 0, verify: str | int = "auto",
              environ: Mapping[str, str] | None = None, rendezvous: Sequence[int] | None = None) -> Bootstrapped:
    """Start this task's server, agree with every other task on one cluster, verify it.

    Args:
        resolver: where this task stands (default ``SlurmClusterResolver()``).
        exchange: ``'auto'`` (MPI under an MPI launch, else the rendezvous), ``'mpi'``,
            ``'rendezvous'``, or an :class:`~slurm_resolver.exchange.Exchange`.
        timeout: seconds for the whole exchange and for each verification call.
        port: the port to bind (0: any free port).
        verify: ``'auto'``, ``'all'``, ``'none'``, or how many ring neighbours to check.
        environ: variables instead of ``os.environ`` (tests).
        rendezvous: rank 0's candidate ports (default: derived from the launch's key,
            or ``SLURM_RESOLVER_RENDEZVOUS_PORTS``).
    """
    clock = [time.perf_counter()]
    timings: dict[str, float] = {}

    def lap(phase: str) -> None:
        now = time.perf_counter()
        timings[phase] = now - clock[0]
        clock[0] = now

    env = snapshot(environ)
    resolver = resolver or SlurmClusterResolver(environ=environ, check_port=False, auto_set_gpu=False)
    cluster = resolver.cluster
    if cluster.me is None or cluster.launcher == "batch":
        raise ConfigurationError(
            f"bootstrap runs in every task of a launch, not in the {cluster.launcher} step",
            "start the tasks with srun (or mpirun) and call bootstrap() in each of them")
    task = cluster.me
    host = task.address.rpartition(":")[0]
    key = job_key(env)
    ports = list(rendezvous or ([int(p) for p in env["SLURM_RESOLVER_RENDEZVOUS_PORTS"].split(",")]
                                if env.get("SLURM_RESOLVER_RENDEZVOUS_PORTS") else rendezvous_ports(key)))
    # MPI only where the launcher needs it: an srun step (even with --mpi=...) uses the rendezvous,
    # since the MPI library may not speak the PMI that srun offers (Debian's Open MPI has no PMI-2).
    use_mpi = not isinstance(exchange, str) or exchange == "mpi" or (
        exchange == "auto" and cluster.mpi and cluster.launcher in ("openmpi", "mpich", "pmix"))
    if isinstance(exchange, str) and exchange not in ("auto", "mpi", "rendezvous"):
        raise ConfigurationError(f"exchange={exchange!r} is not known", "use 'auto', 'mpi' or 'rendezvous'")
    rank = task.rank
    state = CoordinationState(key, secrets.token_urlsafe(24), cluster.world_size)
    spec = {task.job: {task.index: f"{host}:{port}"}}
    bind = ports if (rank == 0 and not use_mpi and not port) else None
    lap("resolve")
    workers = min(1024, 2 * cluster.world_size + 16) if rank == 0 else 16  # rank 0 serves every poll
    server = Server(spec, task.job, task.index, state=state, ports=bind, max_workers=workers)
    lap("server")
    try:
        me = Peer(rank, task.job, task.index, task.node, host, server.port, tuple(task.gpus or ()), _spare_port(host))
        state.identity = _task_pb(me)
        if use_mpi:
            group = exchange if not isinstance(exchange, str) else MPIExchange(timeout=timeout)
            rows = group.allgather({"peer": me.__dict__, "token": state.token if rank == 0 else ""})
            peers = [Peer(**{**row["peer"], "gpus": tuple(row["peer"]["gpus"])}) for row in rows]
            state.token = rows[0]["token"]
        elif rank == 0:
            with state.changed:
                state.table[0] = state.identity
            if not state.wait_for(lambda: len(state.table) >= cluster.world_size, timeout):
                raise _missing_error(cluster, [r for r in range(cluster.world_size) if r not in state.table],
                                     timeout, "register with rank 0")
            peers = [_peer(state.table[r]) for r in range(cluster.world_size)]
        else:
            peers, state.token = _rendezvous(cluster, me, state, ports, cluster.task(0).address.rpartition(":")[0],
                                             timeout)
        lap("exchange")
        _verify(peers, rank, key, state.token, cluster, max(5.0, min(timeout, 30.0)), verify)
        lap("verify")
        if use_mpi:
            group.allgather("verified")
        else:
            _barrier(cluster, state, peers[0].address, rank, timeout)
        lap("barrier")
    except BaseException:
        server.stop(2.0)  # calls in flight (a peer waiting for the table) get their answer
        raise
    return Bootstrapped(tuple(peers), rank, server, cluster.launcher, key, state.token, cluster, timings)
