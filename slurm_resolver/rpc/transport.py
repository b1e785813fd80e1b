"""The contract between the bootstrap's protocol and a network: what a server answers, how a task calls.

Two networks implement it: `GrpcNetwork` (real gRPC servers and channels, one process per task) and
`LocalNetwork` (many tasks in one process, for tests and the scale benchmark). A server answers each
call of its table (`slurm_resolver.rpc.calls`) with the part its row names (`slurm_resolver.rpc.shapes`);
a task calls through a `Link`. The protocol code is the same over both networks; every message is bytes.
Also here: waiting on calls (`within`, `hedged`, `retrying`) and ending one (`end_call`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from .primitives import uniform
from .refusals import CallFailure as CallFailure  # how a call fails: found here by most callers
from .refusals import LinkError as LinkError
from .refusals import Refusal as Refusal
from .refusals import Refused as Refused
from .shapes import Answering, Call, RoundCall, Stream, Unary

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)

T = TypeVar("T")
A = TypeVar("A", bound=Answering)
A_co = TypeVar("A_co", bound=Answering, covariant=True)

PROBE = 2.0
"""Seconds a probe of a server (`Network.gone`) waits for its connection: neither made nor refused by then, it says
nothing (a server on cores far past their load, or a node without power)."""


class Link(Protocol):
    """Calls to one peer's server, over one connection reused for every call, by the call's shape."""

    async def join(self, call: RoundCall[Any], messages: Sequence[bytes], timeout: float, probe: bool = False
                   ) -> list[bytes]:
        """Contribute to a round of ``call`` (Join) and return the answer's messages; ``probe``: fail at
        once where nothing answers (a candidate port), instead of waiting for the peer within ``timeout``."""
        ...

    async def unary(self, call: Unary[Any], message: bytes, timeout: float) -> bytes:
        """Make the unary ``call`` with ``message``; its answer."""
        ...

    def stream(self, call: Stream[Any], messages: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """Make the stream ``call`` with ``messages`` (a heartbeat's beats); its answers come back,
        until either side ends."""
        ...


class Served(Protocol[A_co]):
    """A running server: the port it bound, and what it answers with (made for that port)."""

    @property
    def port(self) -> int:
        """The port it listens on."""
        ...

    @property
    def handlers(self) -> A_co:
        """What it answers with (made for `port`)."""
        ...

    async def stop(self, grace: float | None = None) -> None:
        """Stop serving; calls in flight get ``grace`` seconds."""
        ...


class Network(Protocol):
    """Where servers listen and how peers reach them. Coroutines run on the task's event loop."""

    async def serve(self, host: str, ports: Sequence[int], handlers: Callable[[int], A],
                    calls: Mapping[str, Call[Any]]) -> Served[A]:
        """Serve ``calls`` (by gRPC method: `slurm_resolver.rpc.shapes.served`) on ``host``, on the first free
        port of ``ports`` (``[0]``: any port), with the parts made for the port bound (the result holds them)."""
        ...

    def connect(self, host: str, port: int) -> Link:
        """A link to the server at ``host:port`` (made once per peer; calls reuse it)."""
        ...

    async def discard(self, host: str, port: int) -> None:
        """Forget the link to ``host:port`` (the next :meth:`connect` makes a fresh one)."""
        ...

    async def listening(self, host: str, port: int) -> bool:
        """Whether something accepts connections at ``host:port`` (a cheap probe, no call)."""
        ...

    async def gone(self, host: str, port: int) -> bool:
        """Whether nothing listens at ``host:port``: it refuses a connection (a cheap probe, no call). A connection
        neither made nor refused within `PROBE` seconds (a server on cores far past their load) says nothing: False."""
        ...

    def reserve(self, host: str) -> int:
        """A free port on ``host`` for a framework's server (bound, read, released)."""
        ...

    async def lost(self, host: str, port: int, patience: float, first: float | None = None) -> str:
        """Return once the server at ``host:port`` stopped answering for about ``patience`` seconds (its
        process stopped, its node gone), with why in a few words; a server that ends closes its connections,
        which its callers hear of first. Costs no Python work while the server answers: over gRPC, its core
        pings the server (which its core answers, whatever the server's Python does). The first connection may
        take ``first`` seconds (None: the network's own bound, for thousands made at once)."""
        ...

    async def close(self) -> None:
        """Close every link."""
        ...


async def retrying(call: Callable[[float], Awaitable[T]], deadline: float, first_pause: float = 0.02) -> T:
    """``call(seconds left)``, asked again while it fails with `again` (nobody
    answers yet, or the server is not ready), with jittered backoff up to 0.25 s, until
    ``deadline`` (``time.monotonic()``); then its last error."""
    pause = first_pause
    while True:
        try:
            return await call(max(0.01, deadline - time.monotonic()))
        except LinkError as exc:
            left = deadline - time.monotonic()
            if not exc.again or left <= 0:
                raise
        await asyncio.sleep(min(left, pause * uniform(0.5, 1.5)))
        pause = min(pause * 2, 0.25)


_COUNTS_CANCELS = hasattr(asyncio.Task, "uncancel")
"""Whether a task counts the cancellations asked of it (Python 3.11+)."""


class within:  # noqa: N801 - used as a function: ``with within(seconds): ...``
    """Around an ``await``: `asyncio.TimeoutError` once ``seconds`` passed (what is awaited is cancelled).

    A plain context manager with one timer, in the caller's own task: `asyncio.wait_for` makes a
    task of its own per wait on Python 3.10 and 3.11, and `asyncio.timeout` costs twice this; and no
    coroutine of its own either (every frame a coroutine awaits through is one more to resume, and
    thousands of tasks wait at once in a simulation). A cancellation from elsewhere stays one.

    >>> async def late():
    ...     with within(0.01):
    ...         await asyncio.sleep(1)
    >>> asyncio.run(late())
    Traceback (most recent call last):
    TimeoutError
    """

    __slots__ = ("_seconds", "_task", "_timer", "_before", "_expired")

    def __init__(self, seconds: float) -> None:
        self._seconds = max(0.0, seconds)
        self._expired = False

    def __enter__(self) -> None:
        task: Any = asyncio.current_task()  # its cancelling() and uncancel(): Python 3.11+
        assert task is not None, "within() runs in a task"
        self._task = task
        self._before = task.cancelling() if _COUNTS_CANCELS else 0
        loop = asyncio.get_running_loop()
        self._timer = loop.call_at(loop.time() + self._seconds, self._due)

    def _due(self) -> None:
        """The seconds passed (`hedged` checks first)."""
        self._cancel()

    def _cancel(self) -> None:
        self._expired = True
        self._task.cancel()

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, traceback: object) -> None:
        self._timer.cancel()
        if not self._expired:
            return
        taken_back = self._task.uncancel() if _COUNTS_CANCELS else 0
        if kind is asyncio.CancelledError and taken_back <= self._before:
            raise self._error() from None

    def _error(self) -> BaseException:
        return asyncio.TimeoutError()


