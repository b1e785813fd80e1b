"""Stacks down the tree and merged up, in one process through the call's own code: every task's
stacks, a silent subtree, who may ask (a task, the job's user outside it, nobody else), replays and
stale asks refused, malformed bytes refused, and the answer bounded."""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import time
from collections.abc import Callable

import pytest

from slurm_resolver.cluster import Cluster
from slurm_resolver.resolution import resolve
from slurm_resolver.rpc.diagnosis.stacks_call import FRESH, StacksHandler
from slurm_resolver.rpc.diagnosis.stacks_wire import StacksAsk, decode_stacks, encode_ask, encode_stacks
from slurm_resolver.rpc.messages import Identity
from slurm_resolver.rpc.simulation.simulate import srun_environ
from slurm_resolver.rpc.transport import Refusal, Refused
from slurm_resolver.rpc.tree import plan_of
from slurm_resolver.rpc.trust.gate import Gate
from slurm_resolver.rpc.trust.seals import AuthMode, Authority, Purpose
from slurm_resolver.rpc.waits import Later, Settled
from slurm_resolver.rpc.wire import unwrap
from slurm_resolver.stacks.capture import Frame, ThreadStack
from slurm_resolver.stacks.classes import Stacks

NODES, PER_NODE = 5, 3  # a tree of 5 nodes with fan-out 2: 0 <- 1, 2; 1 <- 3, 4
SECRET = b"s" * 32


def _stack(rank: int) -> tuple[ThreadStack, ...]:
    where = "sleep_elsewhere" if rank == 7 else "barrier"
    return (ThreadStack("main", (Frame("train.py", 1, "<module>"), Frame("train.py", 10 if rank == 7 else 20, where))),)


def _job(silent: frozenset[int] = frozenset(), take: Callable[[int], tuple[ThreadStack, ...]] = _stack
         ) -> tuple[Cluster, dict[int, StacksHandler]]:
    base = resolve(srun_environ(NODES, PER_NODE), resolves=lambda name: True)
    world = base.world_size
    cluster = base.with_ports([30000 + r for r in range(world)], [0] * world)
    handlers: dict[int, StacksHandler] = {}

    async def ask(rank: int, message: bytes, timeout: float) -> bytes:
        if rank in silent:
            await asyncio.sleep(timeout + 1)
        return await asyncio.wait_for(handlers[rank].stacks(message, time.monotonic() + timeout), timeout)

    for rank in range(world):
        authority = Authority(AuthMode.SECRET, "test", secret=SECRET, launch=cluster.launch.key)
        async def taken(rank: int = rank) -> tuple[ThreadStack, ...]:
            return take(rank)

        me = cluster.task(rank)
        settled = Later[Settled]()
        settled.set(Settled(cluster.as_rank(rank), plan_of(cluster.as_rank(rank), rank, 2), None))  # type: ignore[arg-type]
        gate = Gate(Identity(cluster.launch.key, rank, me.node, me.job, me.index), world, authority, 30000 + rank)
        handler = handlers[rank] = StacksHandler(gate, settled)
        handler.take = taken  # type: ignore[method-assign]
        handler.ask = ask  # type: ignore[method-assign]
    return cluster, handlers


def _ask(cluster: Cluster, source: int, port: int = 30000, when: float | None = None, within: float = 3.0,
         outside: bool = False, to: int = 0, node: str | None = None) -> tuple[bytes, bytes]:
    """An ask of rank ``source`` (the job's user where ``outside``) for the server of rank ``to``."""
    authority = Authority(AuthMode.SECRET, "test", secret=SECRET, launch=cluster.launch.key)
    nonce = secrets.token_bytes(16)
    ask = StacksAsk(cluster.launch.key, source, nonce, port, within, time.time() if when is None else when,
                    cluster.task(to).node if node is None else node, None if outside else to)
    seal = (lambda h: authority.seal_outside(Purpose.CALL, h)) if outside else \
        (lambda h: authority.seal(Purpose.CALL, h))
    return encode_ask(ask, seal), nonce


def _gathered(handler: StacksHandler, message: bytes, seconds: float = 3.0) -> Stacks:
    reply = asyncio.run(handler.stacks(message, time.monotonic() + seconds))
    stacks, _, _ = decode_stacks(unwrap(reply)[0], handler.cluster.world_size)
    return stacks


@pytest.mark.parametrize("outside", [False, True])
def test_the_root_answers_every_tasks_stacks_merged_the_odd_one_first(outside: bool) -> None:
    cluster, handlers = _job()
    message, _ = _ask(cluster, cluster.world_size if outside else 4, outside=outside)
    stacks = _gathered(handlers[0], message)
    assert stacks.answered == 15 and len(stacks.silent) == 0
    odd, common = stacks.classes
    assert list(odd.ranks) == [7] and odd.frames[-1].function == "sleep_elsewhere"
    assert list(common.ranks) == [r for r in range(15) if r != 7]


