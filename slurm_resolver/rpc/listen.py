"""A task's own side of failure detection: its watch call to the task above.

The call carries this task's beats up and brings the events down (deaths, an empty event
when there is no news). Silence from above for ``patience`` seconds, or a broken call, is
the death of the task above. When the task above leaves normally it names a successor, a
task of its own node that watches in its place: the successor takes its sources over and
watches on the task it watched on, and the others move their call to the successor, so
that failure detection outlives a leader whose work is done (see
:mod:`~slurm_resolver.rpc.watch`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from . import coordination_pb2 as pb
from .transport import REFUSED, LinkError, end_call, stood_still
from .wire import Header

if TYPE_CHECKING:  # pragma: no cover
    from .watch import Watchtower

__all__ = ["listen"]

log = logging.getLogger("slurm_resolver")

WATCH = "watch"
"""The round name a first beat's credential is minted for."""


class _Silent(Exception):
    """Nothing came from above for the patience."""


async def _beats(tower: Watchtower, port: int) -> AsyncIterator[bytes]:
    """This task's beats on one call: a first beat with a credential for the server on ``port``;
    they end (and so does the call) once this task follows another call."""
    member = tower.member
    tower.calls += 1
    mine = tower.calls
    header = Header(member.coordinator.job_key, WATCH, member.rank, member.plan.position)
    authority = member.coordinator.authority
    credential = authority.mint(header, port) if authority is not None and authority.enabled else b""
    yield pb.Beat(job_key=header.job_key, source=member.rank, node=member.plan.position,
                  credential=credential).SerializeToString()
    while tower.calls == mine:  # a call left behind takes no beat from the one that follows it
        try:
            beat = await asyncio.wait_for(tower.up.get(), tower.interval)
        except asyncio.TimeoutError:
            beat = pb.Beat()
        if tower.calls != mine:  # taken while the next call started: it is that call's to carry
            if beat.ListFields():
                tower.up.put_nowait(beat)
            return
        yield beat.SerializeToString()
        if beat.leaving:
            return


def _call_to(tower: Watchtower, above: int) -> AsyncIterator[bytes]:
    """A watch call to ``above``: on the rounds' connection where it is the task above from the start."""
    member = tower.member
    if above == member.up_rank:
        return member.watch_up(_beats(tower, member.up_port))
    cluster = member.cluster
    bound = cluster.bound_ports
    assert bound is not None
    host = cluster.hosts[cluster.placement.node_of(above)]
    return member.network.connect(host, bound[above]).watch(_beats(tower, bound[above]))


async def _events(tower: Watchtower, above: int) -> pb.Event | None:
    """Follow one call to ``above`` until it ends: its last event if it left normally, else None
    (a death declared, or this task leaving). Raises Refused/LinkError/_Silent as the call broke."""
    events = _call_to(tower, above).__aiter__()
    pending: asyncio.Future[bytes] | None = None
    heard = last = time.monotonic()
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(events.__anext__())
            done, _ = await asyncio.wait({pending}, timeout=tower.interval)
            now = time.monotonic()
            heard += stood_still(now, last, tower.interval)  # the silence before a pause still counts
            last = now
            if not done:
                if now - heard > tower.patience:
                    raise _Silent
                continue
            try:
                data, pending, heard = pending.result(), None, now
            except StopAsyncIteration:
                return None
            event = tower.parse_event(data)
            if event.leaving:
                return event
            tower.declare(list(event.failed), event.reason or "reported dead", from_above=True)
    finally:  # end the call itself, so that the task above sees it end (a cancelled task is a dead one)
        if pending is not None:
            pending.cancel()
            await asyncio.wait({pending})
        await end_call(events)


async def listen(tower: Watchtower) -> None:
    """Watch on the task above, and on its successors, until this task or the top of the tree leaves."""
    try:
        await _follow(tower)
    finally:
        tower.above = None  # watching on nobody: a successor of this task is the top of its tree


async def _follow(tower: Watchtower) -> None:
    member = tower.member
    above = member.up_rank if member.up_position is not None else None
    moved_at = 0.0  # when the call last moved to a successor: it may not be ready for a moment
    while above is not None and not tower.leaving:
        tower.above = above
        try:
            event = await _events(tower, above)
        except Exception as exc:  # noqa: BLE001 - refused, malformed, silent, broken: the call is over
            if tower.leaving:
                return
            if isinstance(exc, LinkError) and time.monotonic() - moved_at < tower.patience:
                await asyncio.sleep(0.05)  # a successor that has not taken over yet, or a parent that
                continue  # has not yet seen its predecessor leave: ask again
            tower.declare([above], _why(tower, above, exc))
            return
        if event is None or not event.successor:
            return  # the task above ends normally and nobody takes over
        await asyncio.sleep(tower.interval)  # where the whole job ends together, nobody moves: no new call
        if tower.leaving:
            return
        successor = event.successor - 1
        moved_at = time.monotonic()
        if successor == member.rank:
            tower.take_over(set(event.gone) | {above})
            above = event.above - 1 if event.above else None
        else:
            above = successor
        log.debug("slurm_resolver: rank %d watches on rank %s from now on", member.rank, above)


def _why(tower: Watchtower, above: int, exc: BaseException) -> str:
    member = tower.member
    who = member.name(above)
    log.debug("slurm_resolver: the watch to %s ended: %r", who, exc)
    if isinstance(exc, _Silent):
        return f"{who} stopped answering: nothing for {tower.patience:g} s (hung, or its node gone)"
    if isinstance(exc, LinkError) and exc.kind == REFUSED:
        return f"{who} refused the watch of rank {member.rank}: {exc.detail}"
    return f"{who} died: its connection to rank {member.rank} closed"
