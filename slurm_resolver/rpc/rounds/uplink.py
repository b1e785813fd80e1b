"""One task's calls up the tree: to its node's leader, or, for a leader, to its parent's leader.

Before the first round nobody knows where a leader listens: leaders bind the first free port
of a list derived from the launch's key, and the tasks below find it by probing those ports.
A server of another launch, or a task that leads nothing, refuses and is skipped; a server
that answers without a seal of this job (a squatter on a candidate port) is named and
skipped too, and its answer is never believed. Once found, the same link serves every later
call, and a call that finds its peer not ready is asked again until its deadline.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine, Sequence
from typing import Any

from ...addresses import abridged
from ...cluster import Cluster
from ...errors import ResolutionError
from ...faults import Cause
from ...speakers import Speaker
from ..messages import Contribution, Failure, Round, Table, WireError
from ..primitives import fresh, uniform
from ..transport import CallFailure, Hedged, Link, LinkError, Network, Refusal, hedged, retrying, within
from ..tree import Plan
from ..trust.identity import Question, Unproven, identify
from ..trust.seals import AuthMode, Authority, Purpose
from ..wire import NONCE, unwrap
from .codec import Call, Decision, decode_answer, encode_call, read_table
from .coordinator import JOIN

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)

log = logging.getLogger("slurm_resolver")

UNPROVEN_WAIT = 3.0
"""Seconds, at least, a call of the first round to a server that has not proven itself is waited on
alone before the server is asked who it is (a quarter of the round's timeout where that is longer: a
real leader answers the call once its whole subtree joined, 4-7 s at 4,096 tasks and 25-40 s at 16,384
on this project's 2-core machine, and each question is one more call); the time it then has to say who
it is; and the least time between two searches of the other candidates beside a call."""


def unproven_wait(timeout: float) -> float:
    """How long a first-round call to an unproven server is waited on alone, and the least time between
    two searches of the other candidates while it is open, in a round of ``timeout`` seconds.

    >>> unproven_wait(10), unproven_wait(60)
    (3.0, 15.0)
    """
    return max(UNPROVEN_WAIT, timeout / 4)

HINT = ("check those tasks' output for an earlier error; every task must call bootstrap(); raise timeout if "
        "they start slowly")


class Unjoined(ResolutionError):
    """This task could not join a round up the tree: the round's `Failure` (its words and its cause), as the
    tasks below are told it; the message says it as the bootstrap's."""

    def __init__(self, failure: Failure, hint: str, *, speaker: Speaker = Speaker.TASK) -> None:
        super().__init__(f"bootstrap: {failure.reason}", hint, speaker=speaker)
        self.failure = failure


class _Impostor(Exception):
    """A server at a candidate port answered without this job's seal."""


class _Findings:
    """What the search for the task above learned of the servers that did not answer it."""

    __slots__ = ("strangers", "said")

    def __init__(self) -> None:
        self.strangers: dict[int, str] = {}
        """Ports whose server answered without this job's seal (said once; not called again)."""
        self.said: list[tuple[int, LinkError]] = []
        """Refusals from servers that proved nothing (said only if no leader answered by the deadline)."""


class Uplink:
    """The calls of one task to the task above it.

    Args:
        cluster: the resolved cluster (every task resolved the same one).
        plan: this task's place in the tree.
        network: where servers listen and how to reach them.
        authority: seals this task's calls and checks the answers.
        candidates: the ports leaders bind in the first round.
        link, port: the link to the task above and its port, where found already.
    """

    def __init__(self, cluster: Cluster, plan: Plan, network: Network, authority: Authority,
                 candidates: Sequence[int], link: Link | None = None, port: int = 0) -> None:
        self.cluster = cluster
        self.plan = plan
        self.network = network
        self.authority = authority
        self.candidates = list(candidates)
        self.position = plan.position if plan.rank != plan.leader else plan.tree.parent(plan.position)
        """The node of the task above (this node's leader, or the parent node's); None for the root."""
        self.host = None if self.position is None else cluster.hosts[cluster.placement.nodes[self.position]]
        self.rank = self._above()
        """The rank of the task above, where known."""
        self.link = link
        self.port = port
        """The port of the task above, once found."""
        if link is None and self.rank is not None and cluster.bound_ports is not None:
            self.port = cluster.bound_ports[self.rank]  # bootstrapped: no search

    def _above(self) -> int | None:
        if self.plan.rank != self.plan.leader:
            return self.plan.leader
        if self.position is None or not self.cluster.placement.exact:
            return None
        return self.cluster.placement.ranks_on(self.position)[0]

    @property
    def node(self) -> str:
        """The name of the node of the task above."""
        assert self.position is not None
        return self.cluster.placement.nodes[self.position]

    def settled(self, cluster: Cluster) -> Uplink:
        """The same calls in the bootstrapped cluster: the ports every task bound are known (later
        calls need no search), and a learned layout tells the rank above; the link found stays."""
        return Uplink(cluster, self.plan, self.network, self.authority, self.candidates, self.link, self.port)

    # Calls.

    async def join(self, round: Round, brought: Contribution, deadline: float, timeout: float
                   ) -> tuple[Decision, Table]:
        """Contribute to ``round`` at the task above; its outcome and table (empty but for the table)."""
        if self.link is not None:
            link, port = self.link, self.port
            try:
                return await retrying(lambda left: self._call(link, port, round, brought, left, expected=self.rank),
                                      deadline)
            except LinkError as exc:
                raise self._error(exc, timeout, round) from None
            except _Impostor as exc:
                raise Unjoined(Failure.of(str(exc)), "another process may hold that task's port") from None
        return await self._find(round, brought, deadline, timeout)

    async def _find(self, round: Round, brought: Contribution, deadline: float, timeout: float
                    ) -> tuple[Decision, Table]:
        """The first round: the first candidate port is called at once, in this task (the leader almost
        always listens there); where nothing answers it at once, every candidate is searched.

        Nothing that answers here has proven itself before its answer comes with this job's seal: a
        refusal (``invalid``, ``deadline``, ``unauthenticated``) from it counts for nothing but "not
        here" (a squatter may refuse too), and is said only if no leader answered by the deadline. A
        call still unanswered after `unproven_wait()` is never given up (a leader answers once its
        whole subtree joined, and a starved process answers late): its server is asked who it is
        (`hedged`), which a leader answers at once, sealed; one that proves to be the task above is
        waited on alone, and only where it does not (a silent squatter, another job's server, or one
        too slow even to say who it is) are the other candidates searched beside the call, gently;
        the first sealed answer of either wins. A round shorter than `unproven_wait()` costs none of it."""
        found = _Findings()
        port = self._ports()[0]
        link = self.network.connect(self.host or "", port)
        try:
            with hedged(unproven_wait(timeout), lambda: self._doubt(link, port, timeout, deadline),
                        lambda: self._search(round, brought, deadline, timeout, found, beside=port)):
                answer = await self._probe(link, port, round, brought, deadline)
        except Hedged as won:
            return won.answer  # type: ignore[no-any-return]
        except (_Impostor, LinkError) as exc:
            await self._heard(port, True, exc, found)
            return await self._search(round, brought, deadline, timeout, found)
        self.link, self.port = link, port
        return answer

    async def _doubt(self, link: Link, port: int, timeout: float, deadline: float) -> str:
        """Why the server on ``port``, silent so far, is not proven to be the task above (``''``: it is):
        it is asked who it is (on the same connection), which the task above answers at once, sealed;
        it has `unproven_wait()` to say so, however starved its process."""
        question = Question(self.cluster.launch.key, self.plan.rank, b"", port, early=True)
        wait = unproven_wait(timeout)
        try:
            with within(wait):
                said = await identify(link, self.authority, question, deadline)
        except asyncio.TimeoutError:
            return f"it did not say who it is within {wait:g} s"
        except LinkError as exc:
            return f"it did not say who it is ({exc.detail})"
        except (WireError, Unproven) as exc:
            return f"an answer without this job's seal ({exc})"
        if said.job_key != self.cluster.launch.key:
            return "a task of another launch"
        if said.rank != self.rank if self.rank is not None else said.node != self.node:
            return f"{said.label}, not the leader of {self.node}"
        return ""

    async def _search(self, round: Round, brought: Contribution, deadline: float, timeout: float,
                      found: _Findings, beside: int | None = None) -> tuple[Decision, Table]:
        """Every candidate port (but ``beside``, whose call is open elsewhere) probed with a bare connect
        (the kernel answers it, however starved the server's process), and called where something
        listens, each call kept open until it answers or fails, until one brings an answer with this
        job's seal (its link is then the task above's). Passes come quickly while nothing holds a
        call of this task (a leader still starting), and `unproven_wait()` apart, then twice that and
        so on, while one does: every task of a large job probing every port each second while a long
        round held its call was a storm that slowed the round further, and failed it."""
        host = self.host or ""
        calls: dict[asyncio.Future[tuple[Decision, Table]], tuple[int, Link]] = {}
        pause = 0.02
        try:
            while True:
                for port in self._ports():
                    if time.monotonic() >= deadline:
                        break
                    if port == beside or port in found.strangers or any(p == port for p, _ in calls.values()):
                        continue
                    if not await self.network.listening(host, port):
                        continue
                    link = self.network.connect(host, port)
                    calls[asyncio.ensure_future(self._probe(link, port, round, brought, deadline))] = (port, link)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise self._not_found(found, timeout, round)
                held = beside is not None or bool(calls)
                pause = max(pause, unproven_wait(timeout)) if held else pause
                answer = await self._answered(calls, time.monotonic() + min(left, pause * uniform(0.5, 1.5)),
                                              found)  # jitter: no herd on a late leader
                if answer is not None:
                    return answer
                pause = min(pause * 2, 0.25) if not held else pause * 2
        finally:
            for open_call in calls:
                open_call.cancel()

    def _probe(self, link: Link, port: int, round: Round, brought: Contribution, deadline: float
               ) -> Coroutine[Any, Any, tuple[Decision, Table]]:
        """The call of the first round to ``port``, where the task above may be (its answer is checked)."""
        return self._call(link, port, round, brought, deadline - time.monotonic(), probe=True, expected=self.rank)

    async def _answered(self, calls: dict[asyncio.Future[tuple[Decision, Table]], tuple[int, Link]],
                        until: float, found: _Findings) -> tuple[Decision, Table] | None:
        """The answer of the first of ``calls`` that brings one with this job's seal before ``until``
        (then its link is the task above's); None if none did. The calls that ended otherwise are taken
        out, and what they tell kept (`_heard`)."""
        if not calls:
            await asyncio.sleep(max(0.0, until - time.monotonic()))
            return None
        while calls:
            done, _ = await asyncio.wait(calls, timeout=max(0.0, until - time.monotonic()),
                                         return_when=asyncio.FIRST_COMPLETED)
            if not done:
                return None
            for finished in done:
                port, link = calls.pop(finished)
                try:
                    answer = finished.result()
                except (_Impostor, LinkError) as exc:
                    await self._heard(port, False, exc, found)
                    continue
                self.link, self.port = link, port
                return answer
        return None

    async def _heard(self, port: int, direct: bool, exc: _Impostor | LinkError, found: _Findings) -> None:
        """What a call to ``port`` that brought no answer tells: who is a stranger (said once), what was
        refused (not believed from a server that proved nothing, but said if nothing better comes). The
        first port called at once (``direct``) with nobody up there yet is probed from now on, and called
        on a channel with no backoff."""
        if direct and isinstance(exc, LinkError) and exc.kind is CallFailure.UNAVAILABLE:
            await self.network.discard(self.host or "", port)
        elif isinstance(exc, _Impostor):
            if port not in found.strangers:
                log.warning("slurm_resolver: rank %d skipped port %d on %s: what answers there is not a "
                            "task of this job (%s)", self.plan.rank, port, self.host, exc)
            found.strangers[port] = f"port {port}: {exc}"
        elif not exc.again:
            found.said.append((port, exc))

    def _not_found(self, found: _Findings, timeout: float, round: Round) -> Unjoined:
        """Why no leader answered by the deadline: what refused (a leader's list of who is missing
        first), or what answered without a seal, or nothing."""
        order = (Refusal.DEADLINE, Refusal.UNAUTHENTICATED, Refusal.INVALID, Refusal.NOT_LEADER, Refusal.FOREIGN)
        said, strangers = found.said, found.strangers
        said.sort(key=lambda refused: order.index(refused[1].code) if refused[1].code in order else len(order))
        telling = [(port, exc) for port, exc in said if exc.code not in (Refusal.FOREIGN, Refusal.NOT_LEADER)]
        if strangers and not telling:
            return Unjoined(Failure.of(
                f"the leader of {self.node} was not found on {self.host} within {timeout:g} s; "
                f"what answered there is not a task of this job ({'; '.join(list(strangers.values())[:3])})"),
                "another user's process may hold the launch's rendezvous ports: set "
                "SLURM_RESOLVER_RENDEZVOUS_PORTS (or rendezvous=) to other ports, or use a secret "
                "(SLURM_RESOLVER_SECRET) or MUNGE so that its answers are refused at once")
        if not said:
            return self._error(LinkError(CallFailure.UNAVAILABLE, "nothing answered"), timeout, round)
        port, exc = said[0]
        return self._error(LinkError(exc.kind, f"{exc.detail} (said on port {port}, by a server not proven to be "
                                               "the leader)", exc.code), timeout, round)

    def _ports(self) -> Sequence[int]:
        """Where the task above listens: its bound port once known, else the candidates."""
        return [self.port] if self.port else self.candidates

    async def _call(self, link: Link, port: int, round: Round, brought: Contribution, timeout: float,
                    probe: bool = False, expected: int | None = None) -> tuple[Decision, Table]:
        """One call to ``round`` at the server on ``port``: the answer, proven to come from a task of
        this job (from rank ``expected``, where known)."""
        first_round = round.kind.policy.first
        nonce = fresh(NONCE)
        call = Call(self.cluster.launch.key, round, self.plan.rank, self.plan.position, nonce, port,
                    brought.failure, votes=brought.votes)
        messages = encode_call(call, brought.records,
                               lambda header: self.authority.seal(Purpose.CALL, header, first_round))
        reply = await link.join(JOIN, messages, timeout, probe=probe)
        world = self.cluster.world_size
        try:
            header, seal = unwrap(reply[0] if reply else b"")
            answer = decode_answer(header, world)
            checked = self.authority.check(Purpose.ANSWER, header, seal, first_round)
            why = "" if checked.believed else checked.why
            if not why and answer.nonce != nonce:
                why = "an answer to another call"
            if not why and expected is not None and answer.source != expected:
                why = f"an answer from rank {answer.source}, not from rank {expected}"
            if why:
                raise _Impostor(f"an answer without this job's seal ({why})")
            if first_round and self.authority.mode is AuthMode.NONE:
                self.authority.learn(answer.key)
            table = read_table(answer, reply[1:], world) if answer.total else Table()
        except WireError as exc:
            raise _Impostor(f"a malformed answer ({exc})") from None
        return answer.decision(reply[1:]), table

    async def tell_root(self, announcement: Round, timeout: float) -> None:
        """Tell the root of the tree ``announcement`` (after the bootstrap: its port is known)."""
        bound = self.cluster.bound_ports
        assert bound is not None, "an announcement needs the bootstrapped cluster"
        where = self.cluster.placement
        root = where.ranks_on(0)[0]
        link = self.network.connect(self.cluster.hosts[where.nodes[0]], bound[root])
        try:
            await retrying(lambda left: self._call(link, bound[root], announcement, Contribution(), left,
                                                   expected=root), time.monotonic() + timeout)
        except (LinkError, _Impostor) as exc:
            raise ResolutionError(f"could not announce {announcement.name!r} to {self.cluster.label(root)}, the "
                                  f"root of the tree: {getattr(exc, 'detail', exc)}",
                                  "check that task's output; it may have ended") from None

    async def notice(self, notice: Round, deadline: float) -> Decision:
        """For the tasks below that wait for ``notice``: ask above, within this leader's share of the
        time (a failure found above reaches it first), and pass on the answer or why there is none."""
        timeout = deadline - time.monotonic()
        give_up = time.monotonic() + timeout * self.plan.tree.give_up_at(self.plan.position)
        try:
            outcome, _ = await self.join(notice, Contribution(), give_up, timeout)
        except Unjoined as exc:
            return Decision(exc.failure)  # tell the tasks below why
        return outcome

    def _error(self, exc: LinkError, timeout: float, round: Round) -> Unjoined:
        if exc.kind is CallFailure.DEADLINE and round.kind.policy.asks_above:
            return Unjoined(Failure.of(f"nobody announced {round.name!r} within {timeout:g} s", Cause.SILENT),
                            "the announcing task (often the chief) may have failed: check its output")
        if exc.kind is CallFailure.DEADLINE:  # the task above answered: the round did not end in time, it says why
            return Unjoined(Failure.of(f"not every task reached {round.label} within {timeout:g} s: {exc.detail}",
                                       Cause.SILENT), HINT, speaker=Speaker.ABOVE)
        if self.rank is not None:
            job, index = self.cluster.packing.job_of(self.rank)
            above = f"rank {self.rank} ({job}:{index} on {self.node})"
        else:
            above = f"the leader of {self.node} (its lowest rank)"
        if exc.code is Refusal.UNAUTHENTICATED:
            return Unjoined(Failure.of(
                f"{above} refused rank {self.plan.rank}'s seal on {self.host}: {exc.detail}"),
                "every task of the job must share its secret (SLURM_RESOLVER_SECRET), or every node run munged "
                "with the same munge.key and a synchronised clock (try: munge -n | ssh <that node> unmunge); "
                "SLURM_RESOLVER_AUTH=none on every task turns proofs off")
        if exc.kind is CallFailure.REFUSED:  # it answered, at once: no timeout is to blame
            return Unjoined(Failure.of(f"{above} refused rank {self.plan.rank}'s call to {round.label} on "
                                       f"{self.host}: {exc.detail}"), "every task of the step must run the same "
                            "slurm_resolver; check that task's output")
        ports = abridged(list(self._ports()), 4)
        return Unjoined(Failure.of(
            f"{above} did not answer on {self.host} (ports {ports}) within {timeout:g} s: {exc.detail}", Cause.SILENT),
            "check that task's output for an error; make sure every task calls bootstrap(); raise timeout")
