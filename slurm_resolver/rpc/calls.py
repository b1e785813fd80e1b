"""The service's table: every call a task's server answers, each row collected from the module that declares it.

A row (`slurm_resolver.rpc.shapes`) names its call, its shape, the part of a task's server that answers it
and that part's method, and its bounds; each is declared beside its codec and its handler:

| call | its module | answered by |
|---|---|---|
| ``Join`` (``JoinBundled``) | `slurm_resolver.rpc.rounds.coordinator` | the rounds' `Coordinator` |
| ``WhoAreYou`` | `slurm_resolver.rpc.trust.identity` | trust's `IdentityHandler` |
| ``Watch`` | `slurm_resolver.rpc.detection.watch` | failure detection's `WatchHandler` |
| ``Stacks`` | `slurm_resolver.rpc.diagnosis.stacks_call` | diagnosis's `StacksHandler` |
| ``Lost`` | `slurm_resolver.rpc.detection.watch` | failure detection's `WatchHandler` |

A new call (docs/protocol.md, "A new call"): its messages in ``coordination.proto``, its module (codec,
part, row), and its row here.
"""

from __future__ import annotations

from typing import Any

from .detection.watch import LOST, WATCH
from .diagnosis.stacks_call import STACKS
from .rounds.coordinator import JOIN
from .shapes import Call, served
from .trust.identity import WHO

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)

CALLS: tuple[Call[Any], ...] = (JOIN, WHO, WATCH, STACKS, LOST)
"""The service's calls: what a task's server answers."""

TABLE = served(CALLS)
"""`CALLS` by gRPC method (Join's two methods each)."""
