"""The bootstrap's protocol for one task: rounds up and down the tree, and its errors.

A round: every task contributes (records, or a failure) to its node's leader; each leader
waits for its node's tasks and its child leaders, then contributes the merged lot to its
parent leader; the root (the first node's leader: rank 0, except in a het step whose first
component does not run on the first node) decides the result, which travels back down. Before
the first round nobody knows where a leader listens: leaders bind the first free port of
a list derived from the launch's key, and their tasks and children find it by probing
those ports (a server of another launch, or a task that leads nothing, refuses and is
skipped). Later rounds reuse the same connection.
"""

from __future__ import annotations

import asyncio
import random
import secrets
import time
from collections.abc import AsyncIterator, Sequence

from ..addresses import first
from ..cluster import Cluster
from ..errors import ResolutionError
from . import notices
from .coordinator import NOTICE, Coordinator
from .transport import REFUSED, UNAVAILABLE, Link, LinkError, Network
from .tree import Plan
from .wire import Failure, Header, Records, Table, WireError, decode_result, digest, encode_contribution, encode_result

__all__ = ["Member", "TABLE", "VERIFIED"]

TABLE = "table"
VERIFIED = "verified"
_HINT = ("check those tasks' output for an earlier error; every task must call bootstrap(); raise timeout if "
         "they start slowly")


