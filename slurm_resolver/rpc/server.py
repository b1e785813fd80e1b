"""A gRPC server per task, shaped like ``tf.train.Server``.

It serves gRPC health checking (``grpc.health.v1``, open to any client) and the
coordination service of ``coordination.proto`` through generic handlers on raw bytes, so
that the same :class:`~slurm_resolver.rpc.coordinator.Coordinator` coroutines answer here
and in the in-process network. ``WhoAreYou`` needs the job's token; any other method (a
framework's) is answered ``UNAVAILABLE``. The server is gRPC's asyncio server, on an event
loop thread (:class:`~slurm_resolver.rpc.loop.LoopThread`); grpc is imported when a server
is made.
"""

from __future__ import annotations

import socket
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from ..cluster_spec import ClusterSpec
from ..errors import ConfigurationError, ResolutionError
from ..optional import import_optional
from .coordinator import Coordinator, Identity, Refused
from .loop import LoopThread
from .transport import end_call
from .wire import CHUNK, MAX_MESSAGE

__all__ = ["Server", "TOKEN_KEY", "JOIN", "WHO", "WATCH", "grpc_module", "bindable", "open_server"]

TOKEN_KEY = "x-slurm-resolver-token"
SERVICE = "slurm_resolver.v2.Coordination"
JOIN = f"/{SERVICE}/Join"
WHO = f"/{SERVICE}/WhoAreYou"
WATCH = f"/{SERVICE}/Watch"


SERVER_OPTIONS = (
    ("grpc.so_reuseport", 0),  # a port another launch bound is not shared with it
    ("grpc.max_receive_message_length", MAX_MESSAGE),
    ("grpc.max_concurrent_streams", 64),  # calls of one connection; a task makes a few at once
    ("grpc.max_connection_idle_ms", 600_000),  # an idle peer's connection closes (its channel reconnects)
)
"""Options of every task's server: bounded messages and calls, whoever connects."""


def grpc_module() -> Any:
    """The grpc module (a dependency of every installation)."""
    return import_optional("grpc", "", "A slurm_resolver Server")


def bindable(host: str) -> str:
    """The IP to bind for ``host`` (a name or an address), bracketed for IPv6."""
    try:
        info = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)[0]
    except (OSError, UnicodeError):
        raise ResolutionError(f"cannot bind a server on {host}: the name does not resolve",
                              "add it to DNS or /etc/hosts, or pass bind_host") from None
    ip = str(info[4][0])
    return f"[{ip}]" if info[0] == socket.AF_INET6 else ip


def _handlers(grpc: Any, coordinator: Coordinator) -> Any:
    codes = {"foreign": grpc.StatusCode.FAILED_PRECONDITION, "not_leader": grpc.StatusCode.FAILED_PRECONDITION,
             "invalid": grpc.StatusCode.INVALID_ARGUMENT, "unauthenticated": grpc.StatusCode.UNAUTHENTICATED,
             "deadline": grpc.StatusCode.DEADLINE_EXCEEDED}
    most_chunks = coordinator.world_size // CHUNK + 2
    most_bytes = MAX_MESSAGE + 512 * coordinator.world_size  # a whole table, with GPU lists, fits

    def deadline(context: Any) -> float:
        left = context.time_remaining()
        return time.monotonic() + (3600.0 if left is None else max(0.0, left))

    async def join(requests: AsyncIterator[bytes], context: Any) -> AsyncIterator[bytes]:
        chunks: list[bytes] = []
        size = 0
        async for chunk in requests:
            if not chunks:
                try:
                    coordinator.precheck(chunk)  # another launch's call is refused before the rest is read
                except Refused as exc:
                    await context.abort(codes[exc.code], f"{exc.code}: {exc.detail}")
            chunks.append(chunk)
            size += len(chunk)
            if len(chunks) > most_chunks or size > most_bytes:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "invalid: more than the job's tasks could send")
        try:
            name, result = await coordinator.join(chunks, deadline(context))
        except Refused as exc:
            await context.abort(codes[exc.code], f"{exc.code}: {exc.detail}")
        try:
            for chunk in result:
                yield chunk
        finally:
            coordinator.rounds.sent(name)

    async def who(request: bytes, context: Any) -> bytes:
        token = dict(context.invocation_metadata() or ()).get(TOKEN_KEY, "")
        try:
            return await coordinator.who(token, deadline(context))
        except Refused as exc:
            await context.abort(codes[exc.code], f"{exc.code}: {exc.detail}")
            raise  # pragma: no cover - abort raises

    async def reject(request: bytes, context: Any) -> bytes:  # a framework's method, before its server
        await context.abort(grpc.StatusCode.UNAVAILABLE, "not served here yet (slurm_resolver's bootstrap server)")
        raise AssertionError  # pragma: no cover - abort raises

    async def watch(requests: AsyncIterator[bytes], context: Any) -> AsyncIterator[bytes]:
        events: Any = None
        try:
            events = coordinator.watch(requests)
            async for event in events:
                yield event
        except Refused as exc:
            await context.abort(codes[exc.code], f"{exc.code}: {exc.detail}")
        finally:  # a cancelled call ends the watch at once (its end is the news)
            await end_call(events)

    methods = {JOIN: grpc.stream_stream_rpc_method_handler(join), WHO: grpc.unary_unary_rpc_method_handler(who),
               WATCH: grpc.stream_stream_rpc_method_handler(watch)}
    other = grpc.unary_unary_rpc_method_handler(reject)

    class Handlers(grpc.GenericRpcHandler):  # type: ignore[misc]
        def service(self, details: Any) -> Any:
            return methods.get(details.method, other)

    return Handlers()


