"""Failure detection after the bootstrap, in one process through the real protocol code: deaths
reported, closed calls, silent tasks, normal ends, and votes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from slurm_resolver.resolution import resolve
from slurm_resolver.rpc.bootstrap import bootstrap_async
from slurm_resolver.rpc.bootstrapped import Bootstrapped
from slurm_resolver.rpc.local import LocalNetwork
from slurm_resolver.rpc.messages import Source
from slurm_resolver.rpc.simulate import srun_environ

NODES, PER_NODE = 4, 2  # ranks 0, 2, 4, 6 lead their nodes; 0 is the root


def run(scenario: Callable[[list[Bootstrapped]], Awaitable[object]], heartbeat: float = 0.2,
        patience: float = 1.5, nodes: int = NODES, per_node: int = PER_NODE, fanout: int = 8) -> object:
    """Bootstrap 4 nodes x 2 tasks with failure detection on, then run ``scenario`` on them."""
    base = resolve(srun_environ(nodes, per_node), resolves=lambda name: True)

    async def every_task() -> object:
        network = LocalNetwork()
        tasks = await asyncio.gather(*(
            bootstrap_async(base.as_rank(r), exchange="rendezvous", timeout=10, environ={}, network=network,
                            heartbeat=heartbeat, patience=patience, fanout=fanout) for r in range(base.world_size)))
        try:
            return await scenario(list(tasks))
        finally:
            await asyncio.gather(*(t.aio.stop(0.1) for t in tasks))

    return asyncio.run(every_task())


async def until(predicate: Callable[[], bool], seconds: float) -> float:
    """How long ``predicate`` took to hold (fails after ``seconds``)."""
    start = time.monotonic()
    while not predicate():
        assert time.monotonic() - start < seconds, "not within the time"
        await asyncio.sleep(0.02)
    return time.monotonic() - start


def test_a_task_that_fails_is_known_to_every_other_at_once() -> None:
    async def scenario(tasks: list[Bootstrapped]) -> None:
        heard: list[tuple[int, int]] = []
        for t in tasks:
            t.on_failure(lambda rank, why, me=t.rank: heard.append((me, rank)))
        await tasks[5].aio.fail("out of memory in step 12")
        others = [t for t in tasks if t.rank != 5]
        await until(lambda: all(5 in t.failures() for t in others), 4.0)
        assert all(t.failures()[5] == "out of memory in step 12" for t in others)
        assert sorted(me for me, rank in heard) == [t.rank for t in others]  # each callback once

    run(scenario)


def test_a_callback_added_late_hears_of_the_deaths_already_known() -> None:
    async def scenario(tasks: list[Bootstrapped]) -> list[tuple[int, str]]:
        await tasks[5].aio.fail("a bad batch")
        await until(lambda: 5 in tasks[0].failures(), 4.0)
        heard: list[tuple[int, str]] = []
        tasks[0].on_failure(lambda rank, why: heard.append((rank, why)))
        return heard

    assert run(scenario) == [(5, "a bad batch")]


def test_a_leader_whose_call_closes_is_declared_dead_by_its_tasks_and_everyone() -> None:
    async def scenario(tasks: list[Bootstrapped]) -> None:
        leader = tasks[4]  # leads node 3: rank 5 below it, reports to the root
        served, leader._served, detector, leader._detector = leader._served, None, leader._detector, None
        detector.deaths.leaving = True  # its process dies: it says nothing, every call to it and from it breaks
        await detector.watch.stop()
        assert detector._task is not None
        detector._task.cancel()
        await served.stop(0)
        others = [t for t in tasks if t.rank != 4]
        took = await until(lambda: all(4 in t.failures() for t in others), 3.0)
        assert "died" in tasks[5].failures()[4] and took < 3.0

    run(scenario)


def test_a_silent_task_is_declared_dead_after_the_patience() -> None:
    async def scenario(tasks: list[Bootstrapped]) -> None:
        tasks[3]._detector.listener.heartbeat = 3600.0  # hung: its call stays open, its beats stop
        others = [t for t in tasks if t.rank != 3]
        # About the patience (1.5 s); a loaded machine's late wake-ups are forgiven as pauses, so allow more.
        took = await until(lambda: all(3 in t.failures() for t in others), 8.0)
        assert "stopped beating" in tasks[2].failures()[3] and 0.5 < took < 8.0

    run(scenario)


def test_a_hung_leader_is_declared_dead_by_the_tasks_below_it() -> None:
    async def scenario(tasks: list[Bootstrapped]) -> None:
        detector = tasks[4]._detector  # leads node 3 (rank 5 below it): hangs, sends nothing up or down
        detector.listener.heartbeat = detector.watch.heartbeat = 3600.0
        detector.deaths.declare = lambda *args, **kwargs: None
        took = await until(lambda: 4 in tasks[5].failures(), 8.0)  # as above: about the patience
        assert "stopped answering" in tasks[5].failures()[4] and 0.5 < took < 8.0, tasks[5].failures()

    run(scenario)


def test_a_process_stopped_longer_than_the_patience_blames_nobody() -> None:
    async def scenario(tasks: list[Bootstrapped]) -> dict[int, str]:
        time.sleep(3.5)  # every task's loop stops (SIGSTOP, a long GIL hold) for over twice the patience
        await asyncio.sleep(2.0)
        return {r: why for t in tasks for r, why in t.failures().items()}

    assert run(scenario) == {}


def test_tasks_that_end_normally_are_no_failure() -> None:
    async def scenario(tasks: list[Bootstrapped]) -> dict[int, str]:
        for t in tasks[1:]:  # every task but the root leaves, leaders before their tasks too
            await t.aio.stop(0.1)
        await asyncio.sleep(2.0)  # longer than the patience
        return tasks[0].failures()

    assert run(scenario) == {}


def test_when_a_leader_leaves_normally_its_successor_watches_in_its_place() -> None:
    """Node 2's leader (rank 4) ends its work early; rank 5, on its node, takes its place: a
    later death of rank 5 is still known to everyone."""
    async def scenario(tasks: list[Bootstrapped]) -> None:
        await until(lambda: Source.task(5) in tasks[4]._detector.deaths.below, 4.0)  # rank 5 watches on its leader
        await tasks[4].aio.stop(1.0)
        await until(lambda: tasks[5]._detector.listener.above == 0, 4.0)  # 5 now watches on the root, for node 2
        await asyncio.sleep(2.0)  # longer than the patience: a successor is no failure, and beats
        assert all(t.failures() == {} for t in tasks if t.rank != 4)
        await tasks[5].aio.fail("out of memory after the leader left")
        others = [t for t in tasks if t.rank not in (4, 5)]
        await until(lambda: all(5 in t.failures() for t in others), 4.0)
        assert tasks[0].failures()[5] == "out of memory after the leader left"

    run(scenario)


def test_the_root_hands_over_too_and_the_tree_below_moves_its_calls() -> None:
    """3 nodes x 3 tasks, a chain (fan-out 1): node 0 (ranks 0-2) <- node 1 (3-5) <- node 2 (6-8).
    The root leaves, then the leader of node 1: ranks 1 and 4 take over, and every death below
    them is still known to every task left."""
    async def scenario(tasks: list[Bootstrapped]) -> None:
        await until(lambda: all(len(t._detector.deaths.below) == len(t._detector.watch.sources) for t in tasks), 4.0)
        await tasks[0].aio.stop(1.0)
        await until(lambda: tasks[3]._detector.listener.above == 1 and tasks[2]._detector.listener.above == 1, 4.0)
        await tasks[3].aio.stop(1.0)
        await until(lambda: tasks[6]._detector.listener.above == 4 and tasks[5]._detector.listener.above == 4, 4.0)
        assert tasks[4]._detector.listener.above == 1
        await asyncio.sleep(2.0)
        assert all(t.failures() == {} for t in tasks[4:]) and tasks[1].failures() == {}
        await tasks[8].aio.fail("a bad batch on node 2")
        left = [t for t in tasks if t.rank not in (0, 3, 8)]
        await until(lambda: all(8 in t.failures() for t in left), 4.0)
        tasks[2]._detector.listener.heartbeat = 3600.0  # a task on node 0, watched by rank 1 now, hangs
        await until(lambda: all(2 in t.failures() for t in left if t.rank != 2), 8.0)
        assert "stopped beating" in tasks[7].failures()[2]

    run(scenario, nodes=3, per_node=3, fanout=1)


def test_a_job_whose_tasks_all_end_together_reports_no_failure() -> None:
    async def scenario(tasks: list[Bootstrapped]) -> list[tuple[int, int, str]]:
        heard: list[tuple[int, int, str]] = []
        for t in tasks:
            t.on_failure(lambda rank, why, me=t.rank: heard.append((me, rank, why)))
        for order in (tasks[::2], tasks[1::2]):  # leaders and their node-mates, nearly at once
            await asyncio.gather(*(t.aio.stop(1.0) for t in order))
        await asyncio.sleep(2.0)
        return heard

    assert run(scenario, nodes=3, per_node=3, fanout=1) == []


def test_a_vote_is_yes_everywhere_when_any_task_votes_yes() -> None:
    async def scenario(tasks: list[Bootstrapped]) -> list[list[bool]]:
        first = await asyncio.gather(*(t.aio.vote("stop", t.rank == 7) for t in tasks))
        second = await asyncio.gather(*(t.aio.vote("stop", False) for t in tasks))
        return [list(first), list(second)]

    first, second = run(scenario)  # type: ignore[misc]
    assert first == [True] * 8 and second == [False] * 8
