"""A task's side of the watch: it follows its call up, declares a silent or vanished task above dead, blames
nobody for its own pause, and moves its call when the task above hands over."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from unittest.mock import patch

import pytest

from slurm_resolver.rpc.bootstrapped import Bootstrapped
from slurm_resolver.rpc.detection.heartbeat import Heartbeat
from slurm_resolver.rpc.detection.processes import Seen
from slurm_resolver.rpc.messages import Source
from slurm_resolver.rpc.network.in_process import LocalNetwork
from slurm_resolver.rpc.transport import CallFailure, LinkError, Refusal, Refused

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


async def _dies(task: Bootstrapped) -> None:
    """``task``'s process dies: it says nothing, and every call to it and from it breaks."""
    served, task._served, detector, task._detector = task._served, None, task._detector, None
    assert served is not None and detector is not None and detector._beating is not None
    detector.deaths.leaving = True
    await detector.watch.stop()
    detector._beating.cancel()
    await served.stop(0)


def _watching(tasks: list[Bootstrapped]) -> bool:
    return all(len(t._detector.deaths.below) == len(t._detector.watch.sources) for t in tasks)


def test_a_leader_that_dies_is_replaced_by_its_nodes_lowest_task_and_the_tree_below_stays_watched() -> None:
    """A chain (fan-out 1): node 0 (ranks 0, 1) <- node 1 (2, 3) <- node 2 (4, 5). Rank 2 dies: rank 3, on its node,
    watches in its place (on the root, for node 1), and node 2's leader moves its call to rank 3; a later death on
    node 2 is still known to every task (before, node 2 watched nobody once rank 2 died)."""
    async def scenario(tasks: list[Bootstrapped]) -> None:
        await until(lambda: _watching(tasks), 4.0)
        await _dies(tasks[2])
        living = [t for t in tasks if t.rank != 2]
        await until(lambda: all(2 in t.failures() for t in living), 3.0)
        beats = {t.rank: t._detector.heartbeat for t in living}
        await until(lambda: beats[3].above == 0 and beats[3].answered and beats[4].above == 3 and beats[4].answered,
                    4.0)
        successor = tasks[3]._detector.watch
        assert Source.node(2) in successor.sources and Source.task(4) not in successor.sources
        await tasks[5].aio.fail("out of memory on node 2")
        await until(lambda: all(5 in t.failures() for t in living if t.rank != 5), 4.0)
        assert tasks[0].failures()[5] == "out of memory on node 2"
        assert all(set(t.failures()) == {2, 5} for t in living if t.rank != 5), [t.failures() for t in living]

    run(scenario, nodes=3, per_node=2, fanout=1)


def test_a_node_that_dies_whole_leaves_its_child_node_to_the_node_above_it() -> None:
    """The same chain; node 1 dies whole (ranks 2 and 3, as a node without power): node 2's leader moves its call to
    the root, which takes it (its child node's leader died); a later death on node 2 is still known to the root's
    node."""
    async def scenario(tasks: list[Bootstrapped]) -> None:
        await until(lambda: _watching(tasks), 4.0)
        root = tasks[0]._detector.watch
        assert not root.adopts(2)  # node 1's leader lives: node 2's call goes there
        await asyncio.gather(_dies(tasks[2]), _dies(tasks[3]))
        await until(lambda: 2 in tasks[0].failures() and 2 in tasks[4].failures(), 3.0)
        beat = tasks[4]._detector.heartbeat
        await until(lambda: beat.above == 0 and beat.answered, 4.0)
        assert Source.node(2) in root.sources and not root.adopts(0) and not root.adopts(3) and not root.adopts(-1)
        await tasks[5].aio.fail("out of memory on node 2")
        await until(lambda: all(5 in tasks[r].failures() for r in (0, 1, 4)), 4.0)
        assert tasks[1].failures()[5] == "out of memory on node 2"

    run(scenario, nodes=3, per_node=2, fanout=1)


