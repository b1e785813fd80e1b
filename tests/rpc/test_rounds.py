"""The rounds a server keeps: claimed once, forgotten when abandoned, bounded in number (notices kept)."""

from __future__ import annotations

import asyncio

import pytest

from slurm_resolver.rpc.messages import Failure, Round
from slurm_resolver.rpc.rounds import MOST_OPEN_ROUNDS, MOST_ROUNDS, Rounds, RoundsFull
from slurm_resolver.rpc.wire import Outcome, decide

DONE = decide(Failure())


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
    rounds.get(mine).started = True  # this task is in it: kept
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
        loop.call_later(0.05, rounds.publish, soon, Outcome(Failure.of("r")))
        found = await rounds.result(soon, loop.time() + 2)
        rounds.wait(soon)
        loop.call_later(0.05, rounds.sent, soon)
        return missing, found, await rounds.delivered(soon, loop.time() + 2)

    assert asyncio.run(scenario()) == (None, Outcome(Failure.of("r")), True)
