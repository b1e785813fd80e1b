"""One task's side of the protocol: rounds up and down the tree, barriers, votes, notices, their errors.

A round: every task contributes (records, a failure, a vote) to its node's leader; each leader
waits for its node's tasks and its child leaders, then contributes the merged lot to its
parent leader; the root (the first node's leader: rank 0, except in a het step whose first
component does not run on the first node) decides the outcome, which travels back down. A
notice is a round the root decides when some task announces it: a task that waits holds one
call to its node's leader, and a leader asks above once for all its waiters.
"""

from __future__ import annotations

import time

from ...addresses import abridged
from ...cluster import Cluster
from ...errors import ResolutionError, UnansweredError
from ...speakers import Speaker, for_a_failed_call, for_a_round
from ..messages import NO_FAILURE, Contribution, Failure, Records, Round, RoundKind, Source, SourceKind, Table
from ..transport import Link
from ..tree import Plan
from ..trust.verify import Inspection
from .codec import Decision, decision
from .coordinator import Coordinator
from .uplink import HINT, Unjoined, Uplink

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)


class Member:
    """One task's rounds.

    Args:
        cluster: the resolved cluster (every task resolved the same one).
        plan: this task's place in the tree.
        uplink: its calls to the task above.
        coordinator: its server's state (already serving).
        inspection: a leader's checks of the servers whose records reach it in the first round
            (their verdict goes up with the records).
    """

    def __init__(self, cluster: Cluster, plan: Plan, uplink: Uplink, coordinator: Coordinator,
                 inspection: Inspection | None = None) -> None:
        self.cluster = cluster
        self.plan = plan
        self.uplink = uplink
        self.coordinator = coordinator
        self.inspection = inspection
        self._counts: dict[tuple[RoundKind, str], int] = {}

    @property
    def rank(self) -> int:
        """This task."""
        return self.plan.rank

    @property
    def is_root(self) -> bool:
        """Whether this task is the root of the tree: the first node's leader."""
        return self.uplink.position is None

    def settled(self, cluster: Cluster) -> Member:
        """This task's rounds in the bootstrapped cluster (bound ports known; a learned layout)."""
        settled = Member(cluster, self.plan, self.uplink.settled(cluster), self.coordinator, self.inspection)
        settled._counts = self._counts
        return settled

    @property
    def above(self) -> tuple[int | None, Link | None]:
        """The task above (its rank where known; None at the root) and the link to it, where made."""
        return self.uplink.rank, self.uplink.link

    async def close(self) -> None:
        """Close this task's links (it stops)."""
        await self.uplink.network.close()

    # Rounds.

    async def round(self, round: Round, brought: Contribution, timeout: float) -> tuple[Decision, Table]:
        """Run ``round``; its outcome and table (the root decides both), or a ResolutionError."""
        start = time.monotonic()
        try:
            outcome, table, speaker = await self._round(round, brought, timeout)
        except ResolutionError as exc:  # a task below a leader, whose call to it failed
            exc.speaker = self._speaker(start + timeout, exc.speaker)
            raise
        if outcome.failure:
            error = self.error(outcome.failure, f"{round.kind.policy.verb} {round.label}", timeout)
            error.speaker = speaker  # said once, where it was found
            raise error
        return outcome, table

    def _speaker(self, gave_up: float, heard: Speaker) -> Speaker:
        """Who says this task's failure to join a round (`for_a_failed_call`), where its error says
        ``heard``: what it needs to know is whether the root never answered it."""
        where = self.cluster.placement
        never = self.uplink.position == 0 and self.uplink.link is None and time.monotonic() >= gave_up
        first = [where.ranks_on(p) for p in range(min(2, len(where.nodes)))] if never and where.exact else []
        return for_a_failed_call(self.rank, heard, first)

    async def _round(self, round: Round, brought: Contribution, timeout: float) -> tuple[Decision, Table, Speaker]:
        """The outcome and table of ``round``, and who says a failure (ABOVE: this task heard it from above)."""
        start = time.monotonic()
        plan = self.plan
        if self.rank != plan.leader:
            return (*await self.uplink.join(round, brought, start + timeout, timeout), for_a_round(False))
        report = start + timeout * plan.tree.report_at(plan.position)
        merged = await self.coordinator.gather(round, brought, report, self._covers)
        if round.kind.policy.first and self.inspection is not None:  # its checks end by the same deadline
            merged = Contribution(merged.records, merged.failure.merge(await self.inspection.verdict()),
                                  merged.votes)
        table = Table()
        speaker = for_a_round(self.is_root)
        if self.is_root:
            outcome, table = self._decide(round, merged)
        else:
            give_up = start + timeout * plan.tree.give_up_at(plan.position)
            try:
                outcome, table = await self.uplink.join(round, merged, give_up, timeout)
            except Unjoined as exc:  # tell the tasks below (their error says "bootstrap: " once)
                outcome = Decision(exc.failure)
                speaker = self._speaker(give_up, exc.speaker)
        self.coordinator.publish(round, outcome)
        if outcome.failure or not round.kind.policy.carries_table:
            # The tasks below have the outcome before this one goes on (and may stop its server).
            await self.coordinator.delivered(round, time.monotonic() + min(5.0, timeout))
        # A table: this task goes on at once (its server keeps serving), to watch the tasks below as
        # they start their failure detection.
        return outcome, table, speaker

    def _decide(self, round: Round, merged: Contribution) -> tuple[Decision, Table]:
        """The root: the outcome of a round, from every contribution."""
        if merged.failure or not round.kind.policy.carries_table:
            return decision(merged.failure, votes=merged.votes), Table()
        n = self.cluster.world_size
        records = merged.records
        ports, spares = [0] * n, [0] * n
        for rank, port, spare in zip(records.ranks, records.ports, records.spares):
            ports[rank], spares[rank] = port, spare
        if len(records.ranks) != n or 0 in ports:
            missing = [r for r in range(n) if not ports[r]]
            return decision(Failure.missing_ranks(missing).merge(Failure.of(f"{len(records.ranks)} records for {n} "
                                                                          "tasks"))), Table()
        nodes = [0] * n if records.nodes else []
        for rank, node in zip(records.ranks, records.nodes):
            nodes[rank] = node
        table = Table(tuple(ports), tuple(spares), dict(records.gpus), tuple(nodes))
        return decision(NO_FAILURE, table, self.coordinator.table_key()), table

    def _next(self, kind: RoundKind, name: str) -> int:
        count = self._counts.get((kind, name), 0)
        self._counts[(kind, name)] = count + 1
        return count

    async def barrier(self, name: str, timeout: float, failure: Failure | None = None) -> None:
        """Return once every task reached barrier ``name`` (the n-th call of a name meets the n-th)."""
        await self.round(Round.barrier(name, self._next(RoundKind.BARRIER, name)),
                         Contribution(Records(), failure or NO_FAILURE), timeout)

    async def vote(self, name: str, yes: bool, timeout: float) -> bool:
        """Whether any task votes yes in the n-th vote called ``name``."""
        outcome, _ = await self.round(Round.vote(name, self._next(RoundKind.VOTE, name)),
                                      Contribution(votes=int(yes)), timeout)
        return outcome.votes > 0

    # Notices.

    async def wait_for(self, name: str, timeout: float) -> None:
        """Return once some task announces ``name``; the notice comes down the tree."""
        notice = Round.notice(name)
        deadline = time.monotonic() + timeout
        if self.rank == self.plan.leader:  # this node's waiters share one question above
            share = self.plan.tree.report_at(self.plan.position) if self.is_root else 1.0
            self.coordinator.want(notice, deadline)
            outcome = await self.coordinator.result(notice, time.monotonic() + timeout * share) or \
                Decision(Failure.of(f"nobody announced {name!r} within {timeout:g} s"))
            if self.is_root and outcome.failure:
                self.coordinator.publish(notice, outcome)  # the root gives up first, and says why
        else:
            outcome, _ = await self.uplink.join(notice, Contribution(), deadline, timeout)
        if outcome.failure:
            raise self.error(outcome.failure, f"{notice.kind.policy.verb} {notice.label}", timeout)

    async def announce(self, name: str, timeout: float) -> None:
        """Tell every task waiting for ``name`` (the root is told, and the notice goes down the tree)."""
        notice = Round.notice(name)
        if not self.is_root and not self.coordinator.decided(notice):
            await self.uplink.tell_root(Round.announce(name), timeout)
        self.coordinator.publish(notice, decision(NO_FAILURE))  # this task's own waiters (the root's: every task's)

    # Errors.

    def _covers(self, source: Source) -> Failure:
        """The ranks a silent source stands for: itself, or a child leader's whole subtree."""
        if source.kind is SourceKind.TASK:
            return Failure.missing_ranks([source.number])
        where = self.cluster.placement
        positions = self.plan.tree.subtree(source.number)
        if where.exact:
            return Failure.missing_ranks([r for p in positions for r in where.ranks_on(p)])
        nodes = [where.nodes[p] for p in positions]
        return Failure(missing_count=sum(where.counts[p] for p in positions),
                       reason=f"no task of node {abridged(nodes)} joined (their leader never reported)")

    def error(self, failure: Failure, what: str, timeout: float) -> ResolutionError:
        """The error every task raises for a failed round."""
        n = self.cluster.world_size
        if failure.missing_count:
            names = [self.cluster.label(r) for r in failure.missing]
            more = failure.missing_count - len(names)
            shown = ", ".join(names) + (f" and {more} more" if more > 0 and names else "")
            reason = (f"; {failure.reason}" if names else failure.reason) if failure.reason else ""
            where = self.cluster.placement
            return UnansweredError(f"bootstrap: {failure.missing_count} of {n} tasks did not {what} within "
                                   f"{timeout:g} s: {shown}{reason}", HINT,
                                   missing={r: where.node_of(r) if where.exact else "" for r in failure.missing})
        others = f" ({failure.failed_count - 1} more tasks reported a failure)" if failure.failed_count > 1 else ""
        return ResolutionError(f"bootstrap: {failure.reason}{others}", "check the named task's output and network")

