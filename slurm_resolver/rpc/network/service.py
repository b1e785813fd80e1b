"""The coordination service over gRPC: its methods, and the bounds every caller meets as its call opens.

It serves gRPC health checking (``grpc.health.v1.Health/Check``, open to any client: it answers
``SERVING``) and the calls of the table (`slurm_resolver.rpc.calls`) through one generic handler on raw
bytes, a method per shape (`CoordinationService`), each answering with the part the call's row names,
so that the same parts answer here and in the in-process network. A server with no handlers refuses
every call of the service (``not_leader``). Any other method (a framework's) is answered ``UNAVAILABLE``.

Whoever connects meets bounds: the first message of a call (a unary call's only one) within
`FIRST_MESSAGE` seconds, at most `MOST_UNPROVEN` calls at once that have not yet proven they come
from the job and `MOST_CALLS` calls in all, each caller (a local user, or a host) at most its share
of both (`slurm_resolver.rpc.network.callers`), and nothing more of a call read before its first message
is checked. Refused calls are counted, not logged one by one.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

from ..messages import WireError
from ..shapes import (
    SERVICE,
    Answering,
    Call,
    RoundCall,
    RoundHandler,
    Shape,
    Stream,
    StreamHandler,
    Unary,
    UnaryHandler,
    announced,
)
from ..transport import Refusal, Refused, end_call, within
from ..wire import bundle, most_chunks, unbundle
from .callers import CALLS_SHARE, MOST_CALLS, MOST_UNPROVEN, UNPROVEN_SHARE, Bound, Callers

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)

log = logging.getLogger("slurm_resolver")

HEALTH_METHOD = "/grpc.health.v1.Health/Check"
_SERVING = b"\x08\x01"  # grpc.health.v1.HealthCheckResponse(status=SERVING)

FIRST_MESSAGE = 5.0
"""Seconds a call's first message (a unary call's only one) may take to be read, and each further one,
while the calls that wait for theirs crowd anyone (`_Due`); then the call is refused (``busy``: a
caller that did send asks again)."""


class _Due(within):
    """A message's deadline that holds only where its bound is contested: past ``seconds``, the call is
    refused if the calls waiting in ``bound`` reach one caller's share (someone may be kept out),
    else it waits ``seconds`` more.

    A server cannot tell a silent caller from its own process standing still: at 16,384 tasks on 2
    cores a process's event loop stood still 6-11 s, and a deadline of 5 s on the wall clock refused
    the job's own calls whose message had long come (the leaders' identity checks failed, and the
    whole bootstrap with them). The job's own calls at one server (a node's tasks and 8 child leaders)
    never fill a share; a stranger's silent calls are cut as soon as they crowd anyone.
    """

    __slots__ = ("_bound",)

    def __init__(self, seconds: float, bound: Bound) -> None:
        super().__init__(seconds)
        self._bound = bound

    def _due(self) -> None:
        if self._bound.contested:
            self._cancel()
        else:
            self._timer = asyncio.get_running_loop().call_later(self._seconds, self._due)

class Underway:
    """The calls a server is in the middle of (each handler's coroutine), so that it can stop with none left
    for gRPC to abort: gRPC logs every call it aborts as a server stops ("Aborting method [...] due to
    server stop.", a warning a job's output would show beside its own last line)."""

    def __init__(self) -> None:
        self.rounds: set[asyncio.Task[Any]] = set()
        """Calls that end by themselves (rounds, identity questions)."""
        self.watches: set[asyncio.Task[Any]] = set()
        """Watch calls, which last as long as the (Slurm) task they watch."""

    async def end(self, grace: float) -> None:
        """End every call: the watches at once (their end tells the tasks below that this one is
        gone), the others once they finished, or ``grace`` seconds passed."""
        for handling in list(self.watches):
            handling.cancel()
        if self.rounds and grace > 0:
            await asyncio.wait(list(self.rounds), timeout=grace)
        for handling in list(self.rounds):
            handling.cancel()
        left = self.rounds | self.watches
        if left:
            await asyncio.wait(left, timeout=1.0)


class _Guard:
    """The bounds of one server, per caller (`slurm_resolver.rpc.network.callers`): calls at once, calls not
    yet proven; and refusals counted."""

    def __init__(self, own: str, port: int) -> None:
        callers = Callers(own, port)
        self.calls = Bound(callers, MOST_CALLS, CALLS_SHARE, "calls")
        self.unproven = Bound(callers, MOST_UNPROVEN, UNPROVEN_SHARE, "calls not yet proven")
        self.refused = 0

    def refuse(self, what: str) -> None:
        self.refused += 1
        if self.refused in (1, 10, 100) or self.refused % 10_000 == 0:
            log.info("slurm_resolver: %d calls refused here so far (latest: %s)", self.refused, what[:200])


class CoordinationService:
    """The coordination service of one server, as gRPC's generic handler: a method per shape, each answering
    the calls of ``calls`` (by gRPC method) with the part its row names of ``handlers`` (None: every call of
    the service is refused, ``not_leader``: a framework's server), for a server on ``own`` and ``port``; the
    calls under way are kept in ``underway``.

    gRPC asks only for its `service`: each method's handler is made on its first call (a server is called
    for one or two of the table's methods: making all of them cost every task 3% of its CPU at 16,384
    tasks), and one handler answers any other method, so that a stranger's method names are not kept.
    """

    def __init__(self, grpc: Any, handlers: Answering | None, calls: Mapping[str, Call[Any]], own: str = "",
                 underway: Underway | None = None, port: int = 0) -> None:
        self._grpc = grpc
        self._parts = None if handlers is None else handlers.parts
        self._calls = calls
        self._status = _status_codes(grpc)
        self._guard = _Guard(own, port)
        self.underway = underway or Underway()
        self._made: dict[str, Any] = {}

    def service(self, details: Any) -> Any:
        """The handler of the method ``details`` names (gRPC's `GenericRpcHandler`)."""
        method = details.method
        if method not in self._calls and method != HEALTH_METHOD:
            method = _OURS if self._parts is None and method.startswith(_OURS) else ""
        handler = self._made.get(method)
        if handler is None:
            handler = self._made[method] = self._handler(method)
        return handler

    def _handler(self, method: str) -> Any:
        grpc, parts = self._grpc, self._parts
        if method == HEALTH_METHOD:
            return grpc.unary_unary_rpc_method_handler(self.health)
        if method == _OURS:  # a call of the service, at a server that answers none
            return grpc.stream_unary_rpc_method_handler(self.refused)
        call = self._calls.get(method)
        if call is None:
            return grpc.unary_unary_rpc_method_handler(self.reject)
        streamed = call.shape is Shape.STREAM or (isinstance(call, RoundCall) and method == call.method)
        if parts is None:
            return grpc.stream_unary_rpc_method_handler(self.refused)
        if isinstance(call, RoundCall):
            answering = functools.partial(self.join if streamed else self.join_bundled, call.handler(parts))
        elif isinstance(call, Unary):
            answering = functools.partial(self.unary, call, call.handler(parts))
        else:
            assert isinstance(call, Stream), call
            answering = functools.partial(self.stream, call.handler(parts))
        return grpc.stream_stream_rpc_method_handler(answering) if streamed else \
            grpc.stream_unary_rpc_method_handler(answering)

    # A method per shape.

    async def join(self, rounds: RoundHandler[Any, Any], requests: AsyncIterator[bytes], context: Any
                   ) -> AsyncIterator[bytes]:
        """Join, streamed: the first message (within the first-message bound), the chunks it announced, then
        the answer's messages."""
        guard, round = self._guard, None
        answer: list[bytes] = []
        handling = asyncio.current_task()
        self.underway.rounds.add(handling)  # type: ignore[arg-type]
        try:
            peer = str(context.peer() or "")
            with guard.calls.holding(peer):
                with guard.unproven.holding(peer):
                    call = rounds.open_call(await _next(requests, "first message", guard.unproven))
                more = [await _next(requests, "announced chunk", guard.calls) for _ in call.chunks]
                round, answer = await rounds.join(call, more, _deadline(context))
        except Refused as exc:
            await self._refuse(context, exc)
        try:
            for message in answer:
                yield message
        finally:
            rounds.sent(round)
            self.underway.rounds.discard(handling)

    # The unary shapes are served as streams of one message, so that their message, like a Join's
    # first, must come within FIRST_MESSAGE seconds (gRPC calls a unary handler only once it came).

    async def join_bundled(self, rounds: RoundHandler[Any, Any], requests: AsyncIterator[bytes], context: Any
                           ) -> bytes:
        """Join in one message each way (a `Bundle`)."""
        guard, round = self._guard, None
        handling = asyncio.current_task()
        self.underway.rounds.add(handling)  # type: ignore[arg-type]
        try:
            peer = str(context.peer() or "")
            with guard.calls.holding(peer):
                with guard.unproven.holding(peer):
                    try:
                        messages = unbundle(await self._only(context, "call"), most_chunks(rounds.world_size) + 1)
                        call = rounds.open_call(messages[0])
                    except WireError as exc:
                        raise Refused(Refusal.INVALID, str(exc)) from None
                round, answer = await rounds.join(call, announced(call, messages), _deadline(context))
                return bundle(answer)
        except Refused as exc:
            await self._refuse(context, exc)
            raise  # pragma: no cover - abort raises
        finally:
            self.underway.rounds.discard(handling)
            rounds.sent(round)

    async def unary(self, call: Unary[Any], answer: UnaryHandler, requests: AsyncIterator[bytes], context: Any
                    ) -> bytes:
        """A unary call: its one message (within the first-message bound and the row's size), answered."""
        handling = asyncio.current_task()
        self.underway.rounds.add(handling)  # type: ignore[arg-type]
        try:
            peer = str(context.peer() or "")
            with self._guard.calls.holding(peer), self._guard.unproven.holding(peer):
                message = await self._only(context, "message")
                call.check_request(message)
                return bytes(await answer(message, _deadline(context)))
        except Refused as exc:
            await self._refuse(context, exc)
            raise  # pragma: no cover - abort raises
        finally:
            self.underway.rounds.discard(handling)

    async def stream(self, answer: StreamHandler, requests: AsyncIterator[bytes], context: Any
                     ) -> AsyncIterator[bytes]:
        """A stream: held to the caller's share of calls, and ended at once when the server stops."""
        events: Any = None
        handling = asyncio.current_task()
        self.underway.watches.add(handling)  # type: ignore[arg-type]
        try:
            with self._guard.calls.holding(str(context.peer() or "")):
                events = answer(requests)
                async for event in events:
                    yield event
        except Refused as exc:
            await self._refuse(context, exc)
        finally:  # a cancelled call ends the stream at once (its end is the news)
            self.underway.watches.discard(handling)
            await end_call(events)

    async def refused(self, requests: AsyncIterator[bytes], context: Any) -> bytes:
        """Any call of the service, at a server that answers none (a framework's)."""
        await self._refuse(context, Refused(Refusal.NOT_LEADER, UNSERVED))
        raise AssertionError  # pragma: no cover - abort raises

    async def health(self, request: bytes, context: Any) -> bytes:
        """gRPC health checking: ``SERVING``, to anyone."""
        if len(request) > 256:  # a HealthCheckRequest names a service, no more
            self._guard.refuse("an oversized health check")
            await context.abort(self._grpc.StatusCode.INVALID_ARGUMENT, "invalid: not a health check")
        return _SERVING

    async def reject(self, request: bytes, context: Any) -> bytes:
        """A framework's method, before its server (or any other)."""
        await context.abort(self._grpc.StatusCode.UNAVAILABLE,
                            "not served here yet (slurm_resolver's bootstrap server)")
        raise AssertionError  # pragma: no cover - abort raises

    # What every shape shares.

    async def _refuse(self, context: Any, exc: Refused) -> None:
        self._guard.refuse(exc.detail)
        await context.abort(self._status[exc.code], f"{exc.code.value}: {exc.detail}")

    async def _only(self, context: Any, what: str) -> bytes:
        """A unary call's message, read as a stream's (``context.read()``: gRPC's iterator over the
        requests holds twice the memory a flood of large calls takes)."""
        try:
            with _Due(FIRST_MESSAGE, self._guard.unproven):
                message = await context.read()
        except asyncio.TimeoutError:
            raise Refused(Refusal.BUSY, f"no {what} read within {FIRST_MESSAGE:g} s while others wait") from None
        if not isinstance(message, bytes):  # grpc.aio.EOF
            raise Refused(Refusal.INVALID, f"the call ended before its {what}")
        return message


UNSERVED = "this server answers no call of the bootstrap (a framework's server)"
"""What a server without handlers says to any call of the service."""
_OURS = f"/{SERVICE}/"
"""Where every method of the service begins."""


async def _next(requests: AsyncIterator[bytes], what: str, bound: Bound) -> bytes:
    """A stream's next message, within the first-message bound where ``bound`` is contested."""
    try:
        with _Due(FIRST_MESSAGE, bound):
            return await requests.__anext__()
    except asyncio.TimeoutError:
        raise Refused(Refusal.BUSY, f"no {what} read within {FIRST_MESSAGE:g} s while others wait") from None
    except StopAsyncIteration:
        raise Refused(Refusal.INVALID, f"the call ended before its {what}") from None


def _deadline(context: Any) -> float:
    left = context.time_remaining()
    return time.monotonic() + (3600.0 if left is None else max(0.0, left))


@functools.cache
def _status_codes(grpc: Any) -> Mapping[Refusal, Any]:
    """The gRPC status of each refusal (worked out once)."""
    codes = grpc.StatusCode
    return {Refusal.FOREIGN: codes.FAILED_PRECONDITION, Refusal.NOT_LEADER: codes.FAILED_PRECONDITION,
            Refusal.INVALID: codes.INVALID_ARGUMENT, Refusal.UNAUTHENTICATED: codes.UNAUTHENTICATED,
            Refusal.DEADLINE: codes.DEADLINE_EXCEEDED, Refusal.UNREADY: codes.UNAVAILABLE,
            Refusal.BUSY: codes.RESOURCE_EXHAUSTED, Refusal.FULL: codes.FAILED_PRECONDITION}
