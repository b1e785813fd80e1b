"""A gRPC server per task, shaped like ``tf.train.Server``, and gRPC's settings for the bootstrap.

The server is gRPC's asyncio server, on an event loop thread (`LoopThread`), answering the
coordination service (`slurm_resolver.rpc.network.service`, which holds the bounds every caller meets);
grpc is imported, with `GRPC_DEFAULTS` set, when a server or a network is made.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import resource
import socket
import sys
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ...addresses import lookup, port_in_use
from ...cluster_spec import ClusterSpec
from ...environment import export_defaults, grpc_without_proxy, snapshot
from ...errors import ConfigurationError, ResolutionError
from ...optional import import_optional
from ..shapes import Answering, Call
from ..transport import A
from ..wire import MAX_MESSAGE
from .callers import MOST_CALLS
from .connections import forget, incoming_limit, watch
from .loop import LoopThread
from .service import CoordinationService, Underway

__all__ = ["Server"]

log = logging.getLogger("slurm_resolver")

LEAN_OPTIONS = (
    # No bandwidth probes: a receiver pings its peer as data comes in, to size its windows for bulk
    # transfers. The bootstrap's messages are small (a table is 6 bytes a rank), and each probe is
    # one more wake-up on both sides: without them a task costs a tenth less CPU (benchmarks/README.md).
    ("grpc.http2.bdp_probe", 0),
    ("grpc.enable_channelz", 0),  # no introspection records of every channel, server and call
)
"""Options of every channel and server that spare work the bootstrap has no use for."""

SERVER_OPTIONS = (
    *LEAN_OPTIONS,
    ("grpc.so_reuseport", 0),  # a port another launch bound is not shared with it
    ("grpc.max_receive_message_length", MAX_MESSAGE),
    ("grpc.max_concurrent_streams", 64),  # calls of one connection; a task makes a few at once
    ("grpc.max_connection_idle_ms", 600_000),  # an idle peer's connection closes (its channel reconnects)
    ("grpc.server_handshake_timeout_ms", 10_000),  # a connection that never speaks HTTP/2 is closed
    # A peer that watches this task from another node pings it on a connection of its own with no call open
    # (`GrpcNetwork.lost`), as often as every 50 ms with the shortest patience: pings are answered by gRPC's core
    # (no Python, the GIL not needed). Without both options a server allows such pings every two hours and
    # sends the peer away ("too_many_pings"); a caller that pings faster still is sent away after two strikes.
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_ping_interval_without_data_ms", 50),  # the least time between pings the server takes
)
"""Options of every task's server: bounded messages and calls, whoever connects."""


GRPC_DEFAULTS = {
    "GRPC_VERBOSITY": "ERROR",  # gRPC core's INFO lines (one per closed connection) are noise in a job's output
    "GRPC_ENABLE_FORK_SUPPORT": "false",  # its fork handlers crash a child forked beside the server's threads
    # Names resolved as the rest of the node resolves them (getaddrinfo: /etc/hosts, NIS, LDAP and
    # DNS, as nsswitch.conf says), not by c-ares, which reads only /etc/hosts and DNS and fails where
    # a cluster's node names live elsewhere (grpc/grpc#34709, #40574). It is cheaper too: c-ares
    # read four configuration files for every server's address (a literal IP), about 45 system
    # calls a task, a twentieth of a task's CPU in the bootstrap (benchmarks/README.md).
    "GRPC_DNS_RESOLVER": "native",
}
"""gRPC core's settings, read once when grpc is imported; a user's own value wins."""


_grpc: Any = None
"""The grpc module, once `grpc_module()` prepared the environment and imported it."""


def grpc_module() -> Any:
    """The grpc module (a dependency of every installation), imported with `GRPC_DEFAULTS` (and
    `grpc_without_proxy()`), written into the environment on the first call only: every task's
    server and network asks for it, and a copy of the environment per call cost more than a
    seal (gRPC core reads its variables once anyway).

    With gRPC's fork support on (its default since grpcio 1.5x), about one process in three
    forked while a task's server runs (a DataLoader's workers, multiprocessing, os.fork) died of
    SIGSEGV in gRPC's fork handlers before it ran a line of its own.
    """
    global _grpc
    if _grpc is not None:
        return _grpc
    # And gRPC's proxy off where an HTTP proxy is set: this task's own channels ignore it, but a
    # framework's (TensorFlow's, JAX's) in this process and its children would send their calls
    # between the job's tasks to it.
    written = export_defaults({**GRPC_DEFAULTS, **grpc_without_proxy(snapshot())})
    if "GRPC_ENABLE_FORK_SUPPORT" in written and "grpc" in sys.modules:
        log.warning("slurm_resolver: grpc was imported before slurm_resolver, with gRPC's fork support on: a "
                    "process forked while this task's server runs may die of SIGSEGV. Set "
                    "GRPC_ENABLE_FORK_SUPPORT=false in the job's environment, or import slurm_resolver's "
                    "servers before grpc")
    _grpc = import_optional("grpc", "", "A slurm_resolver Server")
    import grpc.aio  # noqa: F401 - every server and channel of ours is asyncio's: ``grpc.aio`` from now on

    return _grpc


@functools.lru_cache(maxsize=64)
def bindable(host: str) -> str:
    """The IP to bind for ``host`` (a name or an address), bracketed for IPv6; looked up once a process
    (a task binds its server and its spare port on its node's address; a name that does not resolve is
    asked again)."""
    try:
        info = lookup(host, type=socket.SOCK_STREAM)[0]
    except (OSError, UnicodeError):
        raise ResolutionError(f"cannot bind a server on {host}: the name does not resolve",
                              "add it to DNS or /etc/hosts, or pass bind_host") from None
    ip = str(info[4][0])
    return f"[{ip}]" if info[0] == socket.AF_INET6 else ip


