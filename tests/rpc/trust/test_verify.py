"""Asking servers who they are: in the tree, every server is asked exactly once, and a lie fails every task."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import pytest

from slurm_resolver.cluster import Cluster
from slurm_resolver.errors import ResolutionError
from slurm_resolver.hostlists import collapse_counts
from slurm_resolver.resolution import resolve
from slurm_resolver.rpc.bootstrap import bootstrap_async
from slurm_resolver.rpc.detection.watch import WatchHandler
from slurm_resolver.rpc.messages import Identity, Source, SourceKind
from slurm_resolver.rpc.network.in_process import LocalNetwork
from slurm_resolver.rpc.simulation.simulate import srun_environ
from slurm_resolver.rpc.transport import CallFailure, LinkError, Refusal, Refused
from slurm_resolver.rpc.tree import plan_of
from slurm_resolver.rpc.trust.choice import SECRET, AuthChoice, authority
from slurm_resolver.rpc.trust.gate import Gate
from slurm_resolver.rpc.trust.identity import IdentityHandler, decode_identity, decode_who
from slurm_resolver.rpc.trust.seals import AuthMode, Authority, Purpose
from slurm_resolver.rpc.trust.verify import Expected, Inspection, ask
from slurm_resolver.rpc.waits import Later
from slurm_resolver.rpc.wire import unwrap

from ..forge import first_beat, who_call

SHAPES = [  # tasks per node, fan-out
    ([1], 8), ([2], 8), ([1, 1], 8), ([4, 4, 4], 8), ([1] * 12, 2), ([1] * 12, 3), ([2, 1, 3, 1, 1, 1, 2], 2),
    ([1, 4, 1, 1, 2, 1, 1, 1, 1], 1), ([3] * 20, 4),
]


def step(counts: Sequence[int]) -> Cluster:
    """An srun step with ``counts`` tasks on its nodes, in block order."""
    env = srun_environ(len(counts), 1)
    env["SLURM_STEP_TASKS_PER_NODE"] = env["SLURM_TASKS_PER_NODE"] = collapse_counts(list(counts))
    env["SLURM_STEP_NUM_TASKS"] = str(sum(counts))
    env["SLURM_LOCALID"], env["SLURM_NODEID"] = "0", "0"
    return resolve(env, resolves=lambda name: True)


@pytest.mark.parametrize(("counts", "fanout"), SHAPES)
def test_every_server_is_asked_once_or_called_in_the_round(counts: list[int], fanout: int) -> None:
    """Leaders ask the sources nobody else calls; every other server is a leader called in the round."""
    cluster = step(counts)
    asked: Counter[int] = Counter()
    called: set[int] = set()
    for rank in range(cluster.world_size):
        plan = plan_of(cluster, rank, fanout)
        if not plan.is_leader:
            continue
        if plan.sources:
            called.add(rank)  # its node's tasks or child leaders call it at its port
        inspection = Inspection(cluster, plan, LocalNetwork(), None, 0.0)  # type: ignore[arg-type]
        for source in plan.sources:
            if inspection.needs(source):
                ranks = cluster.placement.ranks_on(source.number) if source.kind is SourceKind.NODE else \
                    [source.number]
                asked[ranks[0]] += 1
    assert all(times == 1 for times in asked.values())
    assert not called & set(asked)
    assert called | set(asked) == (set(range(cluster.world_size)) if cluster.world_size > 1 else set())


class Asking(LocalNetwork):
    """Counts the identity calls each server answers; ``lie(rank, port)``: a task reports another port."""

    def __init__(self, lie: Callable[[int, int], int] = lambda rank, port: port) -> None:
        super().__init__()
        self.asked: Counter[int] = Counter()
        self._lie = lie

    async def serve(self, host: str, ports: Sequence[int], handlers: Callable[[int], Any], calls: Any) -> Any:
        made: list[Any] = []

        def counting(port: int) -> Any:
            server = handlers(port)
            part = server.parts.of(IdentityHandler)
            answer = part.who

            async def who(message: bytes, deadline: float) -> bytes:
                said = await answer(message, deadline)  # not counted: "not ready yet, ask again"
                self.asked[server.identity.rank] += 1
                return said

            part.who = who
            made.append(server)
            return server

        served = await super().serve(host, ports, counting, calls)
        served.port = self._lie(made[-1].identity.rank, served.port)  # type: ignore[misc]
        return served


def run(cluster: Cluster, network: LocalNetwork, **options: Any) -> list[Any]:
    async def every_task() -> list[Any]:
        done = await asyncio.gather(*(bootstrap_async(cluster.as_rank(r), environ={}, network=network, timeout=10,
                                                      heartbeat=None, **options)
                                      for r in range(cluster.world_size)), return_exceptions=True)
        await asyncio.gather(*(b.aio.stop(0) for b in done if not isinstance(b, BaseException)))
        return done

    return asyncio.run(every_task())


def test_the_tree_asks_each_server_once_and_needs_no_last_round() -> None:
    cluster = step([2, 1, 3, 1, 1, 1, 2])
    network = Asking()
    done = run(cluster, network, fanout=2)
    assert all(not isinstance(b, BaseException) for b in done), done
    leaders_called = {plan.rank for plan in (plan_of(cluster, r, 2) for r in range(cluster.world_size))
                      if plan.is_leader and plan.sources}
    assert {r: network.asked[r] for r in range(cluster.world_size)} == \
        {r: 0 if r in leaders_called else 1 for r in range(cluster.world_size)}
    assert all("verify" not in b.timings and "barrier" not in b.timings for b in done)


def test_a_task_whose_record_names_another_server_fails_every_task_with_its_name() -> None:
    cluster = step([2, 2])
    # Rank 3 reports rank 2's port (its node's leader): the leader asks there, and hears itself.
    network = Asking(lie=lambda rank, port: 39000 if rank == 3 else port)
    done = run(cluster, network, rendezvous=(39000,))
    assert all(isinstance(b, ResolutionError) for b in done), done
    for error in done:
        assert "rank 2 could not verify a peer: rank 3 at node2:39000 says it is worker:2 (rank 2) on node2, but " \
               "the table has worker:3 (rank 3) on node2" in str(error)


def test_verify_all_and_counts_still_ask_after_the_table() -> None:
    cluster = step([2, 2])
    network = Asking()
    done = run(cluster, network, verify="all")
    assert all(not isinstance(b, BaseException) for b in done), done
    assert all(network.asked[r] == 3 for r in range(4))
    assert all({"verify", "barrier"} <= set(b.timings) for b in done)
    network = Asking()
    assert not any(isinstance(b, BaseException) for b in run(cluster, network, verify="none"))
    assert not network.asked


def test_which_sources_a_leader_asks() -> None:
    cluster = step([1, 2, 1, 1])  # with fan-out 1, a chain of nodes: node2 has two tasks, node4 is a leaf

    def needs(rank: int, source: Source) -> bool:
        return Inspection(cluster, plan_of(cluster, rank, 1), LocalNetwork(), None, 0.0).needs(source)  # type: ignore[arg-type]

    assert needs(1, Source.task(2))  # a task of its node
    assert not needs(0, Source.node(1))  # rank 1's node-mate calls it
    assert not needs(1, Source.node(2))  # rank 3's child leader calls it
    assert needs(3, Source.node(3))  # nobody else calls rank 4


def test_an_early_question_is_sealed_as_the_first_round_and_answered_so() -> None:
    """A leader's question comes before anyone knows the launch's key: it is answered at once
    (not "ask again"), under the first round's seals, and a stranger's is refused."""
    env = {SECRET: "s" * 24, "SLURM_RESOLVER_MUNGE_SOCKET": "/nonexistent"}
    mine = authority(AuthChoice.SECRET, env, "5.0")
    stranger = authority(AuthChoice.SECRET, {**env, SECRET: "t" * 24}, "5.0")
    me = Identity("5.0", 1, "node1", "worker", 1)

    def ask(server: IdentityHandler, question: bytes) -> bytes:
        return asyncio.run(server.who(question, time.monotonic() + 5))

    header, seal = unwrap(ask(IdentityHandler(Gate(me, 4, mine, 8000)), who_call("5.0", 0, 8000, mine, early=True)))
    assert mine.check(Purpose.ANSWER, header, seal, first_round=True).believed and decode_identity(header)[0] == me
    with pytest.raises(Refused) as refused:
        ask(IdentityHandler(Gate(me, 4, mine, 8000)), who_call("5.0", 0, 8000, stranger, early=True))
    assert refused.value.code is Refusal.UNAUTHENTICATED
    unproven = Authority(AuthMode.NONE, "a test")  # no key yet: only an early question is answered
    ask(IdentityHandler(Gate(me, 4, unproven, 8000)), who_call("5.0", 0, 8000, unproven, early=True))
    with pytest.raises(Refused) as later:
        ask(IdentityHandler(Gate(me, 4, unproven, 8000)), who_call("5.0", 0, 8000, unproven))
    assert later.value.code is Refusal.UNREADY


def test_after_the_first_round_no_early_question_is_answered() -> None:
    """Once a task holds the launch's key (MUNGE, or none: learned from the table), an early question
    could only ask for a first-round answer (under MUNGE, a credential carrying the key): refused."""
    me = Identity("5.0", 1, "node1", "worker", 1)
    past = Authority(AuthMode.NONE, "a test")
    past.learn(b"k" * 32)
    with pytest.raises(Refused) as refused:
        asyncio.run(IdentityHandler(Gate(me, 4, past, 8000)).who(who_call("5.0", 0, 8000, past, early=True),
                                                                   time.monotonic() + 5))
    assert refused.value.code is Refusal.INVALID and "past the first round" in refused.value.detail


class FlakyLink:
    """A link whose first identity call fails as a reset connection would (after the server read it)."""

    def __init__(self, answer: Callable[[bytes], Any]) -> None:
        self.questions: list[bytes] = []
        self._answer = answer

    async def unary(self, call: Any, message: bytes, timeout: float) -> bytes:
        self.questions.append(message)
        if len(self.questions) == 1:
            raise LinkError(CallFailure.UNAVAILABLE, "connection reset")
        return await self._answer(message)


def test_each_attempt_of_a_question_is_sealed_anew() -> None:
    """A MUNGE credential is good for one decoding: an attempt that reached the server and failed on
    the way back must not be replayed (it would be refused as a replay, and a healthy task named)."""
    env = {SECRET: "s" * 24, "SLURM_RESOLVER_MUNGE_SOCKET": "/nonexistent"}
    mine = authority(AuthChoice.SECRET, env, "5.0")
    me = Identity("5.0", 1, "node1", "worker", 1)
    server = IdentityHandler(Gate(me, 4, mine, 8000))
    link = FlakyLink(lambda message: server.who(message, time.monotonic() + 5))
    network = LocalNetwork()
    network.connect = lambda host, port: link  # type: ignore[assignment,method-assign,return-value]
    why = asyncio.run(ask(network, mine, 0, Expected("node1", 8000, me), time.monotonic() + 5, early=True))
    assert why == "" and len(link.questions) == 2
    nonces = [decode_who(unwrap(q)[0], 4).nonce for q in link.questions]
    assert nonces[0] != nonces[1] and unwrap(link.questions[0])[1] != unwrap(link.questions[1])[1]


def test_a_strangers_watch_is_refused_at_once_even_before_its_leader_watches() -> None:
    """A watch is authenticated from its first beat before it waits for the leader to watch (a
    stranger cannot hold calls there during the bootstrap)."""
    env = {SECRET: "s" * 24, "SLURM_RESOLVER_MUNGE_SOCKET": "/nonexistent"}
    mine = authority(AuthChoice.SECRET, env, "5.0")
    leader = WatchHandler(Gate(Identity("5.0", 0, "node1", "worker", 0), 4, mine, 8000), Later())

    async def beats() -> AsyncIterator[bytes]:
        yield first_beat("5.0", 1, 0, 8000)  # not sealed

    async def watch() -> float:
        start = time.monotonic()
        with pytest.raises(Refused) as refused:
            async for _ in leader.watch(beats()):
                pass
        assert refused.value.code is Refusal.UNAUTHENTICATED
        return time.monotonic() - start

    assert asyncio.run(watch()) < 1.0


def test_a_subtree_that_gave_up_just_before_the_table_is_learned_of_through_failure_detection() -> None:
    """Nodes of 1, 2 and 1 tasks; ranks 1-2 start first, rank 0 two seconds later, rank 3 as soon as
    rank 1 gave up on rank 0 (at 3.8 s of its timeout of 4 s), well before rank 0 reports without it
    (at 5.2 s): the table is decided just after rank 1 gave up. Ranks 1-2 raise; ranks 0 and 3 get the
    verified table and hear of rank 1 from failure detection."""
    cluster = step([1, 2, 1])

    async def every_task() -> tuple[list[Any], dict[int, dict[int, str]]]:
        network = LocalNetwork()
        gave_up = asyncio.Event()

        async def one(rank: int) -> Any:
            if rank == 3:
                await gave_up.wait()
            else:
                await asyncio.sleep(2.0 if rank == 0 else 0.0)
            try:
                return await bootstrap_async(cluster.as_rank(rank), environ={}, network=network, timeout=4.0,
                                             heartbeat=0.2, patience=1.0)
            finally:
                if rank == 1:
                    gave_up.set()

        done = await asyncio.gather(*(one(r) for r in range(4)), return_exceptions=True)
        up = [b for b in done if not isinstance(b, BaseException)]
        await asyncio.sleep(3.0)  # three times the patience
        seen = {b.rank: b.failures() for b in up}
        await asyncio.gather(*(b.aio.stop(0) for b in up))
        return done, seen

    done, seen = asyncio.run(every_task())
    assert [isinstance(b, ResolutionError) for b in done] == [False, True, True, False], done
    assert "bootstrap: not every task reached the bootstrap within 4 s" in str(done[1])
    assert all("worker:1 (rank 1) on node2 stopped answering" in failures.get(1, "")
               for failures in seen.values()), seen


def test_tasks_that_have_the_table_first_do_not_take_their_leader_for_dead(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no last round, a node's tasks watch their leader as soon as they have the table; the leader
    goes on to watch them without first waiting for its answers to go out, so nobody's patience runs
    out on a healthy leader."""
    from slurm_resolver.rpc.messages import TABLE_ROUND
    from slurm_resolver.rpc.rounds.state import Rounds

    delivered = Rounds.delivered
    waited: list[Any] = []

    async def slowly(self: Rounds, name: Any, deadline: float) -> bool:
        if name == TABLE_ROUND:  # the code before waited here for a table's answers to go out: slowly,
            waited.append(name)  # they took twice the patience, and the tasks took their leader for dead
            await asyncio.sleep(3.0)
        return await delivered(self, name, deadline)

    monkeypatch.setattr(Rounds, "delivered", slowly)
    cluster = step([4])

    async def every_task() -> dict[int, dict[int, str]]:
        network = LocalNetwork()
        done = await asyncio.gather(*(bootstrap_async(cluster.as_rank(r), environ={}, network=network, timeout=10,
                                                      heartbeat=0.3, patience=1.5) for r in range(4)))
        await asyncio.sleep(2.0)  # longer than the patience
        seen = {b.rank: b.failures() for b in done}
        await asyncio.gather(*(b.aio.stop(0) for b in done))
        return seen

    assert asyncio.run(every_task()) == {0: {}, 1: {}, 2: {}, 3: {}}
    assert waited == []  # the leader did not wait for its table's answers to go out