def test_a_stopped_leader_whose_call_stays_open_is_replaced_at_its_parent_by_its_nodes_lowest_task() -> None:
    """The chain again; rank 2 (node 1's leader) is stopped (SIGSTOP, or its node without power): its call to the root
    stays open, as nothing closes it. Rank 3 sees its process stopped and takes its place: the root, which found rank 2
    silent itself, ends rank 2's call and takes rank 3's for node 1 (before, it refused it, "watched already", and
    node 1 and node 2 watched nobody); node 2's leader moves its call to rank 3, and a later death on node 2 is known
    to every living task."""
    async def scenario(tasks: list[Bootstrapped]) -> None:
        await until(lambda: _watching(tasks), 4.0)
        leader = tasks[2]
        stopped_call = tasks[0]._detector.watch._reading[Source.node(1)]  # what reads rank 2's call at the root
        leader._detector.deaths.declare = lambda *args, **kwargs: None  # stopped: it says nothing
        tasks[3]._detector.heartbeat.seen = lambda process: Seen.STOPPED  # what rank 3 reads of rank 2's process
        tasks[0]._member.uplink.network.freeze(leader.cluster.task(2).host, leader.server.port)
        living = [t for t in tasks if t.rank != 2]
        await until(lambda: all(2 in t.failures() for t in living), 8.0)
        beats, root = {t.rank: t._detector.heartbeat for t in living}, tasks[0]._detector.watch
        await until(lambda: beats[3].above == 0 and beats[3].answered and beats[4].above == 3 and beats[4].answered,
                    8.0)
        assert root._holders[Source.node(1)] == 3 and Source.node(1) in root.deaths.below
        assert stopped_call.done() and root._reading[Source.node(1)] is not stopped_call  # rank 2's call ended
        await tasks[5].aio.fail("out of memory on node 2")
        await until(lambda: all(5 in t.failures() for t in living if t.rank != 5), 4.0)
        assert all(set(t.failures()) == {2, 5} for t in living if t.rank != 5), [t.failures() for t in living]

    run(scenario, nodes=3, per_node=2, fanout=1)


def test_a_node_without_power_is_declared_dead_whole_and_its_child_node_watched_from_above() -> None:
    """The chain again; node 1 loses power (ranks 2 and 3 silent: no connection, no ping answered). The root finds its
    leader silent and then its other task (before, only rank 2 was declared: nobody watched rank 3); node 2's leader,
    told by the root, asks rank 3 to take its call, finds it silent too, and calls the root, which takes it. A later
    death on node 2 is known to every living task."""
    async def scenario(tasks: list[Bootstrapped]) -> None:
        await until(lambda: _watching(tasks), 4.0)
        network = tasks[0]._member.uplink.network
        for rank in (2, 3):
            tasks[rank]._detector.deaths.declare = lambda *args, **kwargs: None  # it says nothing
            network.freeze(tasks[rank].cluster.task(rank).host, tasks[rank].server.port)
        living = [t for t in tasks if t.rank not in (2, 3)]
        await until(lambda: all({2, 3} <= set(t.failures()) for t in living), 10.0)
        assert "more of node2's tasks stopped answering with" in tasks[0].failures()[3], tasks[0].failures()
        beat = tasks[4]._detector.heartbeat
        await until(lambda: beat.above == 0 and beat.answered, 10.0)
        await tasks[5].aio.fail("out of memory on node 2")
        await until(lambda: all(5 in t.failures() for t in living if t.rank != 5), 4.0)
        assert all(set(t.failures()) == {2, 3, 5} for t in living if t.rank != 5), [t.failures() for t in living]

    run(scenario, nodes=3, per_node=2, fanout=1)


def _stopped_with_its_leader(tasks: list[Bootstrapped], leader: int, other: int, witness: int) -> None:
    """A node's ``leader`` and ``other`` task stopped together (SIGSTOP, a debugger holding both): they say nothing,
    their servers take no call, ``other``'s heartbeat stands still; ``witness``, on their node, reads the leader's
    process stopped."""
    network = tasks[0]._member.uplink.network
    for rank in (leader, other):
        tasks[rank]._detector.deaths.declare = lambda *args, **kwargs: None
        network.freeze(tasks[rank].cluster.task(rank).host, tasks[rank].server.port)
    tasks[other]._detector._beating.cancel()
    tasks[witness]._detector.heartbeat.seen = lambda process: Seen.STOPPED


