"""The coordination service over gRPC: its methods, and the bounds every caller meets as its call opens.

It serves gRPC health checking (``grpc.health.v1.Health/Check``, open to any client: it answers
``SERVING``) and the calls of the table (`slurm_resolver.rpc.calls`) through generic handlers on raw
bytes, one per shape, so that the same handlers answer here and in the in-process network. A server
with no handlers refuses each call with its row's words. Any other method (a framework's) is
answered ``UNAVAILABLE``.

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
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any, cast

from ..calls import TABLE, Call, Shape, Stream, Unary
from ..messages import WireError
from ..transport import Handlers, Refusal, Refused, end_call, within
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


def generic_handlers(grpc: Any, handlers: Handlers | None, own: str = "", calls: Underway | None = None,
                     port: int = 0, table: Mapping[str, Call] = TABLE) -> Any:
    """gRPC's generic handler of the service, answering the calls of ``table`` with ``handlers`` (None:
    refusing each with its row's words), for a server on ``own`` and ``port``; the calls under way are
    kept in ``calls``."""
    calls = calls or Underway()
    status = _status_codes(grpc)
    guard = _Guard(own, port)
    rounds = cast(Handlers, handlers)  # Join's handlers are made only where there are handlers (`served`)

    def deadline(context: Any) -> float:
        left = context.time_remaining()
        return time.monotonic() + (3600.0 if left is None else max(0.0, left))

    async def refuse(context: Any, exc: Refused) -> None:
        guard.refuse(exc.detail)
        await context.abort(status[exc.code], f"{exc.code.value}: {exc.detail}")

    async def next_message(requests: AsyncIterator[bytes], what: str, bound: Bound) -> bytes:
        try:
            with _Due(FIRST_MESSAGE, bound):
                return await requests.__anext__()
        except asyncio.TimeoutError:
            raise Refused(Refusal.BUSY, f"no {what} read within {FIRST_MESSAGE:g} s while others wait") from None
        except StopAsyncIteration:
            raise Refused(Refusal.INVALID, f"the call ended before its {what}") from None

    async def only_message(context: Any, what: str) -> bytes:
        """A unary call's message, read as a stream's (``context.read()``: gRPC's iterator over the
        requests holds twice the memory a flood of large calls takes)."""
        try:
            with _Due(FIRST_MESSAGE, guard.unproven):
                message = await context.read()
        except asyncio.TimeoutError:
            raise Refused(Refusal.BUSY, f"no {what} read within {FIRST_MESSAGE:g} s while others wait") from None
        if not isinstance(message, bytes):  # grpc.aio.EOF
            raise Refused(Refusal.INVALID, f"the call ended before its {what}")
        return message

    async def join(requests: AsyncIterator[bytes], context: Any) -> AsyncIterator[bytes]:
        round = None
        handling = asyncio.current_task()
        calls.rounds.add(handling)  # type: ignore[arg-type]
        try:
            peer = str(context.peer() or "")
            with guard.calls.holding(peer):
                with guard.unproven.holding(peer):
                    call = rounds.open_call(await next_message(requests, "first message", guard.unproven))
                more = [await next_message(requests, "announced chunk", guard.calls) for _ in call.chunks]
                round, answer = await rounds.join(call, more, deadline(context))
        except Refused as exc:
            await refuse(context, exc)
        try:
            for message in answer:
                yield message
        finally:
            rounds.sent(round)
            calls.rounds.discard(handling)

    # The unary calls are served as streams of one message, so that their message, like a Join's
    # first, must come within FIRST_MESSAGE seconds (gRPC calls a unary handler only once it came).

    async def join_bundled(requests: AsyncIterator[bytes], context: Any) -> bytes:
        round = None
        handling = asyncio.current_task()
        calls.rounds.add(handling)  # type: ignore[arg-type]
        try:
            peer = str(context.peer() or "")
            with guard.calls.holding(peer):
                with guard.unproven.holding(peer):
                    try:
                        messages = unbundle(await only_message(context, "call"), most_chunks(rounds.world_size) + 1)
                        call = rounds.open_call(messages[0])
                    except WireError as exc:
                        raise Refused(Refusal.INVALID, str(exc)) from None
                if len(messages) != 1 + len(call.chunks):
                    raise Refused(Refusal.INVALID, "the call's chunks are not those it announced")
                round, answer = await rounds.join(call, messages[1:], deadline(context))
                return bundle(answer)
        except Refused as exc:
            await refuse(context, exc)
            raise  # pragma: no cover - abort raises
        finally:
            calls.rounds.discard(handling)
            if round is not None:
                rounds.sent(round)

    def unary(call: Unary, answer: Any) -> Any:
        async def handle(requests: AsyncIterator[bytes], context: Any) -> bytes:
            handling = asyncio.current_task()
            calls.rounds.add(handling)  # type: ignore[arg-type]
            try:
                peer = str(context.peer() or "")
                with guard.calls.holding(peer), guard.unproven.holding(peer):
                    message = await only_message(context, "message")
                    if len(message) > call.most_request:
                        raise Refused(Refusal.INVALID, f"a {call.name} call of more than {call.most_request} bytes")
                    return bytes(await answer(message, deadline(context)))
            except Refused as exc:
                await refuse(context, exc)
                raise  # pragma: no cover - abort raises
            finally:
                calls.rounds.discard(handling)
        return grpc.stream_unary_rpc_method_handler(handle)

    def stream(answer: Any) -> Any:
        async def handle(requests: AsyncIterator[bytes], context: Any) -> AsyncIterator[bytes]:
            events: Any = None
            handling = asyncio.current_task()
            calls.watches.add(handling)  # type: ignore[arg-type]
            try:
                with guard.calls.holding(str(context.peer() or "")):
                    events = answer(requests)
                    async for event in events:
                        yield event
            except Refused as exc:
                await refuse(context, exc)
            finally:  # a cancelled call ends the stream at once (its end is the news)
                calls.watches.discard(handling)
                await end_call(events)
        return grpc.stream_stream_rpc_method_handler(handle)

    def refusing(call: Call) -> Any:
        async def handle(requests: AsyncIterator[bytes], context: Any) -> Any:
            await refuse(context, Refused(Refusal.NOT_LEADER, call.unserved))
        if call.shape in (Shape.ROUND, Shape.STREAM):
            async def streamed(requests: AsyncIterator[bytes], context: Any) -> AsyncIterator[bytes]:
                await handle(requests, context)
                yield b""  # pragma: no cover - abort raises
            return grpc.stream_stream_rpc_method_handler(streamed)
        return grpc.stream_unary_rpc_method_handler(handle)

    async def health(request: bytes, context: Any) -> bytes:
        if len(request) > 256:  # a HealthCheckRequest names a service, no more
            guard.refuse("an oversized health check")
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "invalid: not a health check")
        return _SERVING

    async def reject(request: bytes, context: Any) -> bytes:  # a framework's method, before its server
        await context.abort(grpc.StatusCode.UNAVAILABLE, "not served here yet (slurm_resolver's bootstrap server)")
        raise AssertionError  # pragma: no cover - abort raises

    def served(call: Call) -> Any:
        if handlers is None:
            return refusing(call)
        if call.shape is Shape.ROUND:
            return grpc.stream_stream_rpc_method_handler(join)
        if call.shape is Shape.ROUND_BUNDLED:
            return grpc.stream_unary_rpc_method_handler(join_bundled)
        if isinstance(call, Unary):
            return unary(call, call.answer(handlers))
        assert isinstance(call, Stream), call
        return stream(call.answer(handlers))

    def made(method: str) -> Any:
        if method == HEALTH_METHOD:
            return grpc.unary_unary_rpc_method_handler(health)
        call = table.get(method)
        return grpc.unary_unary_rpc_method_handler(reject) if call is None else served(call)

    return _Service(made, [*table, HEALTH_METHOD])


class _Service:
    """gRPC's generic handler (gRPC asks only for its ``service``): each method's handler, made by ``make`` on
    its first call (a server is called for one or two of the table's methods: making all seven cost every
    task 3% of its CPU at 16,384 tasks), and one handler for any other method. A class made once: one per
    server cost every task a class's creation."""

    __slots__ = ("_make", "_made")

    _OTHER = ""
    """Where any method not in ``methods`` is kept: a stranger's names are not remembered one by one."""

    def __init__(self, make: Callable[[str], Any], methods: Iterable[str]) -> None:
        self._make = make
        self._made: dict[str, Any] = dict.fromkeys([*methods, self._OTHER])

    def service(self, details: Any) -> Any:
        method = details.method if details.method in self._made else self._OTHER
        handler = self._made[method]
        if handler is None:
            handler = self._made[method] = self._make(method)
        return handler


@functools.cache
def _status_codes(grpc: Any) -> Mapping[Refusal, Any]:
    """The gRPC status of each refusal (worked out once)."""
    codes = grpc.StatusCode
    return {Refusal.FOREIGN: codes.FAILED_PRECONDITION, Refusal.NOT_LEADER: codes.FAILED_PRECONDITION,
            Refusal.INVALID: codes.INVALID_ARGUMENT, Refusal.UNAUTHENTICATED: codes.UNAUTHENTICATED,
            Refusal.DEADLINE: codes.DEADLINE_EXCEEDED, Refusal.UNREADY: codes.UNAVAILABLE,
            Refusal.BUSY: codes.RESOURCE_EXHAUSTED}