class Member:
    """One task's side of the protocol.

    Args:
        cluster: the resolved cluster (every task resolved the same one).
        rank: this task.
        network: where servers listen and how to reach them.
        coordinator: this task's server state (already serving).
        plan: this task's place in the tree.
        candidates: the ports leaders bind in the first round.
    """

    def __init__(self, cluster: Cluster, rank: int, network: Network, coordinator: Coordinator, plan: Plan,
                 candidates: Sequence[int]) -> None:
        self.cluster = cluster
        self.rank = rank
        self.network = network
        self.coordinator = coordinator
        self.plan = plan
        self.candidates = list(candidates)
        self._link: Link | None = None
        self._link_port = 0
        self._rounds: dict[str, int] = {}
        self.up_position = plan.position if rank != plan.leader else plan.tree.parent(plan.position)
        """The node of the task above (this node's leader, or the parent node's); None for the root."""
        self.up_host = None if self.up_position is None else cluster.hosts[cluster.placement.nodes[self.up_position]]
        self.up_rank = self._up_rank()
        coordinator.forward = self._forward

    @property
    def is_root(self) -> bool:
        """Whether this task is the root of the tree: the first node's leader."""
        return self.up_position is None

    def _up_rank(self) -> int | None:
        """The rank of the task above, where the layout tells it."""
        if self.rank != self.plan.leader:
            return self.plan.leader
        if self.up_position is None or not self.cluster.placement.exact:
            return None
        return self.cluster.placement.ranks_on(self.up_position)[0]

    async def _forward(self, name: str, deadline: float) -> None:
        """A task below waits for notice ``name``: ask above for it (the result goes to every waiter here)."""
        await notices.hear(self, name, max(0.0, deadline - time.monotonic()))

    # Naming tasks in messages.

    def name(self, rank: int) -> str:
        """``job:index (rank r) on node`` (the node where the layout tells it)."""
        job, index = self.cluster.packing.job_of(rank)
        where = self.cluster.placement
        if not where.exact and rank not in self.cluster.launch.gtids:
            return f"{job}:{index} (rank {rank})"
        return f"{job}:{index} (rank {rank}) on {where.node_of(rank)}"

    def _covers(self, source: int) -> Failure:
        """The ranks a silent source stands for: itself, or a child leader's whole subtree."""
        if source >= 0:
            return Failure.missing_ranks([source])
        where = self.cluster.placement
        positions = self.plan.tree.subtree(-1 - source)
        if where.exact:
            return Failure.missing_ranks([r for p in positions for r in where.ranks_on(p)])
        nodes = [where.nodes[p] for p in positions]
        return Failure(missing_count=sum(where.counts[p] for p in positions),
                       reason=f"no task of node {first(nodes)} joined (their leader never reported)")

    def error(self, failure: Failure, what: str, timeout: float) -> ResolutionError:
        """The error every task raises for a failed round."""
        n = self.cluster.world_size
        if failure.missing_count:
            names = [self.name(r) for r in failure.missing]
            more = failure.missing_count - len(names)
            shown = ", ".join(names) + (f" and {more} more" if more > 0 and names else "")
            reason = (f"; {failure.reason}" if names else failure.reason) if failure.reason else ""
            return ResolutionError(f"bootstrap: {failure.missing_count} of {n} tasks did not {what} within "
                                   f"{timeout:g} s: {shown}{reason}", _HINT)
        others = f" ({failure.failed_count - 1} more tasks reported a failure)" if failure.failed_count > 1 else ""
        return ResolutionError(f"bootstrap: {failure.reason}{others}", "check the named task's output and network")

    # Rounds.

    async def round(self, name: str, records: Records, failure: Failure, timeout: float) -> tuple[str, Table]:
        """Run round ``name``; returns the token and the table (the root decides both), or raises."""
        token, result, table = await self._round(name, records, failure, timeout)
        if result:
            raise self.error(result, "join the bootstrap" if name == TABLE else f"reach {name.split('#')[0]!r}",
                             timeout)
        return token, table

    async def _round(self, name: str, records: Records, failure: Failure, timeout: float
                     ) -> tuple[str, Failure, Table]:
        """Run round ``name``; the token, the failures merged from every task, and the table."""
        start = time.monotonic()
        plan = self.plan
        if self.rank != plan.leader:
            chunks = await self.up(name, records, failure, start + timeout, timeout)
        else:
            report = start + timeout * plan.tree.report_at(plan.position)
            merged, below = await self.coordinator.gather(name, report, self._covers)
            merged.extend(records)
            failure = failure.merge(below)
            if self.up_position is None:
                chunks = self._decide(name, merged, failure)
            else:
                try:
                    chunks = await self.up(name, merged, failure, start + timeout * plan.tree.give_up_at(plan.position),
                                      timeout)
                except ResolutionError as exc:
                    chunks = encode_result("", Failure.of(exc.message))  # tell the tasks below
            self.coordinator.rounds.publish(name, chunks)
            # The tasks below have the result before this one goes on (and may stop its server).
            await self.coordinator.rounds.delivered(name, time.monotonic() + min(5.0, timeout))
        try:
            return decode_result(tuple(chunks), self.cluster.world_size)
        except WireError as exc:
            raise ResolutionError(f"bootstrap: rank {self.up_rank} sent a malformed result ({exc})",
                                  "every task must run the same slurm_resolver version") from None

    async def barrier(self, name: str, timeout: float, failure: Failure | None = None) -> None:
        """Return once every task reached barrier ``name`` (the n-th call of a name meets the n-th)."""
        count = self._rounds.get(name, 0)
        self._rounds[name] = count + 1
        await self.round(f"{name}#{count}", Records(), failure or Failure(), timeout)

    async def vote(self, name: str, yes: bool, timeout: float) -> bool:
        """Whether any task votes yes (a barrier whose result counts the yes votes)."""
        count = self._rounds.get(name, 0)
        self._rounds[name] = count + 1
        voted = Failure(reason="yes", failed_count=1) if yes else Failure()
        _, result, _ = await self._round(f"vote:{name}#{count}", Records(), voted, timeout)
        if result.missing_count or (result.reason and result.reason != "yes"):
            raise self.error(result, f"vote in {name!r}", timeout)
        return result.failed_count > 0

    async def wait_for(self, name: str, timeout: float) -> None:
        """Return once some task announces ``name``; the notice comes down the tree."""
        await notices.wait_for(self, name, timeout)

    async def announce(self, name: str, timeout: float) -> None:
        """Tell every task waiting for ``name`` (the root is told, and the notice goes down the tree)."""
        await notices.announce(self, name, timeout)

    def _decide(self, name: str, merged: Records, failure: Failure) -> list[bytes]:
        """The root: the result of a round, from every contribution."""
        if failure or name != TABLE:
            return encode_result("", failure)
        n = self.cluster.world_size
        ports, spares = [0] * n, [0] * n
        for rank, port, spare in zip(merged.ranks, merged.ports, merged.spares):
            ports[rank], spares[rank] = port, spare
        if len(merged.ranks) != n or 0 in ports:
            missing = [r for r in range(n) if not ports[r]]
            return encode_result("", Failure.missing_ranks(missing).merge(
                Failure.of(f"{len(merged.ranks)} records for {n} tasks")))
        nodes = [0] * n if merged.nodes else []
        for rank, node in zip(merged.ranks, merged.nodes):
            nodes[rank] = node
        return encode_result(secrets.token_urlsafe(24), Failure(), ports, spares, merged.gpus, nodes)

    def contribution(self, name: str, records: Records, failure: Failure, port: int) -> list[bytes]:
        """This task's contribution to round ``name``, with a credential minted for this one call
        to the server on ``port``."""
        header = Header(self.coordinator.job_key, name, self.rank, self.plan.position)
        authority = self.coordinator.authority
        if authority is not None and authority.enabled:
            credential = authority.mint(header, port, digest(records, failure))
            header = Header(header.job_key, name, self.rank, self.plan.position, credential)
        return encode_contribution(header, records, failure)

    async def up(self, name: str, records: Records, failure: Failure, deadline: float, timeout: float) -> list[bytes]:
        """Contribute to the round at the task above; returns the result chunks."""
        if self._link is not None:
            try:
                return await self._link.join(self.contribution(name, records, failure, self._link_port),
                                             deadline - time.monotonic())
            except LinkError as exc:
                raise self._up_error(exc, timeout, name) from None
        pause = 0.02
        last: LinkError | None = None
        while True:
            for port in self._ports():
                if time.monotonic() >= deadline:
                    break
                if not await self.network.listening(self.up_host or "", port):
                    continue
                link = self.network.connect(self.up_host or "", port)
                try:  # a fresh credential for every server asked: MUNGE reads one only once
                    result = await link.join(self.contribution(name, records, failure, port),
                                             deadline - time.monotonic())
                except LinkError as exc:
                    last = exc
                    if exc.kind in (REFUSED, UNAVAILABLE) and exc.code in ("", "foreign", "not_leader"):
                        continue  # another launch's server, or a task that leads nothing
                    raise self._up_error(exc, timeout, name) from None
                self._link, self._link_port = link, port
                return result
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._up_error(last or LinkError(UNAVAILABLE, "nothing answered"), timeout, name)
            await asyncio.sleep(min(left, pause * random.uniform(0.5, 1.5)))  # jitter: no herd on a late leader
            pause = min(pause * 2, 0.25)

    def _ports(self) -> Sequence[int]:
        """Where the task above listens: its bound port once known, else the candidates."""
        bound = self.cluster.bound_ports
        if bound is not None and self.up_rank is not None:
            return [bound[self.up_rank]]
        return self.candidates

    def _up_error(self, exc: LinkError, timeout: float, name: str) -> ResolutionError:
        assert self.up_position is not None
        if exc.code == "deadline" and name.startswith(NOTICE):
            return ResolutionError(f"bootstrap: nobody announced {name[len(NOTICE):]!r} within {timeout:g} s",
                                   "the announcing task (often the chief) may have failed: check its output")
        if exc.code == "deadline":  # the task above answered: the round did not end in time
            what = "the bootstrap" if name == TABLE else repr(name.split("#")[0])
            return ResolutionError(f"bootstrap: not every task reached {what} within {timeout:g} s: {exc.detail}",
                                   _HINT)
        ports = first(list(self._ports()), 4)
        above = (f"rank {self.up_rank} ({self.name(self.up_rank).split(' (')[0]} on {self.up_host_node})"
                 if self.up_rank is not None else f"the leader of {self.up_host_node} (its lowest rank)")
        if exc.code == "unauthenticated":
            return ResolutionError(
                f"bootstrap: {above} refused rank {self.rank}'s credential on {self.up_host}: {exc.detail}",
                "every node must run munged with the same munge.key and a synchronised clock (try: munge -n | "
                "ssh <that node> unmunge); or SLURM_RESOLVER_AUTH=none on every task where MUNGE is absent")
        return ResolutionError(
            f"bootstrap: {above} did not answer on {self.up_host} (ports {ports}) within {timeout:g} s: {exc.detail}",
            "check that task's output for an error; make sure every task calls bootstrap(); raise timeout")

    @property
    def up_host_node(self) -> str:
        """The name of the node of the task above."""
        assert self.up_position is not None
        return self.cluster.placement.nodes[self.up_position]

    @property
    def up_port(self) -> int:
        """The bound port of the task above (after the bootstrap)."""
        bound = self.cluster.bound_ports
        assert bound is not None and self.up_rank is not None
        return self._link_port if self._link is not None else bound[self.up_rank]

    def watch_up(self, beats: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """This task's heartbeat call to the task above (on the rounds' connection where there is one)."""
        link = self._link
        if link is None:
            assert self.up_host is not None
            link = self.network.connect(self.up_host, self.up_port)
        return link.watch(beats)

    def use(self, cluster: Cluster) -> None:
        """Continue with the bootstrapped cluster (bound ports known: later rounds need no search;
        a learned layout tells the rank above)."""
        self.cluster = cluster
        self.up_rank = self._up_rank()
