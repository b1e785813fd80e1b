"""What both sides of failure detection share: the deaths a task knows, where their news goes, the clock."""

from __future__ import annotations

import asyncio
import time

from slurm_resolver.faults import Cause, Fault
from slurm_resolver.rpc.detection.deaths import Deaths, gathered, merged
from slurm_resolver.rpc.messages import MOST_NEWS, REASON, SHOWN, HandOver, News, Source


def test_a_death_found_here_goes_up_and_down_once_and_to_every_callback() -> None:
    async def scenario() -> tuple[list[News], list[tuple[int, ...]], list[tuple[int, str]], dict[int, str]]:
        deaths = Deaths(rank=0)
        below: asyncio.Queue[News] = asyncio.Queue()
        deaths.below[Source.task(1)] = below
        heard: list[tuple[int, str]] = []
        deaths.add_callback(lambda rank, fault: heard.append((rank, fault.words)))
        killed = Fault(Cause.CRASHED, "killed")
        deaths.declare([3, 0, *range(10, 10 + SHOWN)], killed)  # this task itself is never declared
        deaths.declare([3], Fault(Cause.CRASHED, "again"))  # known: no news
        up = [deaths.up.get_nowait() for _ in range(deaths.up.qsize())]
        down = [below.get_nowait().failed for _ in range(below.qsize())]
        return up, down, heard, deaths.failed

    up, down, heard, failed = asyncio.run(scenario())
    assert up == [News((3, *range(10, 10 + SHOWN - 1)), "killed", cause=Cause.CRASHED),
                  News((10 + SHOWN - 1,), "killed", cause=Cause.CRASHED)]
    assert down == [n.failed for n in up] and len(heard) == SHOWN + 1 and set(failed) == {3, *range(10, 10 + SHOWN)}


def test_a_death_heard_from_above_goes_down_only_and_late_callbacks_hear_the_known() -> None:
    async def scenario() -> tuple[int, list[tuple[int, str]], int]:
        deaths = Deaths(rank=4)
        deaths.declare([7], Fault(Cause.SILENT, "node lost"), from_above=True)
        heard: list[tuple[int, str]] = []
        deaths.add_callback(lambda rank, fault: heard.append((rank, fault.words)))
        return deaths.up.qsize(), heard, len(deaths.missed())

    assert asyncio.run(scenario()) == (0, [(7, "node lost")], 1)


def test_a_task_that_starts_watching_late_is_told_every_death_known_in_news_of_at_most_shown_ranks() -> None:
    """A call made after a burst (a task whose task above died, a successor's tasks) hears every death known, in the
    order heard: this task's own failure first, then news of up to `SHOWN` ranks for each recorded fault."""
    deaths = Deaths(rank=0)
    burst, other = Fault(Cause.CRASHED, "killed"), Fault(Cause.SILENT, "node lost")
    deaths.declare(list(range(1, 2 * SHOWN + 3)), burst)
    deaths.declare([100], other, from_above=True)
    deaths.declare([101], other)
    deaths.own = Fault(Cause.REPORTED, "out of memory")
    missed = deaths.missed()
    assert [n.failed for n in missed] == [(0,), tuple(range(1, SHOWN + 1)), tuple(range(SHOWN + 1, 2 * SHOWN + 1)),
                                          (2 * SHOWN + 1, 2 * SHOWN + 2), (100,), (101,)]
    assert [n.reason for n in missed] == ["out of memory", "killed", "killed", "killed", "node lost", "node lost"]
    assert all(len(n.failed) <= SHOWN for n in missed)


def test_news_heard_is_passed_on_as_it_came_and_recorded_once_for_all_its_ranks() -> None:
    """A burst reaches every task of the job: the news each hears goes to the tasks below as the very object it
    came as (where every death in it is new), and its deaths share one recorded fault (each rank's is made where
    asked: `faults()`, a callback)."""
    async def scenario() -> tuple[list[News], Deaths]:
        deaths = Deaths(rank=0, node_of=lambda rank: f"node{rank // 4}")
        below: asyncio.Queue[News] = asyncio.Queue()
        deaths.below[Source.task(1)] = below
        deaths.declare([5], Fault(Cause.CRASHED, "known"), from_above=True)
        for news in told:
            deaths.heard(news, "reported dead", from_above=True)
        return [below.get_nowait() for _ in range(below.qsize())], deaths

    told = [News((8, 9), "killed", cause=Cause.CRASHED), News((5, 12), "again", cause=Cause.CRASHED),
            News((13,), "")]
    down, deaths = asyncio.run(scenario())
    assert down[1] is told[0] and down[2] == News((12,), "again", cause=Cause.CRASHED)  # 5 was known: made anew
    assert down[3] == News((13,), "reported dead")  # no words came: the default's, told below
    assert deaths.failed[8] is deaths.failed[9] and deaths.failed[8].rank is None
    assert [(f.rank, f.node, f.words) for f in deaths.faults().values()][1:3] == [(8, "node2", "killed"),
                                                                                  (9, "node2", "killed")]


