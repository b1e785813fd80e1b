"""One task's rounds after the bootstrap, in one process through the real protocol code: notices, votes."""

from __future__ import annotations

import asyncio

from slurm_resolver.errors import ResolutionError
from slurm_resolver.resolution import resolve
from slurm_resolver.rpc.bootstrap import bootstrap_async
from slurm_resolver.rpc.bootstrapped import Bootstrapped
from slurm_resolver.rpc.network.in_process import LocalNetwork
from slurm_resolver.rpc.simulation.simulate import srun_environ
from slurm_resolver.rpc.trust.seals import AuthMode, Authority
from slurm_resolver.speakers import Speaker

from ..detection.test_watch import run


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


def test_a_root_that_never_comes_is_said_once_by_the_first_child_nodes_leader() -> None:
    """Rank 0 never bootstraps: every task that calls it directly (rank 1 on its node, the leaders of the
    other nodes) fails alike, and only rank 2, the leader of the next node, says it for the job."""
    base = resolve(srun_environ(4, 2), resolves=lambda name: True)

    async def scenario() -> list[BaseException | object]:
        network = LocalNetwork()
        return await asyncio.gather(*(bootstrap_async(base.as_rank(r), exchange="rendezvous", timeout=2,
                                                      environ={}, network=network, heartbeat=None)
                                      for r in range(1, 8)), return_exceptions=True)

    errors = dict(zip(range(1, 8), asyncio.run(scenario())))
    assert all(isinstance(e, ResolutionError) for e in errors.values()), errors
    sayers = [r for r, e in errors.items() if isinstance(e, ResolutionError) and e.said_by(r)]
    assert sayers == [2], {r: (str(e), getattr(e, "speaker", None)) for r, e in errors.items()}
    assert "rank 0 (worker:0 on node1) did not answer" in str(errors[2])


def test_a_round_the_task_above_still_held_open_at_the_deadline_is_said_above() -> None:
    """The task above answered that the round did not end in time: it is alive and says why (or heard it)."""
    from slurm_resolver.rpc.messages import TABLE_ROUND
    from slurm_resolver.rpc.rounds.uplink import Uplink
    from slurm_resolver.rpc.transport import CallFailure, LinkError
    from slurm_resolver.rpc.tree import plan_of

    cluster = resolve(srun_environ(2, 2, rank=3), resolves=lambda name: True)
    uplink = Uplink(cluster, plan_of(cluster, 3, 8), LocalNetwork(), Authority(AuthMode.NONE, "test"), [])
    error = uplink._error(LinkError(CallFailure.DEADLINE, "rank 0 still waited for ranks 2"), 5, TABLE_ROUND)
    assert error.speaker is Speaker.ABOVE and not error.said_by(3)
