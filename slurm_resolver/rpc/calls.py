"""The table of the coordination service's calls: each declared once, everything else derived from it.

A call is a row: its name (the gRPC method ``/slurm_resolver.v4.Coordination/<name>``), its shape,
which part of a task's server answers it, and its bounds. From the table come the service's
gRPC handlers and the bounds each call meets as it opens (`slurm_resolver.rpc.network.service`),
the stubs of both links (`GrpcLink.unary` and `.stream`, the in-process link's), and the
refusals of a server that answers none of them (a framework's server: each row's `unserved`).

Shapes:

- `Unary`: one message each way (WhoAreYou); served as a stream of one message, so that its
  message, as every call's first, must come within the service's first-message bound, and held
  to each caller's share of calls not yet proven until its handler answered; its request and its
  answer bounded in bytes by the row.
- `Stream`: messages both ways for as long as either side wants (Watch); held to each caller's
  share of calls, and ended at once when the server stops (its end is news to the caller).
- Join is a round, not a plain shape: a first message, the chunks it announced, an answer; its
  two rows (`JOIN`, and `JOIN_BUNDLED`, a call that fits in one message) say where, and the
  service answers them with the rounds' three steps (`Handlers.open_call`, `.join`, `.sent`).

A new call (docs/protocol.md, "A new call") is its messages in ``coordination.proto``, their codec,
its handler, and one row here.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from .wire import MAX_MESSAGE

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)

SERVICE = "slurm_resolver.v4.Coordination"

UnaryHandler = Callable[[bytes, float], Awaitable[bytes]]
"""A unary call's server side: ``(message, deadline)`` to the answer; raises `Refused`."""
StreamHandler = Callable[[AsyncIterator[bytes]], AsyncIterator[bytes]]
"""A stream's server side: the caller's messages to the answers; raises `Refused`."""


class Shape(enum.Enum):
    """How a call's messages travel."""

    ROUND = "round"
    """Join, streamed: a first message, the chunks it announced, then the answer's messages."""
    ROUND_BUNDLED = "round_bundled"
    """Join in one message each way (a `Bundle`)."""
    UNARY = "unary"
    """One message each way."""
    STREAM = "stream"
    """Messages both ways, for as long as either side wants."""


@dataclass(frozen=True, eq=False)
class Call:
    """One row of the table: a call of the service.

    Attributes:
        name: the gRPC method's name in `SERVICE`.
        shape: how its messages travel.
        unserved: what a server that answers no call of the protocol says to it (refused, ``not_leader``).
    """

    name: str
    shape: Shape
    unserved: str

    @property
    def method(self) -> str:
        """gRPC's full name of the method."""
        return f"/{SERVICE}/{self.name}"


@dataclass(frozen=True, eq=False)
class Unary(Call):
    """A call of one message each way.

    Attributes:
        answer: which handler of a task's server answers it (given the server's handlers).
        most_request: the most bytes its message may hold (a longer one is refused ``invalid``).
        most_answer: the most bytes its answer may hold (a longer one fails the caller's call).
    """

    answer: Callable[[Any], UnaryHandler]
    most_request: int = MAX_MESSAGE
    most_answer: int = MAX_MESSAGE


@dataclass(frozen=True, eq=False)
class Stream(Call):
    """A call of messages both ways, held for as long as either side wants.

    Attributes:
        answer: which handler of a task's server answers it (given the server's handlers).
    """

    answer: Callable[[Any], StreamHandler]


def unary(name: str, answer: Callable[[Any], UnaryHandler], unserved: str, most_request: int = MAX_MESSAGE,
          most_answer: int = MAX_MESSAGE) -> Unary:
    """A `Unary` row."""
    return Unary(name, Shape.UNARY, unserved, answer, most_request, most_answer)


def stream(name: str, answer: Callable[[Any], StreamHandler], unserved: str) -> Stream:
    """A `Stream` row."""
    return Stream(name, Shape.STREAM, unserved, answer)


JOIN = Call("Join", Shape.ROUND, "this server leads no round")
"""Contribute to a round and receive its result (the rounds' `Coordinator`)."""
JOIN_BUNDLED = Call("JoinBundled", Shape.ROUND_BUNDLED, "this server leads no round")
"""Join for a call whose messages fit in one message (most calls), at a unary call's cost."""
WHO = unary("WhoAreYou", lambda handlers: handlers.who, "this server belongs to no launch")
"""Who this server is (trust's `IdentityHandler`)."""
WATCH = stream("Watch", lambda handlers: handlers.watch, "this server watches no task")
"""Heartbeats up, failures down, for as long as the job runs (failure detection's `WatchHandler`)."""

STACKS = unary("Stacks", lambda handlers: handlers.stacks, "this server belongs to no launch", most_request=4096,
              most_answer=MAX_MESSAGE)
"""Every task's Python stacks below this one, merged (`slurm_resolver.rpc.detection.stacks_call`): asked
of the root by a task of the job or by the job's user outside it."""

CALLS: tuple[Call, ...] = (JOIN, JOIN_BUNDLED, WHO, WATCH, STACKS)
"""The service's calls: what a task's server answers."""

TABLE: dict[str, Call] = {}
"""`CALLS` by gRPC method (filled below)."""


def table(*more: Call, calls: tuple[Call, ...] = CALLS) -> dict[str, Call]:
    """The calls by gRPC method, ``more`` beside ``calls`` (a name taken twice is an error)."""
    found: dict[str, Call] = {}
    for call in (*calls, *more):
        if call.method in found:
            raise ValueError(f"two calls named {call.name}")
        found[call.method] = call
    return found


TABLE.update(table())