def test_a_task_stopped_with_its_leader_is_named_by_the_successor_it_never_called() -> None:
    """Node 1 (ranks 3, 4, 5) below the root's node: its leader (rank 3) and rank 5 are stopped together (SIGSTOP, a
    debugger holding both). Rank 4 sees its leader stopped and takes its place; rank 5 never moves its call there, and
    its server still takes connections but answers no ping: rank 4 names it, and every living task hears. Before,
    rank 4 probed rank 5's port for ever and nobody named it (the root's look at node 1's other tasks ends once rank 4
    calls for the node)."""
    async def scenario(tasks: list[Bootstrapped]) -> None:
        await until(lambda: _watching(tasks), 4.0)
        _stopped_with_its_leader(tasks, 3, 5, witness=4)
        living = [t for t in tasks if t.rank not in (3, 5)]
        await until(lambda: all({3, 5} <= set(t.failures()) for t in living), 15.0)
        assert "never watched at rank 4, which took its node's leader's place" in tasks[4].failures()[5], \
            tasks[4].failures()
        assert all(set(t.failures()) == {3, 5} for t in living), [t.failures() for t in living]

    run(scenario, nodes=2, per_node=3)


def test_where_the_lower_tasks_were_stopped_with_their_leader_the_lowest_living_task_takes_its_place() -> None:
    """A chain of 3 nodes of 3 tasks; node 1's leader (rank 3) and rank 4 are stopped together. Rank 5 sees its leader
    stopped and calls rank 4, the lowest task left, to take its call; rank 4 answers nothing, so rank 5 takes the
    leader's place itself: it watches on the root for node 1, and a later death on node 2 is known to every living
    task. Before, rank 5 stopped watching (nobody watched it for the rest of the job)."""
    async def scenario(tasks: list[Bootstrapped]) -> None:
        await until(lambda: _watching(tasks), 4.0)
        _stopped_with_its_leader(tasks, 3, 4, witness=5)
        living = [t for t in tasks if t.rank not in (3, 4)]
        await until(lambda: all({3, 4} <= set(t.failures()) for t in living), 15.0)
        beats, root = {t.rank: t._detector.heartbeat for t in living}, tasks[0]._detector.watch
        await until(lambda: beats[5].above == 0 and beats[5].answered and beats[6].above in (0, 5)
                    and beats[6].answered, 15.0)  # node 2's leader: the root adopts it where rank 4 did not take it
        assert root._holders[Source.node(1)] == 5
        await tasks[7].aio.fail("out of memory on node 2")
        await until(lambda: all(7 in t.failures() for t in living if t.rank != 7), 4.0)
        assert all(set(t.failures()) == {3, 4, 7} for t in living if t.rank != 7), [t.failures() for t in living]

    run(scenario, nodes=3, per_node=3, fanout=1)


def test_where_the_lower_task_dies_between_its_probe_and_the_call_the_next_takes_the_leaders_place() -> None:
    """Node 1 (ranks 3, 4, 5); rank 3 dies, and rank 4 a moment later: it still listened when rank 5 looked for the
    tasks of its node (a process's sockets close one by one as it ends), and is gone when rank 5 calls it. Rank 5
    takes the leader's place and watches on the root (a review finding: it stopped watching, a refused connection
    being taken for a living task that took not the call)."""
    async def scenario(tasks: list[Bootstrapped]) -> None:
        await until(lambda: _watching(tasks), 4.0)
        beat = tasks[5]._detector.heartbeat
        listening = beat._listening

        async def probed(position: int, dead: int, first: bool = False) -> list[int]:
            found = await listening(position, dead, first)
            if 4 in found and tasks[4]._detector is not None:
                await _dies(tasks[4])  # listening when probed, gone when called
            return found

        beat._listening = probed  # type: ignore[method-assign]
        await _dies(tasks[3])
        await until(lambda: beat.above == 0 and beat.answered, 8.0)
        assert tasks[5]._detector.watch._succeeded and tasks[0]._detector.watch._holders[Source.node(1)] == 5

    run(scenario, nodes=2, per_node=3)