def test_a_silent_leader_makes_its_whole_subtree_silent_within_the_deadline() -> None:
    cluster, handlers = _job(silent=frozenset([3]))  # node 1's leader: nodes 1, 3 and 4 below it
    message, _ = _ask(cluster, 0, within=1.0)
    start = time.monotonic()
    stacks = _gathered(handlers[0], message, 1.0)
    assert time.monotonic() - start < 1.5
    assert list(stacks.silent) == [3, 4, 5, 9, 10, 11, 12, 13, 14] and stacks.answered == 6


def test_a_task_whose_stacks_cannot_be_taken_is_silent_alone() -> None:
    def take(rank: int) -> tuple[ThreadStack, ...]:
        if rank == 5:
            raise OSError("gone")
        return _stack(rank)

    cluster, handlers = _job(take=take)
    stacks = _gathered(handlers[0], _ask(cluster, 0)[0])
    assert list(stacks.silent) == [5] and stacks.answered == 14


@pytest.mark.parametrize("change, code", [
    ("another job's secret", Refusal.UNAUTHENTICATED),
    ("another server's port", Refusal.UNAUTHENTICATED),
    ("stale", Refusal.UNAUTHENTICATED),
    ("replayed", Refusal.UNAUTHENTICATED),
    ("garbage", Refusal.INVALID),
    ("another launch", Refusal.FOREIGN),
])
def test_an_ask_not_the_jobs_own_is_refused(change: str, code: Refusal, caplog: pytest.LogCaptureFixture) -> None:
    cluster, handlers = _job()
    message, _ = _ask(cluster, 0)
    if change == "another job's secret":
        authority = Authority(AuthMode.SECRET, "test", secret=b"x" * 32, launch=cluster.launch.key)
        message = encode_ask(StacksAsk(cluster.launch.key, 15, b"n" * 16, 30000, 1, time.time(), "node1", None),
                             lambda h: authority.seal_outside(Purpose.CALL, h))
    elif change == "another server's port":
        message, _ = _ask(cluster, 0, port=30001)
    elif change == "stale":
        message, _ = _ask(cluster, 0, when=time.time() - FRESH - 5)
    elif change == "replayed":
        _gathered(handlers[0], message)
    elif change == "garbage":
        message = b"\x0a\xff\xff" + hashlib.sha256(b"x").digest()
    elif change == "another launch":
        authority = Authority(AuthMode.SECRET, "test", secret=SECRET, launch="1.0")
        message = encode_ask(StacksAsk("1.0", 0, b"n" * 16, 30000, 1, time.time(), "node1", 0),
                             lambda h: authority.seal(Purpose.CALL, h))
    with pytest.raises(Refused) as refused:
        asyncio.run(handlers[0].stacks(message, time.monotonic() + 2))
    assert refused.value.code is code
    if code is Refusal.UNAUTHENTICATED:
        assert "refused an ask for stacks" in caplog.text


def test_without_authentication_nobody_outside_the_job_is_answered() -> None:
    none = Authority(AuthMode.NONE, "test")
    assert not none.check_outside(Purpose.CALL, b"h", b"").believed
    assert "SLURM_RESOLVER_AUTH=none" in none.check_outside(Purpose.CALL, b"h", b"").why


# Issue 48: an ask good for one server, an answer bounded by its subtree, a task's own stacks capped.

def _refused(handler: StacksHandler, message: bytes) -> str:
    with pytest.raises(Refused) as refused:
        asyncio.run(handler.stacks(message, time.monotonic() + 2))
    assert refused.value.code is Refusal.UNAUTHENTICATED
    return refused.value.detail


def test_an_ask_from_outside_is_taken_by_the_root_alone_and_once_job_wide(caplog: pytest.LogCaptureFixture) -> None:
    """The user's ask kept by a squatter on the root's port number and replayed at another node's leader
    (the same port on its own address), at the root, or at any other task: refused every time."""
    cluster, handlers = _job()
    world = cluster.world_size
    message, _ = _ask(cluster, world, outside=True)  # for the root: node1, port 30000
    leader = 3  # node 2's leader
    for rank in (leader, 1):  # another node's leader, another task of the root's own node
        handlers[rank].port = 30000  # as a leader on another address listens on the same port number
        assert "taken by the step's root alone (rank 0 on node1)" in _refused(handlers[rank], message)
        handlers[rank].port = 30000 + rank
    assert _gathered(handlers[0], message).answered == world  # the root answers it once ...
    assert "replayed" in _refused(handlers[0], message)  # ... and never again
    assert "claiming to be the job's user outside it" in caplog.text


@pytest.mark.parametrize("change", ["another node", "another rank", "another port"])
def test_an_ask_names_the_one_server_it_is_for(change: str) -> None:
    cluster, handlers = _job()
    world = cluster.world_size
    if change == "another node":  # the user's ask made for a root on another node
        message, _ = _ask(cluster, world, outside=True, node=cluster.task(3).node)
    elif change == "another rank":  # a task's ask of rank 3, sent to rank 0 on the same port number
        message, _ = _ask(cluster, 4, to=3, node=cluster.task(0).node)
    else:
        message, _ = _ask(cluster, world, outside=True, port=30003)
    assert "made for another server" in _refused(handlers[0], message)


