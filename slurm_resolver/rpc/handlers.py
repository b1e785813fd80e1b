"""Everything one task's server answers, put together: its rounds, who it is, the watch of the tasks below.

Each call is answered by the part that owns it: Join by the rounds' `Coordinator`, WhoAreYou by
trust's `IdentityHandler`, Watch by failure detection's `WatchHandler`, Stacks (once bootstrapped) by
its `StacksHandler`; the first three meet the same `Gate` first (Stacks checks its own asks: the job's
user outside it may ask). The parts know nothing of each other.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable

from .detection.stacks_call import StacksHandler
from .detection.watch import WatchHandler
from .messages import Identity, Records, Round, Source
from .rounds.codec import Decision
from .rounds.coordinator import Coordinator
from .transport import Refusal, Refused
from .trust.gate import Gate
from .trust.identity import IdentityHandler
from .trust.seals import Authority

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)


class TaskHandlers:
    """One task's server: its parts, each answering its own calls, behind one gate.

    Args:
        identity: this task.
        world_size: tasks in the launch.
        authority: checks callers' seals and seals the answers.
        port: the port the server bound.
        sources, root, ask_above, inspect: the rounds it leads (see `Coordinator`).
    """

    def __init__(self, identity: Identity, world_size: int, authority: Authority, port: int,
                 sources: Iterable[Source] = (), root: bool = False,
                 ask_above: Callable[[Round, float], Awaitable[Decision]] | None = None,
                 inspect: Callable[[Source, int, Records], None] | None = None) -> None:
        self.gate = Gate(identity, world_size, authority, port)
        self.world_size = world_size
        self.rounds = Coordinator(self.gate, sources, root, ask_above, inspect)
        self.identity = identity
        self.identifying = IdentityHandler(self.gate)
        self.watching = WatchHandler(self.gate)
        self.open_call = self.rounds.open_call
        self.join = self.rounds.join
        self.sent = self.rounds.sent
        self.who = self.identifying.who
        self.watch = self.watching.watch
        self._stacks: StacksHandler | None = None

    def stacks_below(self, handler: StacksHandler) -> None:
        """From now on (once bootstrapped: the tasks below are known by their ports) this server answers
        asks for stacks."""
        self._stacks = handler

    async def stacks(self, message: bytes, deadline: float) -> bytes:
        """The stacks of this task's subtree (`slurm_resolver.rpc.detection.stacks_call`)."""
        if self._stacks is None:
            raise Refused(Refusal.UNREADY, f"rank {self.identity.rank} is not bootstrapped yet: ask again")
        return await self._stacks.stacks(message, deadline)
