"""A gRPC server per task, shaped like ``tf.train.Server``.

It serves gRPC health checking (``grpc.health.v1``, open to any client) and the
coordination service of ``proto/coordination.proto``: the bootstrap's rendezvous, an
identity that tells peers from foreign servers, a key-value store and a barrier. Every
coordination call except ``Register`` must carry the job's token; a call without it is
refused with ``UNAUTHENTICATED``. grpc is imported when a server is made, never at import.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from .cluster_spec import ClusterSpec
from .errors import ConfigurationError, MissingDependencyError, ResolutionError

__all__ = ["Server", "CoordinationState", "TOKEN_KEY"]

TOKEN_KEY = "x-slurm-resolver-token"
POLL = 1.0  # the longest a Table or Barrier call waits on the server; clients call again


def _grpc() -> Any:
    try:
        import grpc
    except ImportError:
        raise MissingDependencyError("grpc", "grpc", "A slurm_resolver Server") from None
    return grpc


class CoordinationState:
    """What one server coordinates: its identity, the rendezvous table, keys and barriers."""

    def __init__(self, job_key: str, token: str, world_size: int = 1) -> None:
        self.job_key = job_key
        self.token = token
        self.world_size = world_size
        self.identity: Any = None  # a coordination_pb2.Task, set once the task knows itself
        self.table: dict[int, Any] = {}
        self.values: dict[str, bytes] = {}
        self.barriers: dict[str, set[int]] = {}
        self.released: dict[str, int] = {}  # barrier calls answered, per barrier
        self.changed = threading.Condition()

    def wait_for(self, ready: Callable[[], bool], timeout: float) -> bool:
        """Wait until ``ready()`` (checked under the lock) or ``timeout`` seconds pass."""
        deadline = time.monotonic() + max(0.0, timeout)
        with self.changed:
            while not ready():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.changed.wait(min(left, 1.0))
            return True


def _servicer(state: CoordinationState) -> Any:
    grpc = _grpc()
    from .proto import coordination_pb2 as pb
    from .proto import coordination_pb2_grpc as rpc

    def authorised(context: Any) -> None:
        metadata = dict(context.invocation_metadata())
        if metadata.get(TOKEN_KEY) != state.token:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "not a task of this job: wrong or missing token")

    class Coordination(rpc.CoordinationServicer):
        def Register(self, request: Any, context: Any) -> Any:  # noqa: N802 - gRPC's names
            if request.job_key != state.job_key:
                context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                              f"foreign job: this server belongs to {state.job_key}, not {request.job_key}")
            if request.world_size != state.world_size:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                              f"world size {request.world_size} differs from rank 0's {state.world_size}")
            with state.changed:
                state.table[request.task.rank] = request.task
                state.changed.notify_all()
            return pb.RegisterReply(token=state.token)

        def Table(self, request: Any, context: Any) -> Any:  # noqa: N802
            authorised(context)
            # Short polls: a waiting client holds a server thread at most POLL seconds.
            complete = state.wait_for(lambda: len(state.table) >= state.world_size, min(request.timeout, POLL))
            with state.changed:
                if not complete:
                    missing = [r for r in range(state.world_size) if r not in state.table]
                    return pb.TableReply(missing=missing)
                return pb.TableReply(tasks=[state.table[r] for r in sorted(state.table)])

        def WhoAreYou(self, request: Any, context: Any) -> Any:  # noqa: N802
            authorised(context)
            return pb.Identity(job_key=state.job_key, task=state.identity)

        def Set(self, request: Any, context: Any) -> Any:  # noqa: N802
            authorised(context)
            with state.changed:
                state.values[request.key] = request.value
                state.changed.notify_all()
            return pb.Empty()

        def Get(self, request: Any, context: Any) -> Any:  # noqa: N802
            authorised(context)
            if not state.wait_for(lambda: request.key in state.values, request.timeout):
                context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, f"key {request.key!r} was not set in time")
            return pb.KeyValue(key=request.key, value=state.values[request.key])

        def Barrier(self, request: Any, context: Any) -> Any:  # noqa: N802
            authorised(context)
            with state.changed:
                state.barriers.setdefault(request.name, set()).add(request.rank)
                state.changed.notify_all()
            if not state.wait_for(lambda: len(state.barriers[request.name]) >= request.count,
                                  min(request.timeout, POLL)):
                arrived = sorted(state.barriers[request.name])
                context.abort(grpc.StatusCode.DEADLINE_EXCEEDED,
                              f"barrier {request.name!r}: only ranks {arrived} of {request.count} arrived")
            with state.changed:
                state.released[request.name] = state.released.get(request.name, 0) + 1
                state.changed.notify_all()
            return pb.Empty()

    return Coordination()


class Server:
    """An in-process gRPC server for one task, shaped like ``tf.train.Server``.

    Args:
        server_or_cluster_def: a ClusterSpec (ours or TensorFlow's), a dict, or a
            ``ClusterDef``; the task's address in it gives the host and port to bind
            (port 0 binds a free port, read back from :attr:`port`).
        job_name, task_index: this task; optional when the cluster has one task.
        protocol: only ``'grpc'``.
        config: unused (TensorFlow's ``ConfigProto``), accepted for compatibility.
        start: start serving at once.
        state: the coordination state (job key and token); a fresh one by default.
        bind_host: address to bind instead of the host in the cluster (never ``0.0.0.0``
            unless asked).
    """

    def __init__(self, server_or_cluster_def: Any, job_name: str | None = None, task_index: int | None = None,
                 protocol: str | None = "grpc", config: Any = None, start: bool = True, *,
                 state: CoordinationState | None = None, bind_host: str | None = None,
                 ports: Sequence[int] | None = None, max_workers: int = 16) -> None:
        del config
        if protocol not in (None, "grpc"):
            raise ConfigurationError(f"protocol={protocol!r} is not supported", "use 'grpc'")
        spec = ClusterSpec(server_or_cluster_def)
        if job_name is None:
            if len(spec.jobs) != 1 or spec.num_tasks(spec.jobs[0]) != 1:
                raise ValueError("Must specify an explicit `job_name`.")
            job_name = spec.jobs[0]
        if task_index is None:
            if spec.num_tasks(job_name) != 1:
                raise ValueError("Must specify an explicit `task_index`.")
            task_index = spec.task_indices(job_name)[0]
        self.cluster_spec = spec
        self.job_name = job_name
        self.task_index = task_index
        host, _, port = spec.task_address(job_name, task_index).rpartition(":")
        self.host = host
        self.state = state or CoordinationState(job_key="local", token="")
        self._grpc = _grpc()
        self._workers = max_workers
        self._server, self.port = self._bind(bind_host or host, [int(port)] if ports is None else list(ports))
        self._started = False
        if start:
            self.start()

    def _bind(self, host: str, candidates: Sequence[int]) -> tuple[Any, int]:
        from grpc_health.v1 import health, health_pb2, health_pb2_grpc

        from .proto import coordination_pb2_grpc as rpc

        address = _bindable(host)
        for port in candidates:
            server = self._grpc.server(_executor(self._workers), options=[("grpc.so_reuseport", 0)])
            rpc.add_CoordinationServicer_to_server(_servicer(self.state), server)
            self.health = health.HealthServicer()
            self.health.set("", health_pb2.HealthCheckResponse.SERVING)
            health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
            server.add_generic_rpc_handlers((_not_served(self._grpc),))
            try:
                bound = server.add_insecure_port(f"{address}:{port}")
            except RuntimeError:
                bound = 0
            if bound:
                return server, bound
        raise ResolutionError(f"no port among {list(candidates)[:8]} could be bound on {host} ({address})",
                              "free a port, or pass another port range")

    @property
    def target(self) -> str:
        """``grpc://host:port`` of this server."""
        return f"grpc://{self.host}:{self.port}"

    @property
    def server_def(self) -> dict[str, Any]:
        """The cluster, job and task this server was made for."""
        return {"cluster": self.cluster_spec.as_dict(), "job_name": self.job_name, "task_index": self.task_index}

    def start(self) -> None:
        """Start serving (idempotent)."""
        if not self._started:
            self._server.start()
            self._started = True

    def join(self) -> None:
        """Block until the server stops."""
        self._server.wait_for_termination()

    def stop(self, grace: float | None = None) -> None:
        """Stop serving; calls in flight get ``grace`` seconds to finish."""
        self._server.stop(grace).wait()

    @staticmethod
    def create_local_server(config: Any = None, start: bool = True) -> Server:
        """A single-task server on ``localhost`` and a free port."""
        return Server({"localhost": ["localhost:0"]}, protocol="grpc", config=config, start=start)


def _not_served(grpc: Any) -> Any:
    """Any other method (a framework's, e.g. TensorFlow's WorkerService) is UNAVAILABLE, not
    UNIMPLEMENTED: clients retry it while the framework's own server takes over the port."""

    class NotServed(grpc.GenericRpcHandler):  # type: ignore[misc]
        def service(self, details: Any) -> Any:
            def reject(request: Any, context: Any) -> None:
                context.abort(grpc.StatusCode.UNAVAILABLE,
                              f"{details.method} is not served here yet (slurm_resolver's bootstrap server)")

            return grpc.unary_unary_rpc_method_handler(reject)

    return NotServed()


def _executor(workers: int) -> Any:
    from concurrent.futures import ThreadPoolExecutor

    return ThreadPoolExecutor(max_workers=workers, thread_name_prefix="slurm-resolver-grpc")


def _bindable(host: str) -> str:
    """The IP to bind for ``host`` (a name or an address), bracketed for IPv6."""
    try:
        info = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)[0]
    except (OSError, UnicodeError):
        raise ResolutionError(f"cannot bind a server on {host}: the name does not resolve",
                              "add it to DNS or /etc/hosts, or pass bind_host") from None
    ip = str(info[4][0])
    return f"[{ip}]" if info[0] == socket.AF_INET6 else ip


def credentials(token: str) -> tuple[tuple[str, str], ...]:
    """The call metadata that carries the job's token."""
    return ((TOKEN_KEY, token),)

