"""Stacks: every task's Python stacks gathered down the tree and merged on the way up.

The root is asked (by a task of the job, ``b.stacks()``, or by the job's user from outside it,
``slurm-resolver stacks``); each task asks the tasks that report to it (its node's tasks, and its
child nodes' leaders) at once, takes its own stacks meanwhile, and answers the merge: classes of
identical stacks with their ranks (`slurm_resolver.stacks.classes`), bounded whatever the size of the
subtree. A task that does not answer before its asker's deadline is silent, with every rank below it.

Who may ask: a task of the job (its seal, as every later call's), or the job's user outside it
(a MUNGE credential of its uid, or a seal of the job's secret, `Authority.seal_outside`). An ask is
good for one server (its port and node, and its rank inside the job: the seal covers them), once,
within `FRESH` seconds of its time; an ask from outside the job is taken by the step's root alone
(so once job-wide: a copy replayed at another task is refused). Anyone else is refused, and logged.

What comes back is bounded by who answers: a child's answer that counts or names more than its own
subtree makes that child silent (with its subtree), and the rest of the job's stacks still come.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence

from ...cluster import Cluster
from ...stacks.capture import ThreadStack, capture
from ...stacks.classes import Stacks
from ...stacks.job import JobStacks, nodes_of
from ..messages import Source, SourceKind, WireError
from ..primitives import fresh
from ..shapes import unary
from ..transport import Link, Refusal, Refused, within
from ..tree import Plan
from ..trust.gate import Gate
from ..trust.seals import Authority, Checked, Purpose, SealVerdict
from ..waits import Later, Settled
from ..wire import MAX_MESSAGE, unwrap
from .stacks_wire import StacksAsk, beyond, decode_answer, decode_ask, decode_stacks, encode_ask, encode_stacks

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)

log = logging.getLogger("slurm_resolver")

FRESH = 120.0
"""Seconds an ask is good for, either side of its time (clocks of a cluster agree within that)."""
_REMEMBERED = 4096
"""Nonces of asks remembered (for `FRESH` seconds): an ask seen is not answered again."""
_KEEP = 0.1
"""The share of the time left that a task keeps for merging and answering (at least `_LEAST_KEPT` s); the
tasks it asks get the rest, so that a deep tree's leaves still get most of the time."""
_LEAST_KEPT = 0.05


class StacksRefused(Exception):
    """The server asked for stacks answered with no proof of being the job's, or to another ask."""


async def ask_for_stacks(link: Link, authority: Authority, ask: StacksAsk, world_size: int) -> JobStacks:
    """The stacks the server at the other end of ``link`` answers ``ask`` with, proven by its seal
    (the job's user outside the job: `Authority.seal_outside`'s). Raises `LinkError` (no answer, or
    a refusal), `WireError` (a malformed answer) or `StacksRefused`."""
    outside = ask.outside(world_size)

    def seal(header: bytes) -> bytes:
        return authority.seal_outside(Purpose.CALL, header) if outside else authority.seal(Purpose.CALL, header)

    reply = await link.unary(STACKS, encode_ask(ask, seal), ask.within + 1.0)
    header, answer_seal = unwrap(reply)
    stacks, echoed, _, nodes = decode_answer(header, world_size)
    checked = authority.check_outside(Purpose.ANSWER, header, answer_seal) if outside else \
        authority.check(Purpose.ANSWER, header, answer_seal)
    if not checked.believed:
        raise StacksRefused(checked.why)
    if echoed != ask.nonce:
        raise StacksRefused("an answer to another ask")
    return JobStacks(stacks, nodes, f"step {ask.job_key}")


async def own_stacks() -> tuple[ThreadStack, ...]:
    """This process's stacks, taken on its event loop's thread (left out, with the package's own)."""
    return capture()


