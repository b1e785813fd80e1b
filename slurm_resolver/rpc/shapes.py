"""What a call of the service is: its shape, its bounds, and the part of a task's server that answers it.

A call is a row, declared in the module that holds its codec and its handler (`unary`, `stream`,
`round_call`) and collected into the service's table by `slurm_resolver.rpc.calls`. A row names the
class of the part that answers it and that class's method (``unary("Stacks", StacksHandler,
StacksHandler.stacks)``): mypy checks the method exists and has the shape's signature. Everything else
is derived from the row: the service's gRPC handlers (`slurm_resolver.rpc.network.service`), both links'
stubs, the in-process network's calls, and the bounds, checked here for every network.

Shapes:

- `Unary`: one message each way (WhoAreYou, Stacks); served as a stream of one message, so that its
  message, as every call's first, must come within the service's first-message bound; its request and
  its answer bounded in bytes by the row.
- `Stream`: messages both ways for as long as either side wants (Watch); ended at once when the server
  stops (its end is news to the caller).
- `RoundCall`: Join, a round: a first message, the chunks it announced, an answer; sent in one message
  each way (``JoinBundled``) where it fits. Its part answers in the round's three steps (`RoundHandler`).

A part is made once for each server (`slurm_resolver.rpc.handlers.TaskHandlers`), with the gate every call
meets and what the bootstrap agrees later (`slurm_resolver.rpc.waits.Settled`): a part that can answer only
then waits for it, or refuses ``unready`` until then (as Stacks does).
"""

from __future__ import annotations

import enum
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Sequence
from typing import Any, Generic, Protocol, TypeVar

from ..values import Value, fill
from .refusals import CallFailure, LinkError, Refusal, Refused
from .wire import MAX_MESSAGE

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)

SERVICE = "slurm_resolver.v4.Coordination"
"""The gRPC service every call belongs to (``/slurm_resolver.v4.Coordination/<name>``)."""

P = TypeVar("P")
"""A part of a task's server (the class a row names)."""
C = TypeVar("C")
"""A round's call, as its part opened it."""
R = TypeVar("R")
"""A round, as its part answered it."""

UnaryHandler = Callable[[bytes, float], Awaitable[bytes]]
"""A unary call's server side: ``(message, deadline)`` to the answer; raises `Refused`."""
StreamHandler = Callable[[AsyncIterator[bytes]], AsyncIterator[bytes]]
"""A stream's server side: the caller's messages to the answers; raises `Refused`."""


class Shape(enum.Enum):
    """How a call's messages travel."""

    ROUND = "round"
    """Join: a first message, the chunks it announced, then the answer's messages (in one message each
    way where they fit)."""
    UNARY = "unary"
    """One message each way."""
    STREAM = "stream"
    """Messages both ways, for as long as either side wants."""


class Opened(Protocol):
    """A Join call checked from its first message: the digests of the chunks it announced."""

    @property
    def chunks(self) -> Sequence[bytes]:
        """One digest for each chunk that follows."""
        ...


class RoundHandler(Protocol[C, R]):
    """What answers Join, in its three steps; every message is bytes."""

    world_size: int

    def open_call(self, first: bytes) -> C:
        """Check a Join call from its first message (before more is read); raises `Refused`."""
        ...

    async def join(self, call: C, more: Sequence[bytes], deadline: float) -> tuple[R, list[bytes]]:
        """The round of ``call`` and its answer's messages, once decided; raises `Refused`."""
        ...

    def sent(self, round: R | None) -> None:
        """The answer of ``round`` (what `join` returned, or None) went out to one caller (or it went away)."""
        ...


class Parts:
    """The parts of one task's server, each found by the class a row names (a test's stand-in may stand for
    several).

    >>> Parts({str: "a part"}).of(str)
    'a part'
    """

    __slots__ = ("_parts",)

    def __init__(self, parts: dict[type[Any], object]) -> None:
        self._parts = parts

    def of(self, kind: type[P]) -> P:
        """The part of class ``kind``; `Refused` (``not_leader``) where this server has none."""
        try:
            return self._parts[kind]  # type: ignore[return-value]  # kept by its own class
        except KeyError:
            raise Refused(Refusal.NOT_LEADER, f"this server has no {kind.__name__}") from None

    def __iter__(self) -> Iterator[object]:
        return iter(self._parts.values())


class Answering(Protocol):
    """What a task's server answers with: its parts (`slurm_resolver.rpc.handlers.TaskHandlers`)."""

    @property
    def parts(self) -> Parts:
        """Each part, found by the class a row names."""
        ...


class Call(Value, Generic[P]):
    """One row of the table: a call of the service.

    Attributes:
        name: the gRPC method's name in `SERVICE`.
        shape: how its messages travel.
        part: the class of the part of a task's server that answers it.
    """

    __slots__ = ("name", "shape", "part", "__dict__")  # __dict__: for the cached properties
    name: str
    shape: Shape
    part: type[P]

    __eq__ = object.__eq__  # a row is equal to itself only (its subclasses too)
    __hash__ = object.__hash__

    def __init__(self, name: str, shape: Shape, part: type[P]) -> None:
        fill(self, name, shape, part)

    @functools.cached_property
    def method(self) -> str:
        """gRPC's full name of the method."""
        return f"/{SERVICE}/{self.name}"

    @functools.cached_property
    def answers(self) -> str:
        """The name of the part's method that answers it."""
        answer = getattr(self, "answer", None)
        return answer.__name__ if answer is not None else ""


