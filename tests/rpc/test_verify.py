"""Asking servers who they are: in the tree, every server is asked exactly once, and a lie fails every task."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from slurm_resolver.cluster import Cluster
from slurm_resolver.errors import ResolutionError
from slurm_resolver.hostlists import collapse_counts
from slurm_resolver.resolution import resolve
from slurm_resolver.rpc.auth import SECRET, AuthMode, Authority, Purpose, authority
from slurm_resolver.rpc.bootstrap import bootstrap_async
from slurm_resolver.rpc.coordinator import Coordinator
from slurm_resolver.rpc.local import LocalNetwork
from slurm_resolver.rpc.messages import Source, SourceKind
from slurm_resolver.rpc.simulate import srun_environ
from slurm_resolver.rpc.transport import Handlers, Refusal, Refused, Served
from slurm_resolver.rpc.tree import plan_of
from slurm_resolver.rpc.verify import Inspection
from slurm_resolver.rpc.wire import Identity, decode_identity, unwrap

from .forge import who_call

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

    async def serve(self, host: str, ports: Sequence[int], handlers: Callable[[int], Handlers]) -> Served:
        made: list[Any] = []

        def counting(port: int) -> Handlers:
            coordinator = handlers(port)
            answer = coordinator.who

            async def who(message: bytes, deadline: float) -> bytes:
                said = await answer(message, deadline)  # not counted: "not ready yet, ask again"
                self.asked[coordinator.identity.rank] += 1
                return said

            coordinator.who = who  # type: ignore[method-assign]
            made.append(coordinator)
            return coordinator

        served = await super().serve(host, ports, counting)
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
    mine = authority("secret", env, "5.0")
    stranger = authority("secret", {**env, SECRET: "t" * 24}, "5.0")
    me = Identity("5.0", 1, "node1", "worker", 1)

    def ask(coordinator: Coordinator, question: bytes) -> bytes:
        return asyncio.run(coordinator.who(question, time.monotonic() + 5))

    header, seal = unwrap(ask(Coordinator(me, 4, (), False, mine, 8000), who_call("5.0", 0, 8000, mine, early=True)))
    assert mine.check(Purpose.ANSWER, header, seal, first_round=True) == "" and decode_identity(header)[0] == me
    with pytest.raises(Refused) as refused:
        ask(Coordinator(me, 4, (), False, mine, 8000), who_call("5.0", 0, 8000, stranger, early=True))
    assert refused.value.code is Refusal.UNAUTHENTICATED
    unproven = Authority(AuthMode.NONE, "a test")  # no key yet: only an early question is answered
    ask(Coordinator(me, 4, (), False, unproven, 8000), who_call("5.0", 0, 8000, unproven, early=True))
    with pytest.raises(Refused) as later:
        ask(Coordinator(me, 4, (), False, unproven, 8000), who_call("5.0", 0, 8000, unproven))
    assert later.value.code is Refusal.UNREADY
