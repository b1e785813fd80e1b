"""Waiting cheaply, as thousands of tasks in one process wait at once: a flag whose waiters' list is
made by the first waiter, a wait with a deadline in the caller's own task, and a value that comes later
(`Later`): what the bootstrap agrees (`Settled`), given to the parts of a task's server that answer only then."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Generic, NamedTuple, TypeVar

from .transport import within

if TYPE_CHECKING:  # pragma: no cover
    from ..cluster import Cluster
    from .transport import Network
    from .tree import Plan

T = TypeVar("T")

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)


class Flag:
    """`asyncio.Event` as servers use it (`set`, `clear`, `is_set`, `wait`), whose list of waiters is made
    by the first waiter. An Event makes a deque of 760 bytes when it is made: every server holds one and
    every round at a leader three, most never waited on, which a simulation of 524,288 tasks in one
    process holds 720,000 times (6 % of its memory).

    >>> flag = Flag(); flag.set(); flag.is_set(), asyncio.run(flag.wait())
    (True, True)
    """

    __slots__ = ("_set", "_waiters")

    def __init__(self) -> None:
        self._set = False
        self._waiters: list[asyncio.Future[None]] | None = None

    def is_set(self) -> bool:
        """Whether the flag is set."""
        return self._set

    def set(self) -> None:
        """Set the flag: every waiter wakes."""
        if not self._set:
            self._set = True
            for waiter in self._waiters or ():
                if not waiter.done():
                    waiter.set_result(None)

    def clear(self) -> None:
        """Unset the flag (the next `wait()` blocks)."""
        self._set = False

    async def wait(self) -> bool:
        """Return True once the flag is set (at once if it is)."""
        if self._set:
            return True
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._waiters is None:
            self._waiters = []
        self._waiters.append(waiter)
        try:
            await waiter
            return True
        finally:
            self._waiters.remove(waiter)
            if not self._waiters:
                self._waiters = None


async def wait_until(event: Flag | asyncio.Event, deadline: float) -> bool:
    """Whether ``event`` is set before ``deadline`` (``time.monotonic()``), waited for in the
    caller's own task (no task of its own per wait: thousands wait at once in a simulation)."""
    if event.is_set():
        return True
    try:
        with within(deadline - time.monotonic()):
            await event.wait()
    except asyncio.TimeoutError:
        return event.is_set()
    return True


class Later(Generic[T]):
    """A value that comes later, set once: whoever needs it asks whether it came (`value`, `came`), or waits
    for it (the flag it is waited on made by the first waiter: most are never waited on).

    >>> later: Later[int] = Later(); later.value is None, later.set(7), later.value
    (True, None, 7)
    """

    __slots__ = ("value", "came", "_flag")

    def __init__(self) -> None:
        self.value: T | None = None
        """The value, where it came (else None)."""
        self.came = False
        """Whether the value came (it may be None)."""
        self._flag: Flag | None = None

    def set(self, value: T) -> None:
        """The value came (once: a second is an error)."""
        if self.came:
            raise RuntimeError("a value that comes once came twice")
        self.value, self.came = value, True
        if self._flag is not None:
            self._flag.set()

    async def wait(self, deadline: float) -> T | None:
        """The value, once it came before ``deadline`` (``time.monotonic()``); None where it did not."""
        if not self.came:
            if self._flag is None:
                self._flag = Flag()
            await wait_until(self._flag, deadline)
        return self.value


class Settled(NamedTuple):
    """What the bootstrap agrees, for the parts of a task's server that answer only then: the cluster with
    every server's port, this task's place in the tree, and the network to reach the others."""

    cluster: Cluster
    plan: Plan
    network: Network
