"""One task's failure detection: a failure it reports reaches every task, callbacks hear every death, and
tasks that end normally are no failure."""

from __future__ import annotations

import asyncio
import time

from slurm_resolver.faults import Cause, Fault
from slurm_resolver.rpc.bootstrapped import Bootstrapped

from .test_watch import run, until


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


def test_a_failures_cause_and_status_reach_every_task_beside_its_words() -> None:
    async def scenario(tasks: list[Bootstrapped]) -> None:
        faults: list[Fault] = []
        tasks[0].on_fault(lambda rank, fault: faults.append(fault))
        await tasks[5].aio.fail("worker:5 (rank 5): its command exited with code 3", Cause.EXITED, 3)
        others = [t for t in tasks if t.rank != 5]
        await until(lambda: all(5 in t.faults() for t in others), 4.0)
        said = {(f.cause, f.words, f.status, f.rank, f.node) for f in (t.faults()[5] for t in others)}
        assert said == {(Cause.EXITED, "worker:5 (rank 5): its command exited with code 3", 3, 5, tasks[5].me.node)}
        assert faults == [tasks[0].faults()[5]] and all(0 < t.faults()[5].at <= time.time() for t in others)

    run(scenario)


def test_a_callback_added_late_hears_of_the_deaths_already_known() -> None:
    async def scenario(tasks: list[Bootstrapped]) -> list[tuple[int, str]]:
        await tasks[5].aio.fail("a bad batch")
        await until(lambda: 5 in tasks[0].failures(), 4.0)
        heard: list[tuple[int, str]] = []
        tasks[0].on_failure(lambda rank, why: heard.append((rank, why)))
        return heard

    assert run(scenario) == [(5, "a bad batch")]


def test_tasks_that_end_normally_are_no_failure() -> None:
    async def scenario(tasks: list[Bootstrapped]) -> dict[int, str]:
        for t in tasks[1:]:  # every task but the root leaves, leaders before their tasks too
            await t.aio.stop(0.1)
        await asyncio.sleep(2.0)  # longer than the patience
        return tasks[0].failures()

    assert run(scenario) == {}


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




def test_a_task_that_fails_the_moment_its_bootstrap_returns_is_heard_long_before_any_patience() -> None:
    """Its call up and the calls of the tasks below it may not be made yet (a command that cannot
    start fails within milliseconds): it waits for them, so the others hear why, not its silence."""
    async def scenario(tasks: list[Bootstrapped]) -> list[float]:
        took = []
        others = [t for t in tasks if t.rank not in (2, 5)]
        for failing in (tasks[2], tasks[5]):  # a leader (node 1's), and a task under node 2's leader
            await failing.aio.fail(f"rank {failing.rank} cannot run its command")
            took.append(await until(lambda r=failing.rank: all(r in t.failures() for t in others), 5.0))
            assert {t.failures()[failing.rank] for t in others} == {f"rank {failing.rank} cannot run its command"}
        return took

    assert all(t < 5.0 for t in run(scenario, patience=30.0))  # type: ignore[union-attr]
