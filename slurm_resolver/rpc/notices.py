"""Notices: one task announces an event, every task waiting for it hears it, through the tree.

``announce`` tells the root; the notice travels down the tree of node leaders to every
task waiting for it, so a waiting task holds one call to its node's leader whatever the
size of the job. A leader asks above once on behalf of every task below it that waits.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ..errors import ResolutionError
from .coordinator import ANNOUNCE
from .rounds import NOTICE
from .transport import LinkError
from .wire import Failure, Records, decode_result, encode_result

if TYPE_CHECKING:  # pragma: no cover
    from .protocol import Member

__all__ = ["wait_for", "hear", "announce"]


async def wait_for(member: Member, name: str, timeout: float) -> None:
    """Return once some task announces ``name`` (:func:`announce`); the notice comes down the tree."""
    round_name = NOTICE + name
    rounds = member.coordinator.rounds
    if rounds.decided(round_name) or (member.rank == member.plan.leader and not rounds.claim(round_name)):
        # Announced here, heard before, or already asked above for a task below: wait for that answer.
        chunks = await rounds.result(round_name, time.monotonic() + timeout) or encode_result(
            "", Failure.of(f"nobody announced {name!r} within {timeout:g} s"))
    else:
        chunks = await hear(member, name, timeout)
    _, failure, _ = decode_result(tuple(chunks), member.cluster.world_size)
    if failure:
        raise member.error(failure, f"hear of {name!r}", timeout)


async def hear(member: Member, name: str, timeout: float) -> list[bytes]:
    """Ask above for notice ``name``; a leader passes the answer (or why there is none) to its tasks."""
    round_name = NOTICE + name
    start = time.monotonic()
    if member.rank != member.plan.leader:
        chunks = await member.up(round_name, Records(), Failure(), start + timeout, timeout)
    elif member.up_position is None:  # the root gives up first, and tells everyone why
        found = await member.coordinator.rounds.result(round_name, start + timeout * member.plan.tree.report_at(0))
        chunks = found or encode_result("", Failure.of(f"nobody announced {name!r} within {timeout:g} s"))
        member.coordinator.rounds.publish(round_name, chunks)
    else:
        try:
            chunks = await member.up(round_name, Records(), Failure(),
                                     start + timeout * member.plan.tree.give_up_at(member.plan.position), timeout)
        except ResolutionError as exc:
            chunks = encode_result("", Failure.of(exc.message))  # tell the tasks below why
        member.coordinator.rounds.publish(round_name, chunks)
    return chunks


async def announce(member: Member, name: str, timeout: float) -> None:
    """Tell every task waiting for ``name`` (the root is told, and the notice goes down the tree)."""
    if member.is_root:
        member.coordinator.rounds.publish(NOTICE + name, encode_result("", Failure()))
        return
    if member.coordinator.rounds.decided(NOTICE + name):
        return
    bound = member.cluster.bound_ports
    assert bound is not None, "announce() needs the bootstrapped cluster"
    where = member.cluster.placement
    root = where.ranks_on(0)[0]
    link = member.network.connect(member.cluster.hosts[where.nodes[0]], bound[root])
    chunks = member.contribution(ANNOUNCE + name, Records(), Failure(), bound[root])
    try:
        await link.join(chunks, timeout)
    except LinkError as exc:
        raise ResolutionError(f"could not announce {name!r} to {member.name(root)}, the root of the tree: "
                              f"{exc.detail}", "check that task's output; it may have ended") from None
    member.coordinator.rounds.publish(NOTICE + name, encode_result("", Failure()))  # this task's own waiters
