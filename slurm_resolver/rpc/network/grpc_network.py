"""The real network: gRPC's asyncio server per task, one channel per peer reused for every call."""

from __future__ import annotations

import asyncio
import functools
import socket
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Generic

from ...errors import ResolutionError
from ..messages import WireError
from ..primitives import integer
from ..shapes import SERVICE, Call, RoundCall, Stream, Unary
from ..transport import PROBE, A, CallFailure, Link, LinkError, Refusal, Served, within
from ..wire import MAX_ANSWER, MAX_MESSAGE, bundle, unbundle
from .server import LEAN_OPTIONS, bindable, grpc_module, open_server, stop_server

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)

_REFUSALS = {r.value: r for r in Refusal}

CHANNEL_OPTIONS = (
    # A peer that is not up yet is retried soon, not after gRPC's default second of backoff.
    # Not grpc.min_reconnect_backoff_ms: gRPC core also takes it as the least time a connection
    # attempt may take (its handshake included), so 50 ms there failed every peer slower than
    # 100 ms to answer its first handshake (a loaded node, a lost SYN); its default is 20 s, and
    # each call's own deadline bounds the wait anyway.
    ("grpc.initial_reconnect_backoff_ms", 50),
    ("grpc.max_reconnect_backoff_ms", 1000),
    ("grpc.enable_retries", 0),
    ("grpc.use_local_subchannel_pool", 1),  # one connection per channel, not shared behind our back
    # The job's own addresses, never a proxy: gRPC otherwise sends every call through the proxy named
    # in grpc_proxy, https_proxy or http_proxy (set on many clusters so that pip reaches PyPI), which
    # cannot reach the nodes, and no task finds another.
    ("grpc.enable_http_proxy", 0),
    *LEAN_OPTIONS,
    ("grpc.max_receive_message_length", MAX_ANSWER),  # a bundled answer: the table of a very large job
    ("grpc.max_send_message_length", MAX_MESSAGE),
)


def channel_target(host: str, port: int) -> str:
    """gRPC's target for a peer at ``host``:``port``: ``ipv4:`` before an IPv4 address, so that no
    resolver runs for it (a peer's address is known already; a resolver's work was a few system
    calls a channel, and with c-ares four files read); a name or an IPv6 address as it is."""
    return f"ipv4:{host}:{port}" if _ipv4(host) else f"{host}:{port}"


@functools.lru_cache(maxsize=4096)
def _ipv4(host: str) -> bool:
    """Whether ``host`` is an IPv4 address in its canonical form ("010.0.0.1" is octal to some parsers, refused
    by others); worked out once a peer's node."""
    parts = host.split(".")
    return len(parts) == 4 and all(p.isascii() and p.isdigit() and p == str(int(p)) and int(p) < 256 for p in parts)


FIRST_CONNECTION = 60.0
"""Seconds `GrpcNetwork.lost` gives a server to answer at all, at first: a leader that ended right after the
bootstrap is found then (or at once, by its call's end, where it made one). A real node connects in
milliseconds; 16 processes of 1,024 tasks each on 2 cores, the last still bootstrapping, took over 30 s for some
first connections (benchmarks/README.md), so a leader that stops before a watch's first connection is made is
found up to a minute late rather than a living one declared dead."""

SPARE_PORTS = (10000, 20000)
"""Where a task's spare port (for a framework's server) is found: below the launches' rendezvous ports
(20000-32767) and Linux's ephemeral ports (32768-60999). A port bound and released in the ephemeral
range may become the source port of any connection of the node before the framework binds it ("address
already in use"); a port below it is only ever taken by a program that binds it by name."""


def spare_port(address: str, tries: int = 32) -> int:
    """A port free on ``address`` now (bound, read, released), from `SPARE_PORTS` where one of ``tries``
    random picks is free, else any the kernel gives."""
    with socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET) as sock:
        for _ in range(tries):
            port = integer(*SPARE_PORTS)
            try:
                sock.bind((address, port))
            except OSError:
                continue
            return port
        sock.bind((address, 0))
        return int(sock.getsockname()[1])


