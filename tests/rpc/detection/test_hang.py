"""Progress marks ride the heartbeats up the tree, and the root says a hang once: in one process
through the real protocol code (every task's beats, the root's judge, the stacks it gathers)."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from slurm_resolver.errors import ConfigurationError
from slurm_resolver.resolution import resolve
from slurm_resolver.rpc.bootstrap import bootstrap_async
from slurm_resolver.rpc.bootstrapped import Bootstrapped
from slurm_resolver.rpc.network.in_process import LocalNetwork
from slurm_resolver.rpc.options import BootstrapOptions
from slurm_resolver.rpc.simulation.simulate import srun_environ


def _run(scenario, hang_after: float = 1.5, nodes: int = 4, per_node: int = 2):  # type: ignore[no-untyped-def]
    base = resolve(srun_environ(nodes, per_node), resolves=lambda name: True)

    async def every_task() -> object:
        network = LocalNetwork()
        tasks = await asyncio.gather(*(
            bootstrap_async(base.as_rank(r), exchange="rendezvous", timeout=10, environ={}, network=network,
                            heartbeat=0.1, patience=0.6, hang_after=hang_after, fanout=2)
            for r in range(base.world_size)))
        try:
            return await scenario(list(tasks))
        finally:
            await asyncio.gather(*(t.aio.stop(0.1) for t in tasks))

    return asyncio.run(every_task())


async def _marking(tasks: list[Bootstrapped], seconds: float, still: frozenset[int] = frozenset()) -> None:
    start = time.monotonic()
    step = 0
    while time.monotonic() - start < seconds:
        step += 1
        for t in tasks:
            if t.rank not in still or step == 1:
                t.progress(step)
        await asyncio.sleep(0.05)


def test_marks_reach_the_root_from_every_subtree() -> None:
    async def scenario(tasks: list[Bootstrapped]) -> object:
        await _marking(tasks, 0.8)
        return tasks[0]._detector.progress()  # type: ignore[union-attr]

    marks = _run(scenario, hang_after=30)
    assert marks.tasks == 8 and marks.highest - marks.lowest <= 10  # type: ignore[attr-defined]


def test_a_lagging_task_makes_the_root_say_where_every_task_is_and_fail_the_job(
        caplog: pytest.LogCaptureFixture) -> None:
    async def scenario(tasks: list[Bootstrapped]) -> dict[int, dict[int, str]]:
        await _marking(tasks, 3.5, still=frozenset([5]))
        return {t.rank: t.failures() for t in tasks}

    with caplog.at_level(logging.ERROR, "slurm_resolver"):
        failures = _run(scenario)
    said = [r.getMessage() for r in caplog.records if "the job hung" in r.getMessage()]
    assert len(said) == 1, said  # once for the job, by the root
    assert "rank 5 stayed at progress mark 1" in said[0] and "every task's stacks" in said[0]
    assert "stacks of step 4242.0: 8 tasks, 8 answered" in said[0]
    for rank, known in failures.items():  # type: ignore[union-attr]
        if rank == 0:
            continue  # the root's own failure is no death it heard (its callbacks hear it)
        assert 0 in known and "the job hung" in known[0] and "rank 5 (node3)" in known[0], (rank, known)


def test_a_job_that_stands_still_is_said_too() -> None:
    async def scenario(tasks: list[Bootstrapped]) -> dict[int, str]:
        await _marking(tasks, 0.3)
        await asyncio.sleep(2.5)  # every task stuck
        return tasks[3].failures()

    known = _run(scenario)
    assert "no task's progress mark advanced for" in known[0], known  # type: ignore[index]


def test_without_marks_no_hang_is_said_before_the_time() -> None:
    async def scenario(tasks: list[Bootstrapped]) -> dict[int, str]:
        await _marking(tasks, 1.0)
        return tasks[3].failures()

    assert _run(scenario, hang_after=3.0) == {}


@pytest.mark.parametrize("options, message", [
    ({"hang_after": 3, "heartbeat": 0}, "needs failure detection"),
    ({"hang_after": 4, "patience": 5}, "longer than its patience"),
    ({"hang_after": -1}, "hang_after=-1 is not a number of seconds"),
])
def test_a_hang_needs_the_heartbeats_and_a_time_beyond_their_patience(options: dict[str, float],
                                                                     message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        BootstrapOptions(**options)  # type: ignore[arg-type]