def test_two_nodes_without_power_one_below_the_other_are_named_whole_by_the_root() -> None:
    """A chain of 4 nodes; nodes 1 and 2 lose power together (ranks 2 to 5 silent). The root finds rank 2 silent and
    then rank 3; its word to node 2 goes unanswered, so it finds node 2's leader lost over the network, then rank 5
    (`Watch._telling`, then `_bereft`): the root's node names all four."""
    async def scenario(tasks: list[Bootstrapped]) -> None:
        await until(lambda: _watching(tasks), 4.0)
        network = tasks[0]._member.uplink.network
        for rank in (2, 3, 4, 5):
            tasks[rank]._detector.deaths.declare = lambda *args, **kwargs: None  # it says nothing
            network.freeze(tasks[rank].cluster.task(rank).host, tasks[rank].server.port)
        await until(lambda: all({2, 3, 4, 5} <= set(tasks[r].failures()) for r in (0, 1)), 15.0)
        assert "more of node3's tasks stopped answering with" in tasks[0].failures()[5], tasks[0].failures()
        assert set(tasks[0].failures()) == {2, 3, 4, 5}

    run(scenario, nodes=4, per_node=2, fanout=1)


def test_a_second_call_for_a_node_is_refused_while_its_holder_lives() -> None:
    """The root takes one call for node 1: a second, from its leader again, is refused (one call a task); one from
    another task of node 1, while its leader lives, is asked to call again (it is no successor yet); one from a task
    of another node, never."""
    from slurm_resolver.rpc.detection.beats import Beat

    async def scenario(tasks: list[Bootstrapped]) -> None:
        await until(lambda: _watching(tasks), 4.0)
        root, key = tasks[0]._detector.watch, tasks[0].cluster.launch.key

        async def beats() -> AsyncIterator[bytes]:
            await asyncio.Event().wait()
            yield b""  # pragma: no cover - never

        for caller, refusal in ((2, Refusal.INVALID), (3, Refusal.BUSY), (4, Refusal.INVALID)):
            beat = Beat(key, caller, 1, b"\0" * 16, tasks[caller].server.port)
            with pytest.raises(Refused) as refused:
                root.serve(Source.node(1), beat, beats())
            assert refused.value.code is refusal, (caller, refused.value)
        assert root._holders[Source.node(1)] == 2 and tasks[0].failures() == {}

    run(scenario, nodes=3, per_node=2, fanout=1)


def test_a_task_whose_two_nodes_above_died_is_taken_by_the_node_above_them() -> None:
    """A chain of 4 nodes; nodes 1 and 2 die whole: node 3's leader finds no task on node 2 nor node 1 to take its
    call, and calls the root, which takes it (its child node's holder died); a later death on node 3 is known to the
    root's node. Before, the root adopted one generation only, and node 3 watched nobody. The root takes no more
    such calls than the square of the fan-out (1 here): one more is refused."""
    async def scenario(tasks: list[Bootstrapped]) -> None:
        await until(lambda: _watching(tasks), 4.0)
        await asyncio.gather(*(_dies(tasks[r]) for r in (2, 3, 4, 5)))
        await until(lambda: 4 in tasks[6].failures() and 2 in tasks[0].failures(), 3.0)
        beat, root = tasks[6]._detector.heartbeat, tasks[0]._detector.watch
        await until(lambda: beat.above == 0 and beat.answered, 10.0)
        assert Source.node(3) in root.sources
        with pytest.raises(Refused) as refused:  # one such call at fan-out 1: the next is told to call further up
            root.adopts(2)
        assert refused.value.code is Refusal.FULL
        await tasks[7].aio.fail("out of memory on node 3")
        await until(lambda: all(7 in tasks[r].failures() for r in (0, 1, 6)), 4.0)
        assert tasks[1].failures()[7] == "out of memory on node 3"

    run(scenario, nodes=4, per_node=2, fanout=1)


