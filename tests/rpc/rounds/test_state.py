"""The rounds a server keeps: contributed to, closed, decided; claimed once, forgotten when abandoned, bounded in
number (notices kept); each kind's policy."""

from __future__ import annotations

import asyncio
import time

import pytest

from slurm_resolver.rpc.messages import Contribution, Failure, Round, RoundKind, Source
from slurm_resolver.rpc.rounds.codec import Decision, decision
from slurm_resolver.rpc.rounds.state import MOST_OPEN_ROUNDS, MOST_ROUNDS, Conflict, Rounds, RoundsFull

DONE = decision(Failure())


def test_a_round_is_claimed_once_and_not_once_decided() -> None:
    rounds = Rounds()
    assert rounds.claim(Round.notice("done")) and not rounds.claim(Round.notice("done"))
    rounds.publish(Round.barrier("other", 0), DONE)
    assert not rounds.claim(Round.barrier("other", 0)) and rounds.decided(Round.barrier("other", 0))
    assert not rounds.decided(Round.barrier("never", 0))


def test_a_round_only_callers_opened_is_forgotten_when_they_give_up() -> None:
    rounds = Rounds()
    ahead, mine = Round.barrier("ahead", 0), Round.barrier("mine", 0)
    rounds.for_caller(ahead, 4)
    rounds.wait(ahead)
    rounds.gave_up(ahead)
    assert ahead not in rounds and rounds.open == 0
    rounds.start(mine)  # this task is in it: kept
    rounds.wait(mine)
    rounds.gave_up(mine)
    assert mine in rounds and rounds.open == 1


def test_callers_meet_the_bounds() -> None:
    rounds = Rounds()
    for i in range(MOST_OPEN_ROUNDS):
        rounds.for_caller(Round.barrier("r", i), 4)
    with pytest.raises(RoundsFull, match="rounds are open"):
        rounds.for_caller(Round.barrier("one-more", 0), 4)
    rounds.for_caller(Round.barrier("r", 0), 4)  # a known round still takes callers
    for _ in range(4):
        rounds.wait(Round.barrier("r", 1))
    with pytest.raises(RoundsFull, match="4 callers already wait"):
        rounds.for_caller(Round.barrier("r", 1), 4)


def test_beyond_the_most_rounds_the_oldest_finished_are_forgotten_but_notices_kept() -> None:
    rounds = Rounds()
    rounds.publish(Round.notice("ready"), DONE)
    for i in range(MOST_ROUNDS + 1):
        rounds.publish(Round.barrier("barrier", i), DONE)
    assert len(rounds) <= MOST_ROUNDS and Round.notice("ready") in rounds
    assert Round.barrier("barrier", 0) not in rounds and Round.barrier("barrier", MOST_ROUNDS) in rounds
    assert rounds.open == 0


def test_a_result_and_its_delivery_are_awaited_with_a_deadline() -> None:
    async def scenario() -> tuple[object, object, bool]:
        rounds = Rounds()
        loop = asyncio.get_running_loop()
        late, soon = Round.barrier("late", 0), Round.barrier("soon", 0)
        missing = await rounds.result(late, loop.time() + 0.05)
        loop.call_later(0.05, rounds.publish, soon, Decision(Failure.of("r")))
        found = await rounds.result(soon, loop.time() + 2)
        rounds.wait(soon)
        loop.call_later(0.05, rounds.sent, soon)
        return missing, found, await rounds.delivered(soon, loop.time() + 2)

    assert asyncio.run(scenario()) == (None, Decision(Failure.of("r")), True)


def test_a_round_counts_each_sources_contribution_once_until_it_is_closed() -> None:
    async def scenario() -> tuple[list[bool], dict[Source, Contribution], bool]:
        rounds = Rounds(sources=2)
        name = Round.barrier("b", 0)
        one, two = Contribution(votes=1), Contribution(votes=0)
        counted = [rounds.contribute(name, Source.task(1), one), rounds.contribute(name, Source.task(1), one)]
        with pytest.raises(Conflict, match="rank 1 joined round 'b' here already"):
            rounds.contribute(name, Source.task(1), two)  # a second process claims rank 1
        assert not rounds.get(name).complete.is_set()
        counted.append(rounds.contribute(name, Source.node(3), two))
        assert rounds.get(name).complete.is_set()
        received = await rounds.close(name, time.monotonic() + 5)  # complete: at once
        counted.append(rounds.contribute(Round.barrier("b", 0), Source.task(2), one))  # closed: not counted
        return counted, received, rounds.get(name).started

    counted, received, started = asyncio.run(scenario())
    assert counted == [True, False, True, False]
    assert received == {Source.task(1): Contribution(votes=1), Source.node(3): Contribution(votes=0)} and started


def test_a_round_closes_at_its_deadline_with_what_came_and_at_once_without_sources() -> None:
    async def scenario() -> tuple[dict[Source, Contribution], float, dict[Source, Contribution], float]:
        rounds, alone = Rounds(sources=3), Rounds()
        rounds.contribute(Round.vote("v", 0), Source.task(1), Contribution(votes=1))
        start = time.monotonic()
        some = await rounds.close(Round.vote("v", 0), start + 0.2)
        waited = time.monotonic() - start
        start = time.monotonic()
        nothing = await alone.close(Round.vote("v", 0), start + 5)
        return some, waited, nothing, time.monotonic() - start

    some, waited, nothing, at_once = asyncio.run(scenario())
    assert some == {Source.task(1): Contribution(votes=1)} and 0.15 < waited < 3
    assert nothing == {} and at_once < 1


def test_an_announcement_decides_its_notice_and_is_bounded() -> None:
    rounds = Rounds()
    rounds.announced(Round.notice("go"))
    assert rounds.decided(Round.notice("go")) and rounds.get(Round.notice("go")).waiting == 1
    for i in range(MOST_ROUNDS):
        rounds.publish(Round.notice(f"n{i}"), DONE)  # notices are kept
    with pytest.raises(RoundsFull, match="rounds and notices are known"):
        rounds.announced(Round.notice("one-more"))
    rounds.announced(Round.notice("go"))  # a known notice is still heard


@pytest.mark.parametrize("kind, first, to_root, asks_above, kept, carries_table, verb", [
    (RoundKind.TABLE, True, False, False, False, True, "join"),
    (RoundKind.VERIFIED, False, False, False, False, False, "reach"),
    (RoundKind.BARRIER, False, False, False, False, False, "reach"),
    (RoundKind.VOTE, False, False, False, False, False, "reach"),
    (RoundKind.NOTICE, False, False, True, True, False, "hear of"),
    (RoundKind.ANNOUNCE, False, True, False, False, False, "announce"),
])
def test_each_kind_carries_its_policy(kind: RoundKind, first: bool, to_root: bool, asks_above: bool, kept: bool,
                                      carries_table: bool, verb: str) -> None:
    policy = kind.policy
    assert (policy.first, policy.to_root, policy.asks_above, policy.kept, policy.carries_table, policy.verb) == \
        (first, to_root, asks_above, kept, carries_table, verb)