class StacksHandler:
    """A task's side of Stacks, a part of its server: checks who asks, asks the tasks below at once, and
    answers the merge. It answers once the bootstrap has settled (the tasks below are known by their
    ports): before, an ask is refused ``unready``.

    Made in every task's server, so it holds no more than its arguments until it is first asked.

    Args:
        gate: the checks every call to this server meets (this task, its port, the authority that checks
            asks and seals answers).
        settled: what the bootstrap agrees: the cluster with every server's port, this task's place in
            the tree, the network to reach the tasks below.

    Attributes:
        take: this task's stacks now (`own_stacks`; its command's, under ``bootstrap --``).
    """

    take: Callable[[], Awaitable[Sequence[ThreadStack]]] = staticmethod(own_stacks)
    refused = 0
    _seen: OrderedDict[bytes, float] | None = None

    def __init__(self, gate: Gate, settled: Later[Settled]) -> None:
        self.gate = gate
        self.settled = settled
        self.authority: Authority = gate.authority
        self.port = gate.port

    @property
    def _now(self) -> Settled:
        """What the bootstrap agreed; `Refused` (``unready``) before it did."""
        found = self.settled.value
        if found is None:
            raise Refused(Refusal.UNREADY, f"rank {self.gate.identity.rank} is not bootstrapped yet: ask again")
        return found

    @property
    def cluster(self) -> Cluster:
        """The bootstrapped cluster."""
        return self._now.cluster

    @property
    def plan(self) -> Plan:
        """This task's place in the tree."""
        return self._now.plan

    @property
    def root(self) -> int:
        """The rank at the top of the tree (the lowest of the first node): it takes asks from outside."""
        return int(self.cluster.placement.ranks_on(0)[0])

    def node_of(self, rank: int) -> str:
        """The name of ``rank``'s node."""
        return self.cluster.task(rank).node

    async def ask(self, rank: int, message: bytes, timeout: float) -> bytes:
        """Call Stacks on the task of ``rank`` (its bound port, on its node)."""
        settled = self._now
        cluster, network = settled.cluster, settled.network
        link = network.connect(*cluster.endpoint(rank))
        return await link.unary(STACKS, message, timeout)

    async def stacks(self, message: bytes, deadline: float) -> bytes:
        """The answer to an ask (``message``) for this task's subtree, by ``deadline`` (monotonic)."""
        world = self.cluster.world_size
        try:
            header, seal = unwrap(message)
            ask = decode_ask(header, world)
        except WireError as exc:
            raise Refused(Refusal.INVALID, str(exc)) from None
        if ask.job_key != self.cluster.launch.key:
            raise Refused(Refusal.FOREIGN, "this server belongs to another launch")
        outside = ask.outside(world)
        self._check(ask, header, seal, outside)
        until = min(deadline, time.monotonic() + ask.within)
        stacks = await self.gather(until)
        rank = self.plan.rank
        if outside:  # answered with the proof it was asked with (MUNGE, or the secret)
            nodes = nodes_of(stacks, lambda r: self.cluster.task(r).node)
            munge = seal.startswith(b"MUNGE:")
            return encode_stacks(stacks, ask.nonce, rank,
                                 lambda h: self.authority.seal_outside(Purpose.ANSWER, h, munge), nodes)
        return encode_stacks(stacks, ask.nonce, rank, lambda h: self.authority.seal(Purpose.ANSWER, h))

    def _check(self, ask: StacksAsk, header: bytes, seal: bytes, outside: bool) -> None:
        rank = self.plan.rank
        if outside and rank != self.root:
            root = self.root
            checked = Checked.refused(f"an ask from outside the job is taken by the step's root alone (rank {root} "
                                      f"on {self.node_of(root)}), not by rank {rank}")
        elif ask.port != self.port or ask.node != self.node_of(rank) or (not outside and ask.rank != rank):
            checked = Checked.refused("made for another server")
        elif outside:
            checked = self.authority.check_outside(Purpose.CALL, header, seal)
        else:
            checked = self.authority.check(Purpose.CALL, header, seal)
        now = time.time()
        if checked.believed and abs(now - ask.time) > FRESH:
            checked = Checked.refused(f"an ask made {now - ask.time:+.0f} s from now (good for {FRESH:g} s)")
        if checked.believed and self._seen is not None and ask.nonce in self._seen:
            checked = Checked.refused("an ask answered already (replayed)")
        if checked.believed:
            self._remember(ask.nonce, now)
            return
        if checked.verdict is SealVerdict.UNREADY:
            raise Refused(Refusal.UNREADY, f"rank {self.plan.rank} cannot check seals yet: ask again")
        self.refused += 1
        who = "the job's user outside it" if outside else f"rank {ask.source}"
        if self.refused <= 20 or self.refused % 1000 == 0:
            log.warning("slurm_resolver: rank %d refused an ask for stacks claiming to be %s: %s (%d refused so far)",
                        self.plan.rank, who, checked.why, self.refused)
        raise Refused(Refusal.UNAUTHENTICATED, checked.why)

    def _remember(self, nonce: bytes, now: float) -> None:
        seen = self._seen
        if seen is None:
            seen = self._seen = OrderedDict()
        seen[nonce] = now
        while seen and (len(seen) > _REMEMBERED or next(iter(seen.values())) < now - 2 * FRESH):
            seen.popitem(last=False)

    async def job(self, within: float) -> Stacks:
        """The whole job's stacks: gathered here at the root (the lowest rank of the first node), else
        asked of it."""
        root = self.root
        if self.plan.rank == root:
            return await self.gather(time.monotonic() + within)
        message, nonce = self._ask_of(root, within)
        reply = await self.ask(root, message, within + 1.0)
        return self._read(reply, nonce, root, range(self.cluster.world_size))

    def _ask_of(self, rank: int, within: float) -> tuple[bytes, bytes]:
        """A sealed ask of ``rank``'s subtree, good for its server alone, and its nonce."""
        bound = self.cluster.bound_ports
        assert bound is not None
        nonce = fresh(16)
        ask = StacksAsk(self.cluster.launch.key, self.plan.rank, nonce, bound[rank], within, time.time(),
                        self.node_of(rank), rank)
        return encode_ask(ask, lambda h: self.authority.seal(Purpose.CALL, h)), nonce

    def _read(self, reply: bytes, nonce: bytes, rank: int, subtree: Sequence[int]) -> Stacks:
        """An answer of ``rank``'s, for its ``subtree``, to the ask of ``nonce``, checked; raises `WireError`
        (malformed, or more than its subtree) or `StacksRefused`."""
        header, seal = unwrap(reply)
        stacks, echoed, answered_by = decode_stacks(header, self.cluster.world_size)
        checked = self.authority.check(Purpose.ANSWER, header, seal)
        if not checked.believed:
            raise StacksRefused(checked.why)
        if echoed != nonce or answered_by != rank:
            raise StacksRefused("an answer to another ask")
        wrong = beyond(stacks, subtree)
        if wrong is not None:
            raise WireError(f"an answer of rank {rank}'s that is not its subtree's: {wrong}")
        return stacks

    def _below(self, source: Source) -> tuple[int, list[int]]:
        """The rank that reports for ``source``, and every rank of its subtree."""
        where = self.cluster.placement
        if source.kind is SourceKind.TASK:
            return source.number, [source.number]
        ranks = [rank for node in self.plan.tree.subtree(source.number) for rank in where.ranks_on(node)]
        return int(where.ranks_on(source.number)[0]), ranks

    async def gather(self, until: float) -> Stacks:
        """The stacks of this task and of every task below it, by ``until`` (monotonic)."""
        left = max(0.0, until - time.monotonic())
        child_until = until - max(_LEAST_KEPT, left * _KEEP)
        asks = [self._from(source, child_until) for source in sorted(self.plan.sources)]
        below = asyncio.gather(*asks)
        try:
            with within(max(0.0, until - time.monotonic())):
                own = Stacks.of_task(self.plan.rank, await self.take())
        except Exception:  # noqa: BLE001 (its own stacks unknown: it is silent)
            own = Stacks.silent_tasks([self.plan.rank])
        found = own
        for stacks in await below:
            found = found | stacks
        return found

    async def _from(self, source: Source, until: float) -> Stacks:
        rank, ranks = self._below(source)
        message, nonce = self._ask_of(rank, until - time.monotonic())
        try:
            left = max(0.01, until - time.monotonic())
            with within(left):  # whatever the network does with its timeout
                reply = await self.ask(rank, message, left)
            return self._read(reply, nonce, rank, ranks)
        except WireError as exc:  # a task that answers for more than its subtree is named, and silent
            log.warning("slurm_resolver: rank %d: stacks of rank %d refused: %s", self.plan.rank, rank, exc)
            return Stacks.silent_tasks(ranks)
        except Exception as exc:  # noqa: BLE001 (any failure below: the subtree is silent)
            log.debug("slurm_resolver: rank %d: stacks of rank %d: %s", self.plan.rank, rank, exc)
            return Stacks.silent_tasks(ranks)


STACKS = unary("Stacks", StacksHandler, StacksHandler.stacks, most_request=4096, most_answer=MAX_MESSAGE)
"""Every task's Python stacks below this one, merged: asked of the root by a task of the job or by the job's
user outside it."""