def test_an_ended_calls_stream_asked_for_its_first_beat_late_leaves_the_next_call_beating() -> None:
    """gRPC may ask a call's stream for its first beat only after the call ended and the next began (a call refused
    at once, made again): the next call's beats go on (a call's number is taken as it is made; taken at its first
    beat, the late stream ended the next call's beats, and its leader declared this task dead)."""
    from slurm_resolver.faults import Cause, Fault
    from slurm_resolver.rpc.detection.deaths import Deaths
    from slurm_resolver.rpc.messages import News

    async def scenario(tasks: list[Bootstrapped]) -> None:
        real = tasks[5]._detector.heartbeat
        beat = Heartbeat(Deaths(5), real.cluster, 5, real.node, 4, None, real.network, real.authority, 0.2, 1.5,
                         lambda gone: None)
        ended, current = beat._beats(1, b"n" * 16, 1), beat._beats(1, b"m" * 16, 2)
        beat.calls = 2
        await current.__anext__()  # its first beat
        await ended.__anext__()  # the ended call's, asked for late
        beat.deaths.up.put_nowait(News.of([7], Fault(Cause.CRASHED, "killed")))
        assert await asyncio.wait_for(current.__anext__(), 2.0)  # the news, on the call that goes on
        with pytest.raises(StopAsyncIteration):
            await asyncio.wait_for(ended.__anext__(), 2.0)
        assert beat.deaths.up.empty()

    run(scenario)


def test_a_calls_beats_cancelled_as_the_call_ends_end_as_a_stream_does_and_keep_their_news() -> None:
    """gRPC cancels the reader of a call's beats as the call ends (the task above died): news taken for them, waiting
    for its spacing (deaths found below, to tell above), goes up on the next call (it was lost with the call, and the
    job never heard of those deaths from this task), and the beats end as a stream does."""
    from slurm_resolver.faults import Cause, Fault
    from slurm_resolver.rpc.detection.deaths import Deaths
    from slurm_resolver.rpc.messages import News

    async def ended_while_waiting(beats: AsyncIterator[bytes]) -> None:
        waiting = asyncio.ensure_future(beats.__anext__())
        await asyncio.sleep(0.05)
        waiting.cancel()
        with pytest.raises(StopAsyncIteration):
            await waiting

    async def scenario(tasks: list[Bootstrapped]) -> None:
        real = tasks[5]._detector.heartbeat
        beat = Heartbeat(Deaths(5), real.cluster, 5, real.node, 4, None, real.network, real.authority, 0.2, 1.5,
                         lambda gone: None)
        beat.calls = 1
        beats = beat._beats(1, b"n" * 16, 1)
        await beats.__anext__()  # its first beat
        await ended_while_waiting(beats)  # waiting for news
        beat.calls = 2
        beats = beat._beats(1, b"m" * 16, 2)
        await beats.__anext__()
        beat.deaths.up.put_nowait(News.of([7], Fault(Cause.CRASHED, "killed")))
        assert await asyncio.wait_for(beats.__anext__(), 2.0)  # the first news goes at once
        beat.deaths.up.put_nowait(News.of([6], Fault(Cause.CRASHED, "killed too")))
        await ended_while_waiting(beats)  # the next waits for the spacing (0.2 s): the call ends meanwhile
        assert beat.deaths.up.qsize() == 1 and beat.deaths.up.get_nowait().failed == (6,)

    run(scenario)


Call = Callable[[Heartbeat, int, bytes], AsyncIterator[bytes]]