def test_a_callback_that_raises_stops_nothing() -> None:
    async def scenario() -> dict[int, Fault]:
        deaths = Deaths(rank=0)

        def broken(rank: int, fault: Fault) -> None:
            raise RuntimeError("a user's bug")

        deaths.add_callback(broken)
        deaths.declare([2], Fault(Cause.EXITED, "gone", 3))
        return deaths.failed

    failed = asyncio.run(scenario())
    assert list(failed) == [2] and (failed[2].cause, failed[2].words, failed[2].status) == (Cause.EXITED, "gone", 3)


def test_each_death_is_recorded_for_its_own_task_node_and_time() -> None:
    async def scenario() -> tuple[dict[int, Fault], list[Fault]]:
        deaths = Deaths(rank=0, node_of=lambda rank: f"node{rank // 4 + 1}")
        heard: list[Fault] = []
        deaths.add_callback(lambda rank, fault: heard.append(fault))
        deaths.declare([3, 5], Fault(Cause.SILENT, "stopped beating"))
        deaths.failing(Fault(Cause.HUNG, "the job hung"))  # this task's own, as its callbacks hear it
        assert all(told.rank is None for told in deaths.failed.values())  # one fault of the news, not one a rank
        return deaths.faults(), heard

    before = time.time()
    failed, heard = asyncio.run(scenario())
    assert [(f.rank, f.node, f.cause) for f in failed.values()] == [(3, "node1", Cause.SILENT),
                                                                    (5, "node2", Cause.SILENT)]
    assert heard == [failed[3], failed[5], heard[2]] and (heard[2].rank, heard[2].node) == (0, "node1")
    assert all(before <= f.at <= time.time() for f in heard)


def test_a_message_gathers_the_news_queued_behind_its_first_up_to_a_bound_and_to_an_end() -> None:
    async def scenario() -> tuple[list[int], list[int], int, list[int], int]:
        queue: asyncio.Queue[News] = asyncio.Queue()
        for rank in range(1, MOST_NEWS + 5):  # as many reasons as a message carries, and more
            queue.put_nowait(News((rank,), "exited", cause=Cause.EXITED, status=rank))
        first = gathered(News((0,), "exited", cause=Cause.EXITED), queue)
        ending: asyncio.Queue[News] = asyncio.Queue()
        for news in (News((7,), "x"), News(leaving=True), News((8,), "after")):
            ending.put_nowait(news)
        ended = gathered(News((6,), "x"), ending)
        burst: asyncio.Queue[News] = asyncio.Queue()
        for rank in range(1, MOST_NEWS * SHOWN + 1):  # deaths of one cause: SHOWN a news on the wire
            burst.put_nowait(News((rank,), f"rank {rank} died", cause=Cause.CRASHED))
        many = gathered(News((0,), "rank 0 died", cause=Cause.CRASHED), burst)
        return ([n.failed[0] for n in first], [len(n.failed) for n in merged(ended)], ending.qsize(),
                [len(n.failed) for n in merged(many)], burst.qsize())

    first, ended, left, many, unsent = asyncio.run(scenario())
    assert first == list(range(MOST_NEWS)) and ended == [2, 0] and left == 1  # the news after an end waits
    assert many == [SHOWN] * MOST_NEWS and unsent == 1


def test_news_of_one_cause_merge_with_their_reasons_and_the_rest_stays_as_it_came() -> None:
    over = News(leaving=True, hand_over=HandOver(3, 0))
    full = News(tuple(range(20, 20 + SHOWN)), "a node's tasks", cause=Cause.SILENT)
    news = [News((1,), "rank 1 died", cause=Cause.CRASHED), full, News((2,), "rank 2 exited", cause=Cause.EXITED,
            status=3), News((4,), "rank 4 died", cause=Cause.CRASHED), News((5,), "x" * REASON, cause=Cause.CRASHED),
            over]
    out = merged(news)
    assert out[0] == News((1, 4, 5), "rank 1 died; rank 4 died; " + "x" * (REASON - 27) + "\u2026",
                          cause=Cause.CRASHED)
    assert len(out[0].reason) == REASON and out[1:] == news[1:3] + [over] and out[1] is full
    assert merged(news[:1])[0] is news[0] and merged([news[0], news[0]]) == [News((1, 1), "rank 1 died",
                                                                                  cause=Cause.CRASHED)]