MOST_RPCS = 4 * MOST_CALLS
"""gRPC's own bound on one server's calls at once: a backstop behind `MOST_CALLS` (see `open_server`)."""


def server_options(files: int) -> tuple[tuple[str, Any], ...]:
    """`SERVER_OPTIONS`, and gRPC's bound on the server's connections in a process that may open
    ``files`` files (`incoming_limit`: beyond it gRPC closes a connection as it accepts it, so that
    the process never runs out of files; without it, gRPC's listener stops accepting anyone's)."""
    most = incoming_limit(files)
    return SERVER_OPTIONS if most is None else (*SERVER_OPTIONS, ("grpc.max_allowed_incoming_connections", most))


async def open_server(host: str, ports: Sequence[int], handlers: Callable[[int], A] | None,
                      calls: Mapping[str, Call[Any]] | None = None) -> tuple[Any, int, A | None]:
    """A started gRPC asyncio server on the first free port of ``ports``, the port, and the
    handlers made for the port it bound, which answer the calls of ``calls`` (by gRPC method: the table,
    `slurm_resolver.rpc.calls`); no handlers: every call of the service is refused. Its callers are held to
    their share of connections (`slurm_resolver.rpc.network.connections`) until `stop_server`."""
    grpc = grpc_module()
    aio = grpc.aio
    address = bindable(host)
    options = server_options(resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    for port in ports:
        if port and port_in_use(address.strip("[]"), port):
            continue  # taken (another launch's leader, a squatter): passed over without gRPC's error line
        # gRPC's own bound is a backstop: every call of the protocol meets `MOST_CALLS` (and its
        # caller's share) as it opens, in _Guard; a stranger's calls beyond its share end at once.
        server = aio.server(options=options, maximum_concurrent_rpcs=MOST_RPCS)
        try:
            bound = server.add_insecure_port(f"{address}:{port}")
        except RuntimeError:
            bound = 0
        if bound:
            made = handlers(bound) if handlers is not None else None
            underway = Underway()
            _SERVING[server] = underway, (address.strip("[]"), bound)
            server.add_generic_rpc_handlers((CoordinationService(grpc, made, calls or {}, address.strip("[]"),
                                                                 underway, bound),))
            await server.start()
            watch((address.strip("[]"), bound))
            return server, bound, made
    raise ResolutionError(f"no port among {list(ports)[:8]} could be bound on {host} ({address})",
                          "free a port, or pass another port range")


_SERVING: weakref.WeakKeyDictionary[Any, tuple[Underway, tuple[str, int]]] = weakref.WeakKeyDictionary()
"""The calls under way at each server of `open_server`, and its address and port."""


async def stop_server(server: Any, grace: float | None) -> None:
    """Stop a server of `open_server`: no call is taken from now on, calls in flight get
    ``grace`` seconds to finish, and the server ends what is left itself, so that gRPC aborts nothing
    (and logs nothing: a job's output holds its own last words only)."""
    serving = _SERVING.pop(server, None)
    if serving is None:
        await server.stop(grace)
        return
    underway, where = serving
    forget(where)
    stopping = asyncio.ensure_future(server.stop((grace or 0.0) + 1.0))
    await asyncio.sleep(0)  # the shutdown begins: no call is taken from here on
    await underway.end(grace or 0.0)  # ours end first: gRPC finds none to abort
    await stopping


class Server:
    """An in-process gRPC server for one task, shaped like ``tf.train.Server``.

    Args:
        server_or_cluster_def: a ClusterSpec (ours or TensorFlow's), a dict, or a
            ``ClusterDef``; the task's address in it gives the host and port to bind
            (port 0 binds a free port, read back from `port`).
        job_name: this task's job; optional when the cluster has one task.
        task_index: this task's index; optional when the cluster has one task.
        protocol: only ``'grpc'``.
        config: unused (TensorFlow's ``ConfigProto``), accepted for compatibility.
        start: start serving at once.
        handlers: what the coordination service answers, made for the port bound (by
            default it answers health checks only, and refuses every call of the service).
        calls: the calls ``handlers`` answer, by gRPC method (the table, `slurm_resolver.rpc.calls.TABLE`).
        bind_host: address to bind instead of the host in the cluster (never ``0.0.0.0``
            unless asked).
        ports: ports to try in order instead of the cluster's.
        loop: the event loop thread to serve on (default: one of its own).
    """

    def __init__(self, server_or_cluster_def: Any, job_name: str | None = None, task_index: int | None = None,
                 protocol: str | None = "grpc", config: Any = None, start: bool = True, *,
                 handlers: Callable[[int], Answering] | None = None, calls: Mapping[str, Call[Any]] | None = None,
                 bind_host: str | None = None, ports: Sequence[int] | None = None, loop: LoopThread | None = None
                 ) -> None:
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
        self._own_loop = loop is None
        self._loop = loop or LoopThread()
        self._server, self.port, _ = self._loop.run(
            open_server(bind_host or host, [int(port)] if ports is None else list(ports), handlers, calls))
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
        self._loop.run(stop_server(self._server, grace))
        if self._own_loop:
            self._loop.close()

    @staticmethod
    def create_local_server(config: Any = None, start: bool = True) -> Server:
        """A single-task server on ``localhost`` and a free port."""
        return Server({"localhost": ["localhost:0"]}, protocol="grpc", config=config, start=start)