def _cutting(times: int | None) -> tuple[list[int], Call]:
    """A stand-in for `Heartbeat._call` whose first ``times`` calls of rank 5 (None: every one) its leader's
    server cuts short before it answers (gRPC's CANCELLED), and the calls made."""
    cuts: list[int] = []
    real_call = Heartbeat._call

    async def cut() -> AsyncIterator[bytes]:
        raise LinkError(CallFailure.CUT, "CANCELLED: CANCELLED")
        yield b""  # pragma: no cover - an async generator

    def call(self: Heartbeat, above: int, nonce: bytes) -> AsyncIterator[bytes]:
        if self.rank == 5 and (times is None or len(cuts) < times):
            cuts.append(above)
            return cut()
        return real_call(self, above, nonce)

    return cuts, call


def test_a_watch_its_leader_cuts_short_before_answering_is_made_again_and_kills_nobody() -> None:
    """Rank 5's first three watch calls up are cut short by its leader's server before their first event (a loaded
    server whose wait for the first beat ran out as it came): it calls again, and watches; nobody is dead."""
    cuts, call = _cutting(3)

    async def scenario(tasks: list[Bootstrapped]) -> None:
        await until(lambda: Source.task(5) in tasks[4]._detector.deaths.below, 4.0)
        await asyncio.sleep(0.5)
        assert cuts == [4, 4, 4] and all(t.failures() == {} for t in tasks), [t.failures() for t in tasks]

    with patch.object(Heartbeat, "_call", call):
        run(scenario)


def test_a_leader_that_cuts_a_watch_short_and_then_refuses_connections_is_declared_dead() -> None:
    """A call cut short may be a server that is ending: rank 5 calls again only where its leader's port still
    takes connections; here it refuses them (its process ended), and rank 5 declares it dead at once."""
    cuts, call = _cutting(None)

    async def gone(self: LocalNetwork, host: str, port: int) -> bool:
        return True

    async def scenario(tasks: list[Bootstrapped]) -> None:
        await until(lambda: 4 in tasks[5].failures(), 4.0)
        assert cuts == [4], cuts
        assert "server ended rank 5's watch before answering (CANCELLED: CANCELLED), then refused connections" \
            in tasks[5].failures()[4], tasks[5].failures()

    with patch.object(Heartbeat, "_call", call), patch.object(LocalNetwork, "gone", gone):
        run(scenario)


def test_a_stopped_leader_below_the_top_is_pinged_by_its_parent_alone_whose_word_its_child_leaders_take() -> None:
    """Fan-out 2: node 1's leader (rank 2) watches on the root, node 3's leader (rank 6) on rank 2. Only the root
    pings rank 2 (rank 6 does not: one ping an edge of the tree); once rank 2 is stopped (its server frozen), the
    root finds it lost and tells node 3's tasks (`Lost`): rank 6 takes the word, as if it had found the silence
    itself, and tells its node."""
    async def scenario(tasks: list[Bootstrapped]) -> None:
        await until(lambda: tasks[6]._detector.heartbeat.answered, 4.0)
        pinged: list[tuple[str, int]] = []
        network = tasks[0]._member.uplink.network
        real_lost = network.lost

        async def lost(host: str, port: int, patience: float, first: float | None = None) -> str:
            pinged.append((host, port))
            return await real_lost(host, port, patience, first)

        network.lost = lost  # every watch made from now on (none: they are all made) would be seen here
        leader = tasks[2]
        leader._detector.deaths.declare = lambda *args, **kwargs: None  # stopped: it says nothing
        network.freeze(leader.cluster.task(2).host, leader.server.port)
        await until(lambda: all(2 in tasks[r].failures() for r in (0, 1, 6, 7)), 8.0)
        assert "rank 0, on a node above its, found it silent" in tasks[6].failures()[2], tasks[6].failures()
        assert "stopped answering: no answer at" in tasks[0].failures()[2]
        # node 3 watched while told (and node 1's other task, `Watch._bereft`), node 1's leader pinged by nobody else
        assert 6 not in tasks[2]._detector.failed and tasks[6].cluster.endpoint(6) in pinged
        assert leader.cluster.endpoint(2) not in pinged, pinged
        # Rank 3, on node 1, listens but does not know its leader dead (it sees no stopped process here): rank 6 asks
        # it to take its call for `ADOPTING` patiences, then calls the root, which takes it (node 1's holder is dead
        # to it), declaring nobody else: rank 3 answers the root's pings.
        beat = tasks[6]._detector.heartbeat
        await until(lambda: beat.above == 0 and beat.answered, 10.0)
        assert Source.node(3) in tasks[0]._detector.watch.sources
        assert all(set(tasks[r].failures()) == {2} for r in (0, 1, 6, 7)), [t.failures() for t in tasks]

    run(scenario, nodes=4, per_node=2, fanout=2)


