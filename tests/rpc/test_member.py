"""One task's rounds after the bootstrap, in one process through the real protocol code: notices, votes."""

from __future__ import annotations

import asyncio

from slurm_resolver.resolution import resolve
from slurm_resolver.rpc.bootstrap import bootstrap_async
from slurm_resolver.rpc.bootstrapped import Bootstrapped
from slurm_resolver.rpc.local import LocalNetwork
from slurm_resolver.rpc.simulate import srun_environ

from .test_watch import run


def test_a_notice_reaches_the_roots_own_waiter_after_another_waiter_went_away() -> None:
    """Rank 1 waits for a notice at the root and goes away (its process died); the root, which
    waits for the same notice itself, still hears it when rank 2 announces it."""
    base = resolve(srun_environ(1, 3), resolves=lambda name: True)

    async def scenario() -> str:
        network = LocalNetwork()
        tasks = await asyncio.gather(*(bootstrap_async(base.as_rank(r), exchange="rendezvous", timeout=10,
                                                       environ={}, network=network, heartbeat=None)
                                       for r in range(3)))
        root = asyncio.ensure_future(tasks[0].aio.wait_for("done", 5))
        gone = asyncio.ensure_future(tasks[1].aio.wait_for("done", 5))
        await asyncio.sleep(0.2)
        gone.cancel()  # its call ends, as when its process dies
        await asyncio.sleep(0.2)
        await tasks[2].aio.announce("done", 5)
        await asyncio.wait_for(root, 3)
        await asyncio.gather(*(t.aio.stop(0) for t in tasks))
        return "heard"

    assert asyncio.run(scenario()) == "heard"

def test_a_vote_is_yes_everywhere_when_any_task_votes_yes() -> None:
    async def scenario(tasks: list[Bootstrapped]) -> list[list[bool]]:
        first = await asyncio.gather(*(t.aio.vote("stop", t.rank == 7) for t in tasks))
        second = await asyncio.gather(*(t.aio.vote("stop", False) for t in tasks))
        return [list(first), list(second)]

    first, second = run(scenario)  # type: ignore[misc]
    assert first == [True] * 8 and second == [False] * 8
