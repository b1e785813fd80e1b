"""A task's side of the watch: it follows its call up, declares a silent or vanished task above dead, blames
nobody for its own pause, and moves its call when the task above hands over."""

from __future__ import annotations

import asyncio
import time

from slurm_resolver.rpc.bootstrapped import Bootstrapped
from slurm_resolver.rpc.detection.processes import Seen
from slurm_resolver.rpc.messages import Source

from .test_watch import run, until


def test_a_stopped_leader_is_declared_dead_by_its_nodes_tasks_and_its_parent() -> None:
    """Node 3's leader (rank 4) is stopped (SIGSTOP): rank 5, on its node, sees its process stopped in the kernel,
    and the root, on another node, finds it lost over the network (its core's pings unanswered). Neither needed
    a message from it."""
    async def scenario(tasks: list[Bootstrapped]) -> None:
        leader = tasks[4]
        detector = leader._detector  # stopped: it says nothing up or down
        detector.deaths.declare = lambda *args, **kwargs: None
        tasks[5]._detector.heartbeat.seen = lambda process: Seen.STOPPED  # what rank 5 reads of rank 4's process
        network = tasks[0]._member.uplink.network
        network.freeze(leader.cluster.task(4).host, leader.server.port)  # what the root's pings find
        took = await until(lambda: 4 in tasks[5].failures() and 4 in tasks[0].failures(), 8.0)
        assert "its process is stopped" in tasks[5].failures()[4] and 0.5 < took < 8.0, tasks[5].failures()
        assert "stopped answering: no answer at" in tasks[0].failures()[4], tasks[0].failures()

    run(scenario)


def test_a_process_stopped_longer_than_the_patience_blames_nobody() -> None:
    async def scenario(tasks: list[Bootstrapped]) -> dict[int, str]:
        time.sleep(3.5)  # every task's loop stops (SIGSTOP, a long GIL hold) for over twice the patience
        await asyncio.sleep(2.0)
        return {r: why for t in tasks for r, why in t.failures().items()}

    assert run(scenario) == {}


def test_when_a_leader_leaves_normally_its_successor_watches_in_its_place() -> None:
    """Node 2's leader (rank 4) ends its work early; rank 5, on its node, takes its place: a
    later death of rank 5 is still known to everyone."""
    async def scenario(tasks: list[Bootstrapped]) -> None:
        await until(lambda: Source.task(5) in tasks[4]._detector.deaths.below, 4.0)  # rank 5 watches on its leader
        await tasks[4].aio.stop(1.0)
        await until(lambda: tasks[5]._detector.heartbeat.above == 0, 4.0)  # 5 now watches on the root, for node 2
        await asyncio.sleep(2.0)  # longer than the patience: a successor is no failure, and beats
        assert all(t.failures() == {} for t in tasks if t.rank != 4)
        await tasks[5].aio.fail("out of memory after the leader left")
        others = [t for t in tasks if t.rank not in (4, 5)]
        await until(lambda: all(5 in t.failures() for t in others), 4.0)
        assert tasks[0].failures()[5] == "out of memory after the leader left"

    run(scenario)


def test_a_leader_whose_call_closes_is_declared_dead_by_its_tasks_and_everyone() -> None:
    async def scenario(tasks: list[Bootstrapped]) -> None:
        leader = tasks[4]  # leads node 3: rank 5 below it, reports to the root
        served, leader._served, detector, leader._detector = leader._served, None, leader._detector, None
        detector.deaths.leaving = True  # its process dies: it says nothing, every call to it and from it breaks
        await detector.watch.stop()
        assert detector._beating is not None
        detector._beating.cancel()
        await served.stop(0)
        others = [t for t in tasks if t.rank != 4]
        took = await until(lambda: all(4 in t.failures() for t in others), 3.0)
        assert "died" in tasks[5].failures()[4] and took < 3.0

    run(scenario)