class GrpcLink:
    """Calls to one peer over one channel (made on the task's event loop)."""

    def __init__(self, grpc: Any, target: str) -> None:
        self._grpc = grpc
        self.channel = grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS)
        self._callables: dict[tuple[str, str], Any] = {}  # made on first use: most links make one kind of call

    def _callable(self, kind: str, method: str) -> Any:
        """The channel's callable of ``method`` (``kind``: gRPC's ``unary_unary``...), made once."""
        made = self._callables.get((kind, method))
        if made is None:
            made = self._callables[(kind, method)] = getattr(self.channel, kind)(method)
        return made

    def _error(self, exc: Any) -> LinkError:
        code = exc.code()
        details = exc.details() or ""
        said, _, why = details.partition(": ")  # "<refusal>: why", where our server refused
        refusal = _REFUSALS.get(said)
        if refusal is None:
            why = details
        codes = self._grpc.StatusCode
        if refusal is not None and refusal is not Refusal.DEADLINE:
            return LinkError(CallFailure.REFUSED, why, refusal)
        if code == codes.UNIMPLEMENTED:  # a gRPC server without this protocol's service
            return LinkError(CallFailure.REFUSED, f"no {SERVICE} here: a task of another slurm_resolver version, or "
                                             f"another program", Refusal.FOREIGN)
        if code in (codes.FAILED_PRECONDITION, codes.INVALID_ARGUMENT, codes.UNAUTHENTICATED):
            return LinkError(CallFailure.REFUSED, f"{code.name}: {details}", Refusal.FOREIGN)  # not our server
        if code == codes.RESOURCE_EXHAUSTED:
            return LinkError(CallFailure.REFUSED, f"{code.name}: {details}", Refusal.BUSY)
        if code in (codes.CANCELLED, codes.INTERNAL):  # the server's end of the call cut short, not a closed connection
            return LinkError(CallFailure.CUT, f"{code.name}: {details}")
        if code == codes.DEADLINE_EXCEEDED:  # the server says who was still missing, where it could
            return LinkError(CallFailure.DEADLINE, why or "the call did not end in time", refusal)
        return LinkError(CallFailure.UNAVAILABLE, f"{code.name}: {details}")

    async def join(self, call: RoundCall[Any], messages: Sequence[bytes], timeout: float, probe: bool = False
                   ) -> list[bytes]:
        try:
            together = bundle(messages)
            if len(together) <= MAX_MESSAGE:  # most calls: one unary call, far cheaper than a stream
                answer = await self._callable("unary_unary", call.bundled_method)(
                    together, timeout=max(0.01, timeout), wait_for_ready=not probe)
                return unbundle(bytes(answer), 1 << 20, MAX_ANSWER)
            stream = self._callable("stream_stream", call.method)(iter(messages), timeout=max(0.01, timeout),
                                                                   wait_for_ready=not probe)
            return [bytes(m) async for m in stream]
        except self._grpc.RpcError as exc:
            raise self._error(exc) from None
        except WireError as exc:
            raise LinkError(CallFailure.REFUSED, f"a malformed answer ({exc})", Refusal.FOREIGN) from None

    async def unary(self, call: Unary[Any], message: bytes, timeout: float) -> bytes:
        try:
            answer = bytes(await self._callable("unary_unary", call.method)(message, timeout=max(0.01, timeout),
                                                                            wait_for_ready=True))
        except self._grpc.RpcError as exc:
            raise self._error(exc) from None
        return call.check_answer(answer)

    async def stream(self, call: Stream[Any], messages: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        try:
            async for answer in self._callable("stream_stream", call.method)(messages, wait_for_ready=True):
                yield bytes(answer)
        except self._grpc.RpcError as exc:
            raise self._error(exc) from None


class _Served(Generic[A]):
    def __init__(self, server: Any, port: int, handlers: A) -> None:
        self.server = server
        self.port = port
        self.handlers = handlers

    async def stop(self, grace: float | None = None) -> None:
        await stop_server(self.server, grace)


class GrpcNetwork:
    """Real gRPC servers and channels; `connect()` makes one channel per peer."""

    def __init__(self) -> None:
        self._grpc = grpc_module()
        self._links: dict[tuple[str, int], GrpcLink] = {}
        self._addresses: dict[str, str] = {}  # a peer's node name -> its address, for bare probes
        self._closed = False

    async def serve(self, host: str, ports: Sequence[int], handlers: Callable[[int], A],
                    calls: Mapping[str, Call[Any]]) -> Served[A]:
        server, port, made = await open_server(host, ports, handlers, calls)
        assert made is not None  # made from ``handlers``
        return _Served(server, port, made)

    def connect(self, host: str, port: int) -> Link:
        if self._closed:  # a channel made now would outlive the event loop (gRPC aborts at exit)
            raise LinkError(CallFailure.UNAVAILABLE, "this task's network is closed: it is stopping")
        key = (host, port)
        if key not in self._links:
            self._links[key] = GrpcLink(self._grpc, channel_target(host, port))
        return self._links[key]

    async def discard(self, host: str, port: int) -> None:
        link = self._links.pop((host, port), None)
        if link is not None:
            await link.channel.close()

    async def listening(self, host: str, port: int) -> bool:
        return await self._connect(host, port) is None

    async def gone(self, host: str, port: int) -> bool:
        return isinstance(await self._connect(host, port), ConnectionRefusedError)

    async def _connect(self, host: str, port: int) -> BaseException | None:
        """A bare connection to ``host:port`` (no transport, no protocol, closed at once): None where it was made,
        else why not (a refusal, `asyncio.TimeoutError` after `PROBE` seconds, another `OSError`, or the
        `ResolutionError` of a name that does not resolve)."""
        address = self._addresses.get(host)
        if address is None:  # a node's name is looked up once, not by asyncio in a thread at every probe
            try:
                address = self._addresses[host] = bindable(host).strip("[]")
            except ResolutionError as exc:
                return exc
        with socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET) as sock:
            sock.setblocking(False)
            try:
                with within(PROBE):
                    await asyncio.get_running_loop().sock_connect(sock, (address, port))
            except (OSError, asyncio.TimeoutError) as exc:
                return exc
        return None

    def reserve(self, host: str) -> int:
        return spare_port(bindable(host).strip("[]"))

    async def lost(self, host: str, port: int, patience: float, first: float | None = None) -> str:
        """A channel of its own whose core pings the server every half ``patience`` and gives up on an answer
        after another half; where the connection ends, it must be made again within a half more (a server also
        sends an idle connection away after minutes), else the server is lost: within one and a half patiences.
        The first connection may take ``first`` seconds, by default ``FIRST_CONNECTION`` (thousands are made at once on
        busy cores)."""
        half = max(50, int(patience * 500))
        channel = self._grpc.aio.insecure_channel(channel_target(host, port), options=(
            *CHANNEL_OPTIONS, ("grpc.keepalive_time_ms", half), ("grpc.http2.ping_timeout_ms", half),
            ("grpc.keepalive_permit_without_calls", 1), ("grpc.http2.max_pings_without_data", 0),
            ("grpc.client_idle_timeout_ms", 2**31 - 1)))
        ready = self._grpc.ChannelConnectivity.READY
        allowed = max(FIRST_CONNECTION if first is None else first, patience)
        try:
            while True:
                try:
                    with within(allowed):
                        await channel.channel_ready()
                except asyncio.TimeoutError:
                    return f"no answer at {host}:{port} for {allowed:g} s"
                allowed = half / 1000
                await channel.wait_for_state_change(ready)  # the core's pings went unanswered, or it ended
        finally:
            await channel.close()

    async def close(self) -> None:
        """Close every channel; none is made after this."""
        self._closed = True
        while self._links:  # a channel made while another closes is closed too
            _, link = self._links.popitem()
            await link.channel.close()