async def open_server(host: str, ports: Sequence[int], coordinator: Coordinator) -> tuple[Any, int]:
    """A started gRPC asyncio server for ``coordinator`` on the first free port of ``ports``."""
    grpc = grpc_module()
    from grpc import aio
    from grpc_health.v1 import health, health_pb2, health_pb2_grpc

    address = bindable(host)
    for port in ports:
        server = aio.server(options=SERVER_OPTIONS)
        checks = health.aio.HealthServicer()
        await checks.set("", health_pb2.HealthCheckResponse.SERVING)
        health_pb2_grpc.add_HealthServicer_to_server(checks, server)
        server.add_generic_rpc_handlers((_handlers(grpc, coordinator),))
        try:
            bound = server.add_insecure_port(f"{address}:{port}")
        except RuntimeError:
            bound = 0
        if bound:
            await server.start()
            return server, bound
    raise ResolutionError(f"no port among {list(ports)[:8]} could be bound on {host} ({address})",
                          "free a port, or pass another port range")


class Server:
    """An in-process gRPC server for one task, shaped like ``tf.train.Server``.

    Args:
        server_or_cluster_def: a ClusterSpec (ours or TensorFlow's), a dict, or a
            ``ClusterDef``; the task's address in it gives the host and port to bind
            (port 0 binds a free port, read back from :attr:`port`).
        job_name: this task's job; optional when the cluster has one task.
        task_index: this task's index; optional when the cluster has one task.
        protocol: only ``'grpc'``.
        config: unused (TensorFlow's ``ConfigProto``), accepted for compatibility.
        start: start serving at once.
        coordinator: what the coordination service answers (a fresh one by default).
        bind_host: address to bind instead of the host in the cluster (never ``0.0.0.0``
            unless asked).
        ports: ports to try in order instead of the cluster's.
        loop: the event loop thread to serve on (default: one of its own).
    """

    def __init__(self, server_or_cluster_def: Any, job_name: str | None = None, task_index: int | None = None,
                 protocol: str | None = "grpc", config: Any = None, start: bool = True, *,
                 coordinator: Coordinator | None = None, bind_host: str | None = None,
                 ports: Sequence[int] | None = None, loop: LoopThread | None = None) -> None:
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
        self.coordinator = coordinator or Coordinator(Identity("local", 0, host, job_name, task_index), 1)
        self._own_loop = loop is None
        self._loop = loop or LoopThread()
        self._server, self.port = self._loop.run(
            open_server(bind_host or host, [int(port)] if ports is None else list(ports), self.coordinator))
        del start  # gRPC's asyncio server serves once bound; start() is kept for TensorFlow's shape

    @property
    def target(self) -> str:
        """``grpc://host:port`` of this server."""
        return f"grpc://{self.host}:{self.port}"

    @property
    def server_def(self) -> dict[str, Any]:
        """The cluster, job and task this server was made for."""
        return {"cluster": self.cluster_spec.as_dict(), "job_name": self.job_name, "task_index": self.task_index}

    def start(self) -> None:
        """Start serving (the server serves from the moment it is made; kept for TensorFlow's shape)."""

    def join(self) -> None:
        """Block until the server stops."""
        self._loop.run(self._server.wait_for_termination())

    def stop(self, grace: float | None = None) -> None:
        """Stop serving; calls in flight get ``grace`` seconds to finish."""
        self._loop.run(self._server.stop(grace))
        if self._own_loop:
            self._loop.close()

    @staticmethod
    def create_local_server(config: Any = None, start: bool = True) -> Server:
        """A single-task server on ``localhost`` and a free port."""
        return Server({"localhost": ["localhost:0"]}, protocol="grpc", config=config, start=start)
