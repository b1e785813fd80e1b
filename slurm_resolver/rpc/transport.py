"""The contract between the bootstrap's protocol and a network: serve, connect, call.

Two networks implement it: :class:`~slurm_resolver.rpc.grpc_network.GrpcNetwork` (real
gRPC servers and channels, one process per task) and
:class:`~slurm_resolver.rpc.local.LocalNetwork` (many tasks in one process, for tests and
the scale benchmark). The protocol code is the same over both.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol

from .coordinator import Coordinator

__all__ = ["Link", "Network", "Served", "LinkError", "UNAVAILABLE", "REFUSED", "DEADLINE", "end_call",
           "stood_still"]

UNAVAILABLE = "unavailable"
"""Nobody answers there, or the connection broke."""
REFUSED = "refused"
"""A server answered and refused the call (another launch, not a leader, a bad message...)."""
DEADLINE = "deadline"
"""The call did not end in time."""


class LinkError(Exception):
    """A call that failed: ``kind`` is :data:`UNAVAILABLE`, :data:`REFUSED` or :data:`DEADLINE`;
    ``code`` is the server's refusal code where it refused (see :class:`~.coordinator.Refused`)."""

    def __init__(self, kind: str, detail: str, code: str = "") -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.code = code
        self.detail = detail[:500]


class Link(Protocol):
    """Calls to one peer's server, over one connection reused for every call."""

    async def join(self, chunks: Sequence[bytes], timeout: float) -> list[bytes]:
        """Contribute to a round (``chunks``) and return the round's result chunks."""
        ...

    async def who(self, token: str, timeout: float) -> bytes:
        """The peer's identity (needs the job's token)."""
        ...

    def watch(self, beats: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """Keep a heartbeat (``beats``) with the peer; its events come back, until either side ends."""
        ...

    async def healthy(self, timeout: float) -> bool:
        """Whether the peer answers its health check with ``SERVING``."""
        ...


class Served(Protocol):
    """A running server."""

    port: int

    async def stop(self, grace: float | None = None) -> None:
        """Stop serving; calls in flight get ``grace`` seconds."""
        ...


class Network(Protocol):
    """Where servers listen and how peers reach them. Coroutines run on the task's event loop."""

    async def serve(self, host: str, ports: Sequence[int], coordinator: Coordinator) -> Served:
        """Serve ``coordinator`` on ``host``, on the first free port of ``ports`` (``[0]``: any port)."""
        ...

    def connect(self, host: str, port: int) -> Link:
        """A link to the server at ``host:port`` (made once per peer; calls reuse it)."""
        ...

    async def listening(self, host: str, port: int) -> bool:
        """Whether something accepts connections at ``host:port`` (a cheap probe, no call)."""
        ...

    def reserve(self, host: str) -> int:
        """A free port on ``host`` for a framework's server (bound, read, released)."""
        ...

    async def close(self) -> None:
        """Close every link."""
        ...


async def end_call(stream: Any) -> None:
    """End a call's stream of messages (an async generator), whatever state it is in: the
    other side sees the call end at once, as when its process dies."""
    closing = getattr(stream, "aclose", None)
    if closing is not None:
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await closing()


def stood_still(now: float, last: float, interval: float) -> float:
    """Seconds this process stood still (SIGSTOP, a long pause) between two wake-ups due
    ``interval`` apart; 0 for an ordinary delay. Nobody's silence is counted over that time.

    >>> stood_still(10.0, 9.0, 1.0), stood_still(10.0, 4.0, 1.0)
    (0.0, 5.0)
    """
    late = now - last
    return late - interval if late > 2 * interval + 0.5 else 0.0
