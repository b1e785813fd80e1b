"""An in-process network: many tasks' servers in one event loop, for tests and the scale benchmark.

Calls run the same parts as gRPC calls do (those the rows of the table name, `slurm_resolver.rpc.calls`),
with the same bytes and the same per-call bounds (the rows' own checks); the network counts what every
server receives and sends and how many peers connect to it, so a simulation can check the bootstrap's
bounds. Every host has its own ports, as real nodes do. Not thread-safe: every task of one network runs
on one event loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic

from ..shapes import Answering, Call, RoundCall, Stream, Unary, announced
from ..transport import A, CallFailure, Link, LinkError, Refused, Served, end_call
from ..waits import Flag

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)

_FIRST_PORT = 40000
_LAST_PORT = 65535


@dataclass(slots=True)
class ServerStats:
    """What one server of a `LocalNetwork` handled."""

    connections: int = 0
    calls: int = 0
    bytes_received: int = 0
    bytes_sent: int = 0
    largest_message: int = 0


class _LocalServed(Generic[A]):
    __slots__ = ("_network", "_address", "port", "handlers", "stats", "calls")

    def __init__(self, network: LocalNetwork, address: tuple[str, int], handlers: A, stats: ServerStats,
                 calls: Mapping[str, Call[Any]]) -> None:
        self._network = network
        self._address = address
        self.port = address[1]
        self.handlers = handlers
        self.stats = stats
        self.calls = calls

    async def stop(self, grace: float | None = None) -> None:
        self._network._servers.pop(self._address, None)
        lost = self._network._lost.get(self._address)
        if lost is not None:
            lost.set()  # who watches it finds it gone (where nobody does, `lost` sees no server)
        for broken in self._network._watches.pop(self._address, set()):
            broken.set()  # as a process's death breaks its calls


class _LocalLink:
    __slots__ = ("_network", "_address")

    def __init__(self, network: LocalNetwork, address: tuple[str, int]) -> None:
        self._network = network
        self._address = address

    def _served(self, call: Call[Any]) -> tuple[Answering, ServerStats]:
        """The server's handlers and stats, where it serves ``call`` (else as gRPC's service answers a
        method it does not serve)."""
        found = self._network._servers.get(self._address)
        if found is None:
            raise LinkError(CallFailure.UNAVAILABLE, f"nothing listens at {self._address[0]}:{self._address[1]}")
        if found.calls.get(call.method) is not call:
            raise LinkError(CallFailure.UNAVAILABLE, f"no {call.name} served at {self._address[0]}:{self._address[1]}")
        return found.handlers, found.stats

    @staticmethod
    def _count(stats: ServerStats, received: Sequence[bytes], sent: Sequence[bytes]) -> None:
        stats.calls += 1
        stats.bytes_received += sum(map(len, received))
        stats.bytes_sent += sum(map(len, sent))
        stats.largest_message = max([stats.largest_message, *map(len, received), *map(len, sent)])

    async def join(self, call: RoundCall[Any], messages: Sequence[bytes], timeout: float, probe: bool = False
                   ) -> list[bytes]:
        handlers, stats = self._served(call)
        try:
            rounds = call.handler(handlers.parts)
            opened = rounds.open_call(messages[0] if messages else b"")
            round, answer = await rounds.join(opened, announced(opened, messages), time.monotonic() + timeout)
            rounds.sent(round)
        except Refused as exc:
            self._count(stats, messages, ())
            raise LinkError.of(exc) from None
        self._count(stats, messages, answer)
        return answer

    def _frozen(self) -> bool:
        """Whether the server here was frozen (`LocalNetwork.freeze`): a call made to it now goes unanswered, as to a
        stopped process (whose kernel still takes the connection) or a node without power."""
        flag = self._network._lost.get(self._address)
        return flag is not None and flag.is_set()

    async def unary(self, call: Unary[Any], message: bytes, timeout: float) -> bytes:
        handlers, stats = self._served(call)
        if self._frozen():
            await asyncio.sleep(timeout)
            host, port = self._address
            raise LinkError(CallFailure.DEADLINE, f"no answer at {host}:{port} in {timeout:g} s")
        try:
            call.check_request(message)
            reply = await call.handler(handlers.parts)(message, time.monotonic() + timeout)
        except Refused as exc:
            raise LinkError.of(exc) from None
        self._count(stats, (message,), (reply,))
        return call.check_answer(reply)

    async def stream(self, call: Stream[Any], messages: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        handlers, stats = self._served(call)
        if self._frozen():
            await asyncio.Event().wait()  # unanswered until its caller gives up
        try:
            events = call.handler(handlers.parts)(messages).__aiter__()
        except Refused as exc:
            raise LinkError.of(exc) from None
        broken = asyncio.Event()
        self._network._watches.setdefault(self._address, set()).add(broken)
        stopped = asyncio.ensure_future(broken.wait())
        coming: asyncio.Future[bytes] | None = None
        try:
            while True:
                coming = asyncio.ensure_future(events.__anext__())
                await asyncio.wait({coming, stopped}, return_when=asyncio.FIRST_COMPLETED)
                if not coming.done():
                    raise LinkError(CallFailure.UNAVAILABLE, f"{self._address[0]}:{self._address[1]} stopped serving")
                try:
                    event = coming.result()
                except StopAsyncIteration:
                    return
                except Refused as exc:
                    raise LinkError.of(exc) from None
                self._count(stats, (), (event,))
                yield event
        finally:  # the caller went away, or the server: the other side sees its call end
            if coming is not None and not coming.done():
                coming.cancel()
                await asyncio.wait({coming})
            await end_call(events)  # as gRPC cancels the server's handler
            stopped.cancel()
            self._network._watches.get(self._address, set()).discard(broken)


class LocalNetwork:
    """Servers of many simulated tasks in one process; every host is reachable.

    Where a server asks for any port, each host hands out its own, from 40,000 up.
    """

    def __init__(self) -> None:
        self._servers: dict[tuple[str, int], _LocalServed[Any]] = {}
        self._watches: dict[tuple[str, int], set[asyncio.Event]] = {}  # what breaks each server's watch calls
        self._lost: dict[tuple[str, int], Flag] = {}  # set where a watched server stopped answering (frozen)
        self._next: dict[str, int] = {}
        self.stats: dict[tuple[str, int], ServerStats] = {}

    def _free(self, host: str) -> int:
        port = self._next.get(host, _FIRST_PORT)
        while (host, port) in self._servers:
            port += 1
        if port > _LAST_PORT:
            raise LinkError(CallFailure.UNAVAILABLE, f"no free port left on {host}")
        self._next[host] = port + 1
        return port

    async def serve(self, host: str, ports: Sequence[int], handlers: Callable[[int], A],
                    calls: Mapping[str, Call[Any]]) -> Served[A]:
        for port in ports:
            address = (host, port or self._free(host))
            if address not in self._servers:
                stats = self.stats[address] = ServerStats()
                served = _LocalServed(self, address, handlers(address[1]), stats, calls)
                self._servers[address] = served
                return served
        raise LinkError(CallFailure.UNAVAILABLE, f"no free port among {list(ports)[:8]} on {host}")

    def connect(self, host: str, port: int) -> Link:
        if (host, port) in self.stats:
            self.stats[(host, port)].connections += 1
        return _LocalLink(self, (host, port))

    async def discard(self, host: str, port: int) -> None:
        """Nothing to forget: links hold no connection."""

    async def listening(self, host: str, port: int) -> bool:
        return (host, port) in self._servers

    async def gone(self, host: str, port: int) -> bool:
        return not await self.listening(host, port)

    def reserve(self, host: str) -> int:
        return self._free(host)

    async def lost(self, host: str, port: int, patience: float, first: float | None = None) -> str:
        """Once the server at ``host:port`` is frozen (`freeze`: a stopped process) for ``patience`` seconds, or a
        third of it after it stopped (or where none listens: a process ended; a gRPC channel is refused)."""
        lost = self._lost.setdefault((host, port), Flag())
        if (host, port) in self._servers:
            await lost.wait()
        frozen = (host, port) in self._servers
        await asyncio.sleep(patience if frozen else patience / 3)
        return f"no answer at {host}:{port} for about {patience:g} s"

    def freeze(self, host: str, port: int) -> None:
        """The server at ``host:port`` stops answering as a stopped process does: its calls stay open, a call made to
        it from now on goes unanswered, and who watches it (`lost`) finds it lost after its patience. For tests."""
        self._lost.setdefault((host, port), Flag()).set()

    async def close(self) -> None:
        """Nothing to close: links hold no connection."""
