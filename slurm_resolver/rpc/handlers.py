"""One task's server, built whole once: its parts, each answering its own calls, behind one gate.

Each call of the table (`slurm_resolver.rpc.calls`) names the class of the part that answers it; this
server holds one of each. The rounds' `Coordinator` is made with its place in the tree (who joins it,
whether it is the root, how it asks above); the watch of the tasks below with the watch to come, once
failure detection is armed; every other part with the gate every call meets and what the bootstrap
agrees later (`Settled`: a part that can answer only then says so, as Stacks does). Nothing is given
to a running server: what comes later comes through the `Later` values it was made with. The parts
know nothing of each other.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from . import calls as table
from .detection.watch import Watched, WatchHandler
from .messages import Identity, Records, Round, Source
from .rounds.codec import Decision
from .rounds.coordinator import Coordinator
from .shapes import Call, Parts
from .trust.gate import Gate
from .trust.seals import Authority
from .waits import Later, Settled

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)


class TaskHandlers:
    """One task's server: its parts, each answering its own calls, behind one gate.

    Args:
        identity: this task.
        world_size: tasks in the launch.
        authority: checks callers' seals and seals the answers.
        port: the port the server bound.
        sources, root, ask_above, inspect: the rounds it leads (see `Coordinator`).
        settled: what the bootstrap agrees, once it does (for the parts that answer only then).
        watched: this task's watch of the tasks below, once failure detection is armed (None: off).
        calls: the calls it answers (the table's; a test adds its own).

    Attributes:
        parts: each part, found by the class a row names.
    """

    def __init__(self, identity: Identity, world_size: int, authority: Authority, port: int,
                 sources: Iterable[Source] = (), root: bool = False,
                 ask_above: Callable[[Round, float], Awaitable[Decision]] | None = None,
                 inspect: Callable[[Source, int, Records], None] | None = None,
                 settled: Later[Settled] | None = None, watched: Later[Watched | None] | None = None,
                 calls: Iterable[Call[Any]] | None = None) -> None:
        self.gate = gate = Gate(identity, world_size, authority, port)
        self.identity = identity
        self.world_size = world_size
        self.settled: Later[Settled] = Later() if settled is None else settled
        self.watched: Later[Watched | None] = Later() if watched is None else watched
        self.rounds = Coordinator(gate, sources, root, ask_above, inspect)
        self.watching = WatchHandler(gate, self.watched)
        made: dict[type[Any], object] = {Coordinator: self.rounds, WatchHandler: self.watching}
        for part in _with_the_gate(table.CALLS if calls is None else tuple(calls)):
            made[part] = part(gate, self.settled)
        self.parts = Parts(made)


@functools.lru_cache(maxsize=8)
def _with_the_gate(calls: tuple[Call[Any], ...]) -> tuple[type[Any], ...]:
    """The parts of ``calls`` made with the gate and what is settled later: all but the two made with more
    (worked out once for a table, not for every server)."""
    return tuple(dict.fromkeys(call.part for call in calls if call.part not in (Coordinator, WatchHandler)))
