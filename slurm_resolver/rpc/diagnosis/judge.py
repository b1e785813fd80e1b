"""The judge's verdict on a hung job: every task's stacks, said once, and the step failed.

Failure detection judges a hang at the top of the tree, on the progress marks its beats carry
(`slurm_resolver.stacks.progress`); then it calls `say_where`, which gathers every task's stacks
through the Stacks call, names the odd ones and their nodes in one error line, and fails the step
with `Cause.HUNG` (every task hears it as this task's failure, and ``slurm-resolver run`` restarts).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from ...faults import Cause, Fault
from ...stacks.job import JobStacks, nodes_of
from ...stacks.progress import Hang, HangKind
from ...stacks.render import ranks_label
from .stacks_call import StacksHandler

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)

log = logging.getLogger("slurm_resolver")

HANG_STACKS = 10.0
"""Seconds the tasks have to give their stacks when the job hangs."""


async def say_where(hang: Hang, stacks: StacksHandler, fail: Callable[[Fault], Awaitable[None]]) -> None:
    """The job hangs (``hang``, judged at the top of the tree): say where every task is, once, then
    ``fail`` the step for the job."""
    cluster = stacks.cluster
    found = await stacks.gather(time.monotonic() + HANG_STACKS)
    job = JobStacks(found, nodes_of(found, lambda rank: cluster.task(rank).node), f"step {cluster.launch.key}")
    odd = [c.ranks for c in job.odd()] if hang.kind is HangKind.STILL else [hang.marks.behind]
    named = "; ".join(ranks_label(ranks, lambda rank: cluster.task(rank).node) for ranks in odd[:4])
    why = f"the job hung: {hang}" + (f" (odd: {named})" if named else "")
    log.error("slurm_resolver: %s; every task's stacks:\n%s", why, job)
    await fail(Fault(Cause.HUNG, why))