class Hedged(Exception):
    """The hedge of `hedged` brought an answer before the call did: ``answer``."""

    def __init__(self, answer: Any) -> None:
        super().__init__("answered elsewhere")
        self.answer = answer


class hedged(within):  # noqa: N801 - used as a function: ``with hedged(seconds, check, hedge): ...``
    """Around the ``await`` of a call to a server that has not proven itself: once ``seconds`` passed,
    ``check()`` runs beside the call, and where it gives a reason to doubt the server (``''``: none),
    ``hedge()`` runs beside it too. Whichever brings an answer first wins: the hedge's cancels the call
    and is raised as `Hedged`. Suspicion never cancels the call itself: a server that is only slow
    (its process starved of CPU, its round long) still answers it, and a check or a hedge that
    fails changes nothing."""

    __slots__ = ("_check", "_hedge", "_side", "_answer", "_open")

    def __init__(self, seconds: float, check: Callable[[], Awaitable[str]],
                 hedge: Callable[[], Awaitable[Any]]) -> None:
        super().__init__(seconds)
        self._check, self._hedge = check, hedge
        self._side: asyncio.Future[None] | None = None
        self._answer: Any = None
        self._open = True

    def _due(self) -> None:
        self._side = asyncio.ensure_future(self._beside())

    async def _beside(self) -> None:
        try:
            if not await self._check():
                return  # proven: the call is waited on alone
            answer = await self._hedge()
        except Exception:  # noqa: BLE001 - a check or hedge that fails leaves the call as it was
            return
        if self._open:
            self._answer = answer
            self._cancel()

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, traceback: object) -> None:
        self._open = False
        if self._side is not None and not self._side.done():
            self._side.cancel()
        super().__exit__(kind, value, traceback)

    def _error(self) -> BaseException:
        return Hedged(self._answer)


async def end_call(stream: Any) -> None:
    """End a call's stream of messages (an async generator), whatever state it is in: the
    other side sees the call end at once, as when its process dies."""
    closing = getattr(stream, "aclose", None)
    if closing is not None:
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await closing()