class Unary(Call[P]):
    """A call of one message each way.

    Attributes:
        answer: the part's method that answers it (``StacksHandler.stacks``).
        most_request: the most bytes its message may hold (a longer one is refused ``invalid``).
        most_answer: the most bytes its answer may hold (a longer one fails the caller's call).
    """

    __slots__ = ("answer", "most_request", "most_answer")
    answer: Callable[[P, bytes, float], Awaitable[bytes]]
    most_request: int
    most_answer: int

    def __init__(self, name: str, shape: Shape, part: type[P], answer: Callable[[P, bytes, float], Awaitable[bytes]],
                 most_request: int = MAX_MESSAGE, most_answer: int = MAX_MESSAGE) -> None:
        fill(self, name, shape, part, answer, most_request, most_answer)

    def handler(self, parts: Parts) -> UnaryHandler:
        """Its server side, on this server's parts (the part's method of the row's name)."""
        found: UnaryHandler = getattr(parts.of(self.part), self.answers)
        return found

    def check_request(self, message: bytes) -> None:
        """`Refused` (``invalid``) for a message beyond the row's bound: the server's check, on every network."""
        if len(message) > self.most_request:
            raise Refused(Refusal.INVALID, f"a {self.name} call of more than {self.most_request} bytes")

    def check_answer(self, answer: bytes) -> bytes:
        """``answer``, or `LinkError` for one beyond the row's bound: the caller's check, on every network."""
        if len(answer) > self.most_answer:
            raise LinkError(CallFailure.REFUSED, f"a {self.name} answer of more than {self.most_answer} bytes",
                            Refusal.FOREIGN)
        return answer


class Stream(Call[P]):
    """A call of messages both ways, held for as long as either side wants.

    Attributes:
        answer: the part's method that answers it (``WatchHandler.watch``).
    """

    __slots__ = ("answer",)
    answer: Callable[[P, AsyncIterator[bytes]], AsyncIterator[bytes]]

    def __init__(self, name: str, shape: Shape, part: type[P],
                 answer: Callable[[P, AsyncIterator[bytes]], AsyncIterator[bytes]]) -> None:
        fill(self, name, shape, part, answer)

    def handler(self, parts: Parts) -> StreamHandler:
        """Its server side, on this server's parts (the part's method of the row's name)."""
        found: StreamHandler = getattr(parts.of(self.part), self.answers)
        return found


class RoundCall(Call[P]):
    """Join: a round, answered in three steps by its part (a `RoundHandler`).

    Attributes:
        bundled: the method's name for a call sent in one message each way (a `Bundle`; most calls).
    """

    __slots__ = ("bundled",)
    bundled: str

    def __init__(self, name: str, shape: Shape, part: type[P], bundled: str = "") -> None:
        fill(self, name, shape, part, bundled)

    @functools.cached_property
    def bundled_method(self) -> str:
        """gRPC's full name of the bundled method."""
        return f"/{SERVICE}/{self.bundled}"

    def handler(self, parts: Parts) -> RoundHandler[Any, Any]:
        """Its server side, on this server's parts."""
        found = parts.of(self.part)
        return found  # type: ignore[return-value]  # a RoundHandler, as `round_call` checked


def announced(call: Opened, messages: Sequence[bytes]) -> Sequence[bytes]:
    """The chunks after a round's first message, as its call announced them; `Refused` (``invalid``) for others:
    the server's check, on every network."""
    if len(messages) != 1 + len(call.chunks):
        raise Refused(Refusal.INVALID, "the call's chunks are not those it announced")
    return messages[1:]


def unary(name: str, part: type[P], answer: Callable[[P, bytes, float], Awaitable[bytes]],
          most_request: int = MAX_MESSAGE, most_answer: int = MAX_MESSAGE) -> Unary[P]:
    """A `Unary` row: ``name``, answered by ``part``'s method ``answer``, within the bounds."""
    return Unary(name, Shape.UNARY, part, answer, most_request, most_answer)


def stream(name: str, part: type[P], answer: Callable[[P, AsyncIterator[bytes]], AsyncIterator[bytes]]
           ) -> Stream[P]:
    """A `Stream` row: ``name``, answered by ``part``'s method ``answer``."""
    return Stream(name, Shape.STREAM, part, answer)


def round_call(name: str, bundled: str, part: type[RoundHandler[C, R]]) -> RoundCall[RoundHandler[C, R]]:
    """A `RoundCall` row: ``name`` (streamed) and ``bundled`` (in one message each way), answered by ``part``."""
    return RoundCall(name, Shape.ROUND, part, bundled)


def served(calls: Iterable[Call[Any]]) -> dict[str, Call[Any]]:
    """The gRPC methods of ``calls`` (a round's two), each with its row; a name taken twice is an error."""
    found: dict[str, Call[Any]] = {}
    for call in calls:
        methods = [call.method, call.bundled_method] if isinstance(call, RoundCall) else [call.method]
        for method in methods:
            if method in found:
                raise ValueError(f"two calls named {method.rpartition('/')[2]}")
            found[method] = call
    return found
