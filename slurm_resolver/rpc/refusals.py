"""How a call fails: a server's refusal (`Refusal`, said on the wire before a colon), and what the caller sees
(`LinkError`, with its `CallFailure`). Every wing speaks of failed calls in these words."""

from __future__ import annotations

import enum

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)


class Refusal(enum.Enum):
    """Why a server refused a call (its reply says which, before a colon)."""

    FOREIGN = "foreign"
    """The call belongs to another launch."""
    NOT_LEADER = "not_leader"
    """This task leads no round the caller may join (the caller looks further)."""
    INVALID = "invalid"
    """A malformed or impossible call, or one beyond a bound."""
    UNAUTHENTICATED = "unauthenticated"
    """The caller did not prove it is a task of this job."""
    DEADLINE = "deadline"
    """The round did not end in time (the reply says who was missing)."""
    UNREADY = "unready"
    """The server cannot answer yet (it does not know the launch's key): ask again."""
    BUSY = "busy"
    """Too many calls not yet proven wait here: ask again."""
    FULL = "full"
    """This task takes no more calls of this kind (a bound it keeps whatever dies below it): call elsewhere, and
    not here again."""


class Refused(Exception):
    """A call a server refuses, with a `Refusal` and one bounded line of why."""

    def __init__(self, code: Refusal, detail: str) -> None:
        super().__init__(f"{code.value}: {detail}")
        self.code = code
        self.detail = detail[:500]


class CallFailure(enum.Enum):
    """How a call failed, seen from the caller."""

    UNAVAILABLE = "unavailable"
    """Nobody answers there, or the connection broke."""
    REFUSED = "refused"
    """A server answered and refused the call (see `code`)."""
    DEADLINE = "deadline"
    """The call did not end in time."""
    CUT = "cut"
    """The call ended with neither an answer nor a refusal, its connection up (gRPC's CANCELLED or INTERNAL): a
    server that lives cut it short (a loaded server whose wait for the call's first message ran out while it
    came); asking again may succeed."""


class LinkError(Exception):
    """A call that failed: how (``kind``), and the server's `Refusal` where it refused."""

    def __init__(self, kind: CallFailure, detail: str, code: Refusal | None = None) -> None:
        super().__init__(f"{kind.value}: {detail}")
        self.kind = kind
        self.code = code
        self.detail = detail[:500]

    @property
    def again(self) -> bool:
        """Whether asking again may succeed: nobody answered yet, the server was not ready, or it cut the call short."""
        return self.kind in (CallFailure.UNAVAILABLE, CallFailure.CUT) or self.code in (Refusal.UNREADY, Refusal.BUSY)

    @classmethod
    def of(cls, refused: Refused) -> LinkError:
        """What the caller sees of a server's refusal."""
        kind = CallFailure.DEADLINE if refused.code is Refusal.DEADLINE else CallFailure.REFUSED
        return cls(kind, refused.detail, refused.code)
