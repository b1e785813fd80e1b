"""Failure detection after the bootstrap, in one process through the real protocol code: deaths
reported, closed calls, silent tasks, normal ends, and votes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from unittest.mock import patch

import pytest

from slurm_resolver.resolution import resolve
from slurm_resolver.rpc.bootstrap import bootstrap_async
from slurm_resolver.rpc.bootstrapped import Bootstrapped
from slurm_resolver.rpc.detection.beats import Beat
from slurm_resolver.rpc.detection.deaths import Deaths
from slurm_resolver.rpc.detection.heartbeat import Heartbeat
from slurm_resolver.rpc.detection.processes import Process, Seen
from slurm_resolver.rpc.detection.watch import Watch
from slurm_resolver.rpc.messages import Source
from slurm_resolver.rpc.network.in_process import LocalNetwork
from slurm_resolver.rpc.simulation.simulate import srun_environ
from slurm_resolver.rpc.transport import Refusal, Refused

NODES, PER_NODE = 4, 2  # ranks 0, 2, 4, 6 lead their nodes; 0 is the root


def run(scenario: Callable[[list[Bootstrapped]], Awaitable[object]], heartbeat: float = 0.2,
        patience: float = 1.5, nodes: int = NODES, per_node: int = PER_NODE, fanout: int = 8) -> object:
    """Bootstrap 4 nodes x 2 tasks with failure detection on, then run ``scenario`` on them. Each task names a
    process of its own in its first beat (as in a job: here they share one), so that its leader looks at it
    (through ``seen``, which a scenario stands in for)."""
    with patch.object(Heartbeat, "process", property(lambda self: Process(1_000_000 + self.rank, 1))):
        return _run(scenario, heartbeat, patience, nodes, per_node, fanout)


def _run(scenario: Callable[[list[Bootstrapped]], Awaitable[object]], heartbeat: float, patience: float,
         nodes: int, per_node: int, fanout: int) -> object:
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


def test_a_stopped_task_is_declared_dead_after_the_patience_and_a_quiet_one_never() -> None:
    """Rank 3 sends nothing for seconds: alive (nothing happened, so nothing is said: a job at rest sends no
    beat). Then its process is stopped (what its leader, rank 2 on its node, reads in the kernel): dead after
    about the patience (1.5 s), known to every task."""
    async def scenario(tasks: list[Bootstrapped]) -> None:
        await asyncio.sleep(3.0)  # twice the patience without a word from anyone: no death
        assert all(t.failures() == {} for t in tasks)
        tasks[2]._detector.watch.seen = lambda process: Seen.STOPPED
        others = [t for t in tasks if t.rank != 3]
        took = await until(lambda: all(3 in t.failures() for t in others), 8.0)
        assert "its process is stopped" in tasks[2].failures()[3] and 0.5 < took < 8.0

    run(scenario)


def test_the_root_hands_over_too_and_the_tree_below_moves_its_calls() -> None:
    """3 nodes x 3 tasks, a chain (fan-out 1): node 0 (ranks 0-2) <- node 1 (3-5) <- node 2 (6-8).
    The root leaves, then the leader of node 1: ranks 1 and 4 take over, and every death below
    them is still known to every task left."""
    async def scenario(tasks: list[Bootstrapped]) -> None:
        await until(lambda: all(len(t._detector.deaths.below) == len(t._detector.watch.sources) for t in tasks), 4.0)
        await tasks[0].aio.stop(1.0)
        await until(lambda: tasks[3]._detector.heartbeat.above == 1 and tasks[2]._detector.heartbeat.above == 1, 4.0)
        await tasks[3].aio.stop(1.0)
        await until(lambda: tasks[6]._detector.heartbeat.above == 4 and tasks[5]._detector.heartbeat.above == 4, 4.0)
        assert tasks[4]._detector.heartbeat.above == 1
        await asyncio.sleep(2.0)
        assert all(t.failures() == {} for t in tasks[4:]) and tasks[1].failures() == {}
        await tasks[8].aio.fail("a bad batch on node 2")
        left = [t for t in tasks if t.rank not in (0, 3, 8)]
        await until(lambda: all(8 in t.failures() for t in left), 4.0)
        stopped = tasks[2]._detector.heartbeat.process  # a task on node 0, watched by rank 1 now, is stopped
        tasks[1]._detector.watch.seen = lambda process: Seen.STOPPED if process == stopped else Seen.RUNNING
        await until(lambda: all(2 in t.failures() for t in left if t.rank != 2), 8.0)
        assert "its process is stopped" in tasks[7].failures()[2]

    run(scenario, nodes=3, per_node=3, fanout=1)


def test_a_task_that_never_calls_is_probed_ever_less_often_and_declared_dead_once_its_server_is_gone() -> None:
    """Rank 1 (node 0, led by rank 0) bootstraps but never makes its watch call, as a task on cores far past
    their load may not for minutes: after the grace, its leader probes whether its server still listens, with
    a wait that doubles after each probe that finds it (up to four patiences: never a probe in a loop, each
    a connection its server accepts), and declares it dead once none listens (its process ended)."""
    probes: list[float] = []
    gone = False

    async def listening(self: LocalNetwork, host: str, port: int) -> bool:
        probes.append(time.monotonic())
        return not gone

    async def never(self: Heartbeat) -> None:
        if self.rank != 1:
            await real_run(self)

    async def scenario(tasks: list[Bootstrapped]) -> None:
        nonlocal gone
        await asyncio.sleep(6.0)  # the grace (two patiences: 0.8 s), then a probe each 0.2, 0.4, 0.8, 1.6, 1.6 s
        assert 3 <= len(probes) <= 8, [round(b - a, 2) for a, b in zip(probes, probes[1:])]
        assert not tasks[0].failures()
        gone = True
        await until(lambda: 1 in tasks[0].failures(), 4.0)
        assert "ended before it watched at rank 0: its server is gone" in tasks[0].failures()[1]

    real_run = Heartbeat.run
    with patch.object(Heartbeat, "run", never), patch.object(LocalNetwork, "listening", listening):
        run(scenario, heartbeat=0.1, patience=0.4)


def test_a_call_cut_short_before_its_events_begin_frees_its_place_and_kills_nobody() -> None:
    """A loaded leader's server cuts a watch call short as its first event goes out: the task's next call takes
    its place, nobody is declared dead for it, and the end of that first call, told late, leaves the next one be."""
    async def no_beats() -> AsyncIterator[bytes]:
        await asyncio.Event().wait()
        yield b""  # pragma: no cover - never

    async def scenario(tasks: list[Bootstrapped]) -> None:
        real = tasks[2]._detector.watch  # rank 2 leads node 1, rank 3 below it
        watch = Watch(Deaths(2, real.cluster.placement.node_of), real.cluster, real.plan, real.network, 0.2, 1.5)
        source, first = Source.task(3), Beat(source=3, node=1)
        cut = watch.serve(source, first, no_beats())
        with pytest.raises(Refused) as ending:  # its next call, before the first's end is told: call again
            watch.serve(source, first, no_beats())
        assert ending.value.code is Refusal.BUSY and "previous watch is ending" in ending.value.detail
        watch.unserved(source, cut)
        assert source not in watch.deaths.below and not watch.deaths.failed
        again = watch.serve(source, first, no_beats())  # its next call is taken, not "watched already"
        watch.unserved(source, cut)  # the first call's end told again: the next one keeps its place
        assert source in watch.deaths.below
        reading = asyncio.ensure_future(again.__anext__())  # begun: its end is told as a call's end
        await asyncio.sleep(0.05)
        watch.unserved(source, again)
        assert source in watch.deaths.below and not watch.deaths.failed
        reading.cancel()
        await asyncio.wait({reading})
        await watch.stop()

    run(scenario)


def test_news_told_below_is_written_once_for_every_call_that_tells_it() -> None:
    """The root's calls below (its node's task, the child nodes' leaders) each tell a burst's news: one event is
    written for all of them (each call's queue holds the very same news), not one a call; so does each leader
    below for its node's task (four leaders: four events written, where one a call would be seven)."""
    from slurm_resolver.faults import Cause
    from slurm_resolver.rpc.detection import watch as watch_module
    from slurm_resolver.rpc.messages import News

    written: list[int] = []
    encode = watch_module.encode_event

    def counted(news: list[News]) -> bytes:
        written.append(len(news))
        return encode(news)

    async def scenario(tasks: list[Bootstrapped]) -> None:
        root = tasks[0]._detector
        await until(lambda: len(root.deaths.below) == 4, 5)  # rank 1, and the leaders of nodes 1 to 3
        heard: list[int] = []
        for task in tasks[1:]:
            task.on_failure(lambda rank, why, me=task.rank: heard.append(me))
        with patch.object(watch_module, "encode_event", counted):
            root.deaths.tell_below(News((7,), "a test's news", cause=Cause.CRASHED))
            await until(lambda: len(heard) == len(tasks) - 2, 5)  # all but the root and rank 7 itself
        assert written == [1] * 4

    run(scenario)


def test_a_burst_goes_down_in_two_events_a_call_the_first_death_at_once() -> None:
    """News that comes one by one goes down as it came only at first: what comes within `SPACING` of a call's
    last event waits for its next one, merged (seventeen deaths told one by one: two events a call, the first
    with one death, at once; the next with sixteen, in two reasons of eight ranks)."""
    from slurm_resolver.faults import Cause
    from slurm_resolver.rpc.detection import watch as watch_module
    from slurm_resolver.rpc.detection.deaths import SPACING
    from slurm_resolver.rpc.messages import SHOWN, News

    written: list[tuple[float, list[int]]] = []
    encode = watch_module.encode_event

    def counted(news: list[News]) -> bytes:
        written.append((time.monotonic(), [len(n.failed) for n in news]))
        return encode(news)

    async def scenario(tasks: list[Bootstrapped]) -> None:
        root = tasks[0]._detector
        await until(lambda: len(root.deaths.below) == per_node - 1 + 3, 5)  # its node's tasks, three leaders
        dead = [r for r in range(1, 32) if r % per_node][:2 * SHOWN + 1]  # no leader among them
        heard: dict[int, set[int]] = {t.rank: set() for t in tasks}
        for task in tasks[1:]:
            task.on_failure(lambda rank, why, me=task.rank: heard[me].add(rank))
        with patch.object(watch_module, "encode_event", counted):
            start = time.monotonic()
            root.deaths.tell_below(News((dead[0],), f"rank {dead[0]} died", cause=Cause.CRASHED))
            await until(lambda: all(heard[t.rank] for t in tasks[1:] if t.rank != dead[0]), 5)
            first = time.monotonic() - start
            for rank in dead[1:]:  # one by one, within the spacing
                root.deaths.tell_below(News((rank,), f"rank {rank} died", cause=Cause.CRASHED))
            await until(lambda: all(heard[t.rank] >= set(dead) - {t.rank} for t in tasks[1:]), 5)
        leaders = NODES  # each writes an event once for all its calls below
        assert sorted(len(n) for _, n in written) == [1] * leaders + [2] * leaders
        assert [n for _, n in written if len(n) == 2] == [[SHOWN, SHOWN]] * leaders
        roots = [at for at, _ in written[:1]] + [at for at, n in written if len(n) == 2][:1]
        assert roots[1] - roots[0] >= SPACING * 0.9 and first < SPACING * 4

    per_node = 8
    run(scenario, nodes=NODES, per_node=per_node)


def test_deaths_found_below_go_up_in_two_beats_the_first_at_once() -> None:
    """The same up the tree: a leader that finds seventeen deaths one by one tells its first at once, and the
    others together in its next beat, `SPACING` later."""
    from slurm_resolver.faults import Cause, Fault
    from slurm_resolver.rpc.detection import heartbeat as heartbeat_module
    from slurm_resolver.rpc.detection.deaths import SPACING
    from slurm_resolver.rpc.messages import SHOWN, News

    beats: list[tuple[float, list[int]]] = []
    encode = heartbeat_module.encode_beat

    def counted(news: list[News], progress: object = None) -> bytes:
        if news:
            beats.append((time.monotonic(), [len(n.failed) for n in news]))
        return encode(news, progress)  # type: ignore[arg-type]

    async def scenario(tasks: list[Bootstrapped]) -> None:
        root, leader = tasks[0]._detector, tasks[per_node]._detector  # the leader of node 1, below the root
        await until(lambda: len(root.deaths.below) == per_node - 1 + 3, 5)
        dead = [r for r in range(1, 4 * per_node) if r % per_node and r // per_node != 1][:2 * SHOWN + 1]
        with patch.object(heartbeat_module, "encode_beat", counted):
            leader.deaths.declare(dead[:1], Fault(Cause.CRASHED, f"rank {dead[0]} died"))
            await until(lambda: dead[0] in root.deaths.failed, 5)
            for rank in dead[1:]:  # one by one, within the spacing
                leader.deaths.declare([rank], Fault(Cause.CRASHED, f"rank {rank} died"))
            await until(lambda: set(dead) <= set(root.deaths.failed), 5)
        assert [n for _, n in beats] == [[1], [SHOWN, SHOWN]] and beats[1][0] - beats[0][0] >= SPACING * 0.9

    per_node = 8
    run(scenario, nodes=NODES, per_node=per_node)