@pytest.mark.parametrize("lie", ["more tasks", "other ranks", "huge counts"])
def test_a_task_that_answers_for_more_than_its_subtree_is_named_silent_and_the_rest_still_comes(
        lie: str, caplog: pytest.LogCaptureFixture) -> None:
    """Rank 12 (the leader of node 4, a leaf below node 1's leader) answers its parent with a sealed answer
    claiming more tasks than its subtree, or ranks of another subtree: its subtree (ranks 12-14) is named
    silent, and the user gets every other task's stacks; a count the wire cannot hold is cut, never an error."""
    cluster, handlers = _job()
    world = cluster.world_size
    hostile = handlers[12]
    honest = hostile.stacks

    async def lying(message: bytes, deadline: float) -> bytes:
        reply = await honest(message, deadline)
        stacks, nonce, _ = decode_stacks(unwrap(reply)[0], world)
        if lie == "more tasks":
            stacks = Stacks(stacks.classes, stacks.silent, world, stacks.others)
        elif lie == "other ranks":
            stacks = stacks | Stacks.silent_tasks([0, 1])
        else:
            stacks = Stacks(stacks.classes, stacks.silent, stacks.answered, stacks.others, dropped=(1 << 32) - 1)
        return encode_stacks(stacks, nonce, 12, lambda h: hostile.authority.seal(Purpose.ANSWER, h))

    hostile.stacks = lying  # type: ignore[method-assign]
    handlers[3].take = lambda: _many_threads(3)  # type: ignore[method-assign]  # its parent drops some too
    stacks = _gathered(handlers[0], _ask(cluster, world, outside=True)[0])
    if lie == "huge counts":  # the parent's sum is more than the wire's counts hold: cut, never an error
        assert stacks.answered == world and len(stacks.silent) == 0 and stacks.dropped == (1 << 32) - 1
        return
    assert list(stacks.silent) == [12, 13, 14] and stacks.answered == world - 3
    assert "stacks of rank 12 refused" in caplog.text and "not its subtree's" in caplog.text


async def _many_threads(rank: int) -> tuple[ThreadStack, ...]:
    return (*_stack(rank), *(ThreadStack(f"pool-{i}", (Frame("pool.py", i, "work"),)) for i in range(300)))


def test_a_task_with_more_distinct_thread_stacks_than_an_answer_holds_still_answers() -> None:
    """A task of 300 distinct thread stacks: its own answer keeps its main thread and the rarest, says how
    many were dropped, and its parent takes it."""
    from slurm_resolver.stacks.classes import MOST_CLASSES
    from slurm_resolver.stacks.render import render

    def take(rank: int) -> tuple[ThreadStack, ...]:
        if rank != 14:
            return _stack(rank)
        pool = tuple(ThreadStack(f"pool-{i}", (Frame("pool.py", i, "work"),)) for i in range(300))
        idle = tuple(ThreadStack(f"idle-{i}", (Frame("pool.py", 999, "idle"),)) for i in range(5))
        return (*pool, *idle, *_stack(rank))

    cluster, handlers = _job(take=take)
    stacks = _gathered(handlers[0], _ask(cluster, cluster.world_size, outside=True)[0])
    assert len(stacks.silent) == 0 and stacks.answered == 15
    assert len(stacks.classes) <= MOST_CLASSES
    main = [c for c in stacks.classes if c.main]
    assert sum(len(c.ranks) for c in main) == 15  # every task's main thread kept, never crowded out
    assert stacks.dropped == 301 - (MOST_CLASSES - len(main))  # 301 distinct other stacks; room for the rest
    assert not any(c.frames[-1].function == "idle" for c in stacks.classes)  # the commonest (5 threads) dropped
    assert f"and {stacks.dropped} more distinct stacks of other threads, left out" in render(stacks)


def test_before_the_bootstrap_settles_a_task_refuses_asks_as_unready() -> None:
    """A part of the server from its start: until the bootstrap agreed (the tasks below are known by their
    ports), an ask is refused ``unready`` (ask again), never a crash."""
    cluster, _ = _job()
    authority = Authority(AuthMode.SECRET, "test", secret=SECRET, launch=cluster.launch.key)
    me = cluster.task(0)
    early = StacksHandler(Gate(Identity(cluster.launch.key, 0, me.node, me.job, me.index), cluster.world_size,
                               authority, 30000), Later[Settled]())
    with pytest.raises(Refused) as refused:
        asyncio.run(early.stacks(_ask(cluster, 4)[0], time.monotonic() + 1))
    assert refused.value.code is Refusal.UNREADY and "not bootstrapped yet" in refused.value.detail