def test_a_word_of_silence_is_taken_only_from_the_node_that_watches_on_the_task_above() -> None:
    """`Heartbeat.told` takes a `Lost` about the node of the task it watches on across nodes, from a node above it
    (and a teller on the node it names); the server refuses one not sealed for it."""
    from slurm_resolver.rpc.detection.beats import Lost, encode_lost
    from slurm_resolver.rpc.detection.watch import LOST
    from slurm_resolver.rpc.transport import LinkError

    async def scenario(tasks: list[Bootstrapped]) -> None:
        await until(lambda: tasks[6]._detector.heartbeat.answered, 4.0)
        heartbeat, key = tasks[6]._detector.heartbeat, tasks[6].cluster.launch.key
        port = tasks[6].server.port
        assert not heartbeat.told(Lost(key, 4, 2, port, 2, "node 2 is no parent of node 1"))
        assert not heartbeat.told(Lost(key, 0, 2, port, 2, "rank 0 is not on node 2"))
        assert not heartbeat.told(Lost(key, 0, 0, port, 4, "rank 6 does not watch on rank 4"))
        assert not tasks[2]._detector.heartbeat.told(Lost(key, 0, 0, 0, 0, "the top: pinged from below"))
        assert heartbeat.above == 2 and not heartbeat._word(2).done()
        link = tasks[0]._member.uplink.network.connect(tasks[6].cluster.task(6).host, port)
        forged = encode_lost(Lost(key, 0, 0, port, 2, "forged"), lambda header: b"\0" * 32)
        with pytest.raises(LinkError, match="not a task of this launch"):
            await link.unary(LOST, forged, 2.0)
        assert heartbeat.above == 2 and tasks[6].failures() == {}
        # A word naming another task of node 1 (its leader's successor, as its teller knows it) is about the node.
        assert heartbeat.told(Lost(key, 0, 0, port, 3, "node 1 is silent"))
        await until(lambda: 2 in tasks[6].failures(), 4.0)
        assert "rank 0, on a node above its, found it silent" in tasks[6].failures()[2]

    run(scenario, nodes=4, per_node=2, fanout=2)


def test_a_node_looked_at_for_its_lowest_listening_task_is_probed_up_to_it_alone() -> None:
    """The children of a dead node look at the node above together (after a process of many nodes is killed, about
    two thousand at 16,384 tasks): each probes that node's tasks one after another up to the lowest that listens,
    not every task of it (a connection to a living server costs it an accept); this task's own node is probed whole
    (its lower tasks are candidates in turn)."""
    probed: list[int] = []

    async def scenario(tasks: list[Bootstrapped]) -> None:
        beat = tasks[5]._detector.heartbeat
        network, ranks = beat.network, {beat.cluster.endpoint(r): r for r in range(len(tasks))}

        async def gone(host: str, port: int) -> bool:
            probed.append(ranks[host, port])
            return ranks[host, port] == 0  # rank 0's server is gone: the next is the lowest listening

        with patch.object(network, "gone", gone):
            assert await beat._listening(0, -1, first=True) == [1] and probed == [0, 1]
            probed.clear()
            assert await beat._listening(0, -1) == [1, 2, 3] and sorted(probed) == [0, 1, 2, 3]
            probed.clear()
            assert await beat._listening(1, 4, first=True) == [6] and probed == [6]  # 4 (dead) and 5 (itself) not

    run(scenario, nodes=2, per_node=4)
