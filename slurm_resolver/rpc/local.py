"""An in-process network: many tasks' servers in one event loop, for tests and the scale benchmark.

Calls run the same coordinator coroutines as gRPC calls do, with the same bytes on the
wire; the network counts what every server receives and sends and how many peers connect
to it, so a simulation can check the bootstrap's bounds. Not thread-safe: every task of
one network runs on one event loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from .coordinator import Coordinator, Refused
from .transport import DEADLINE, REFUSED, UNAVAILABLE, Link, LinkError, Served, end_call

__all__ = ["LocalNetwork", "ServerStats"]


@dataclass
class ServerStats:
    """What one server of a :class:`LocalNetwork` handled."""

    connections: int = 0
    calls: int = 0
    bytes_received: int = 0
    bytes_sent: int = 0
    largest_message: int = 0


class _LocalServed:
    def __init__(self, network: LocalNetwork, address: tuple[str, int]) -> None:
        self._network = network
        self._address = address
        self.port = address[1]

    async def stop(self, grace: float | None = None) -> None:
        self._network._servers.pop(self._address, None)
        for broken in self._network._watches.pop(self._address, set()):
            broken.set()  # as a process's death breaks its calls


class _LocalLink:
    def __init__(self, network: LocalNetwork, address: tuple[str, int]) -> None:
        self._network = network
        self._address = address

    def _server(self) -> tuple[Coordinator, ServerStats]:
        found = self._network._servers.get(self._address)
        if found is None:
            raise LinkError(UNAVAILABLE, f"nothing listens at {self._address[0]}:{self._address[1]}")
        return found

    @staticmethod
    def _count(stats: ServerStats, received: Sequence[bytes], sent: Sequence[bytes]) -> None:
        stats.calls += 1
        stats.bytes_received += sum(map(len, received))
        stats.bytes_sent += sum(map(len, sent))
        stats.largest_message = max([stats.largest_message, *map(len, received), *map(len, sent)])

    async def join(self, chunks: Sequence[bytes], timeout: float) -> list[bytes]:
        coordinator, stats = self._server()
        try:
            name, result = await coordinator.join(chunks, time.monotonic() + timeout)
            coordinator.rounds.sent(name)
        except Refused as exc:
            self._count(stats, chunks, ())
            raise LinkError(DEADLINE if exc.code == "deadline" else REFUSED, exc.detail, exc.code) from None
        self._count(stats, chunks, result)
        return result

    async def who(self, token: str, timeout: float) -> bytes:
        coordinator, stats = self._server()
        try:
            reply = await coordinator.who(token, time.monotonic() + timeout)
        except Refused as exc:
            raise LinkError(REFUSED, exc.detail, exc.code) from None
        self._count(stats, (token.encode(),), (reply,))
        return reply

    async def watch(self, beats: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        coordinator, stats = self._server()
        try:
            events = coordinator.watch(beats).__aiter__()
        except Refused as exc:
            raise LinkError(REFUSED, exc.detail, exc.code) from None
        broken = asyncio.Event()
        self._network._watches.setdefault(self._address, set()).add(broken)
        stopped = asyncio.ensure_future(broken.wait())
        coming: asyncio.Future[bytes] | None = None
        try:
            while True:
                coming = asyncio.ensure_future(events.__anext__())
                await asyncio.wait({coming, stopped}, return_when=asyncio.FIRST_COMPLETED)
                if not coming.done():
                    raise LinkError(UNAVAILABLE, f"{self._address[0]}:{self._address[1]} stopped serving")
                try:
                    event = coming.result()
                except StopAsyncIteration:
                    return
                except Refused as exc:
                    raise LinkError(REFUSED, exc.detail, exc.code) from None
                self._count(stats, (), (event,))
                yield event
        finally:  # the caller went away, or the server: the other side sees its call end
            if coming is not None and not coming.done():
                coming.cancel()
                await asyncio.wait({coming})
            await end_call(events)  # as gRPC cancels the server's handler
            stopped.cancel()
            self._network._watches.get(self._address, set()).discard(broken)

    async def healthy(self, timeout: float) -> bool:
        self._count(self._server()[1], (), (b"\x08\x01",))  # SERVING
        return True


class LocalNetwork:
    """Servers of many simulated tasks in one process; every host is reachable.

    Ports are handed out from ``first_port`` up where a server asks for any port.
    """

    def __init__(self, first_port: int = 40000) -> None:
        self._servers: dict[tuple[str, int], tuple[Coordinator, ServerStats]] = {}
        self._watches: dict[tuple[str, int], set[asyncio.Event]] = {}  # what breaks each server's watch calls
        self._next = first_port
        self.stats: dict[tuple[str, int], ServerStats] = {}

    async def serve(self, host: str, ports: Sequence[int], coordinator: Coordinator) -> Served:
        for port in ports:
            if port == 0:
                while (host, self._next) in self._servers:
                    self._next += 1
                port = self._next
            if (host, port) not in self._servers:
                stats = self.stats[(host, port)] = ServerStats()
                self._servers[(host, port)] = (coordinator, stats)
                return _LocalServed(self, (host, port))
        raise LinkError(UNAVAILABLE, f"no free port among {list(ports)[:8]} on {host}")

    def connect(self, host: str, port: int) -> Link:
        if (host, port) in self.stats:
            self.stats[(host, port)].connections += 1
        return _LocalLink(self, (host, port))

    async def listening(self, host: str, port: int) -> bool:
        return (host, port) in self._servers

    def reserve(self, host: str) -> int:
        self._next += 1
        return self._next

    async def close(self) -> None:
        """Nothing to close: links hold no connection."""
