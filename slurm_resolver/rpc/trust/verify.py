"""Asking servers who they are: the checks that verify the table.

Every server in the table is asked once, by a peer, who it is (``WhoAreYou``, sealed both
ways: launch, rank, node, job, index), which verifies the whole table:

- **In the tree** (``verify='once'``, the default), by the leader its task joins the first
  round at, as soon as its record arrives (`Inspection`): a node's leader asks its node's
  other tasks, and a leader asks a child leader that nobody else calls (the only task of a
  node without child nodes). Every other leader is called at its port in the round itself
  (by its node's tasks or its child leaders). The verdict goes up with the records, so the
  table comes down verified: no round is needed after it. These questions are asked before
  anyone knows the launch's key, so they are sealed as the first round's calls are (MUNGE,
  where MUNGE proves callers).
- **Otherwise** (under MPI, or ``verify='all'`` or a count), after the table, each task asks
  its peers (`check_peers()`), and a last round carries the verdict.
"""

from __future__ import annotations

import asyncio
import time

from ...cluster import Cluster
from ...values import Value, fill
from ..messages import NO_FAILURE, Failure, Identity, Records, Source, SourceKind, WireError
from ..transport import LinkError, Network, Refusal
from ..tree import Plan
from .identity import Question, Unproven, identify
from .seals import Authority

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)


class Expected(Value):
    """A server to ask, and who the table says it is."""

    __slots__ = ("host", "port", "identity")
    host: str
    port: int
    identity: Identity

    def __init__(self, host: str, port: int, identity: Identity) -> None:
        fill(self, host, port, identity)

    @property
    def address(self) -> str:
        """``host:port``."""
        return f"{self.host}:{self.port}"

    @classmethod
    def of(cls, settled: Cluster, rank: int) -> Expected:
        """The server of ``rank`` in the bootstrapped cluster ``settled``."""
        peer = settled.task(rank)
        return cls(peer.host, peer.port, Identity(settled.launch.key, rank, peer.node, peer.job, peer.index))


async def ask(network: Network, authority: Authority, asker: int, peer: Expected, deadline: float,
              early: bool = False) -> str:
    """Why the server at ``peer`` is not who the table says; ``''`` if it is. ``early``: asked in
    the first round (sealed as its calls are)."""
    question = Question(peer.identity.job_key, asker, b"", peer.port, early)
    try:
        said = await identify(network.connect(peer.host, peer.port), authority, question, deadline)
    except LinkError as exc:
        if exc.code in (Refusal.UNAUTHENTICATED, Refusal.FOREIGN):
            return f"the server at {peer.address}, expected to be {peer.identity.label}, belongs to another job " \
                   f"({exc.detail})"
        return f"task {peer.identity.label} does not answer at {peer.address} ({exc})"
    except WireError as exc:
        return f"the server at {peer.address} sent a malformed identity ({exc})"
    except Unproven as exc:
        return f"what answers at {peer.address}, expected to be {peer.identity.label}, is not a task of this job " \
               f"({exc})"
    if said != peer.identity:
        launch = "" if said.job_key == peer.identity.job_key else " of another launch"
        return f"rank {peer.identity.rank} at {peer.address} says it is {said.label}{launch}, but the table has " \
               f"{peer.identity.label}"
    return ""


class Inspection:
    """A leader's checks of the servers whose records reach it in the first round.

    Args:
        cluster: the resolved cluster (node names, jobs; ports come with the records).
        plan: this leader's place in the tree.
        network, authority: how it asks, and seals.
        deadline: when a check that has no answer yet fails (this leader reports then).
    """

    def __init__(self, cluster: Cluster, plan: Plan, network: Network, authority: Authority, deadline: float) -> None:
        self.cluster = cluster
        self.plan = plan
        self.network = network
        self.authority = authority
        self.deadline = deadline
        self._checks: list[asyncio.Task[str]] = []

    def needs(self, source: Source) -> bool:
        """Whether this leader must ask ``source``'s server: a task of its node, or the leader of a
        child node that nobody else calls (one task, no child nodes)."""
        if source.kind is SourceKind.TASK:
            return True
        position = source.number
        return self.cluster.placement.counts[position] == 1 and not self.plan.tree.children(position)

    def arrived(self, source: Source, rank: int, records: Records) -> None:
        """``source`` contributed ``records`` (sealed by ``rank``, its caller): ask its server, if needed."""
        if not self.needs(source):
            return
        self._checks.append(asyncio.ensure_future(self._check(source, rank, records)))

    async def _check(self, source: Source, rank: int, records: Records) -> str:
        position = self.plan.position if source.kind is SourceKind.TASK else source.number
        try:
            port = records.ports[records.ranks.index(rank)]
        except ValueError:
            return f"rank {rank} joined rank {self.plan.rank} without its own record"
        node = self.cluster.placement.nodes[position]
        job, index = self.cluster.packing.job_of(rank)
        peer = Expected(self.cluster.hosts[node], port, Identity(self.cluster.launch.key, rank, node, job, index))
        why = await ask(self.network, self.authority, self.plan.rank, peer, self.deadline, early=True)
        return f"rank {self.plan.rank} could not verify a peer: {why}" if why else ""

    def cancel(self) -> None:
        """Stop the checks still running (the bootstrap failed)."""
        for check in self._checks:
            check.cancel()

    async def verdict(self) -> Failure:
        """Every failed check (the first one's reason), once every check ended (each by the deadline)."""
        failure = NO_FAILURE
        for reason in await asyncio.gather(*self._checks):
            if reason:
                failure = failure.merge(Failure.of(reason))
        return failure


async def check_peers(network: Network, authority: Authority, settled: Cluster, rank: int, peers: list[int],
                      timeout: float) -> Failure:
    """Ask ``peers`` of the bootstrapped cluster ``settled`` who they are; the first mismatch, as a failure."""
    deadline = time.monotonic() + min(timeout, 30.0)
    reasons = await asyncio.gather(*(ask(network, authority, rank, Expected.of(settled, peer), deadline)
                                     for peer in peers))
    return next((Failure.of(f"rank {rank} could not verify a peer: {r}") for r in reasons if r), NO_FAILURE)
