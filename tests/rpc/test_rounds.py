"""The rounds a server keeps: claimed once, forgotten when abandoned, bounded in number (notices kept)."""

from __future__ import annotations

import asyncio

import pytest

from slurm_resolver.rpc.rounds import MOST_OPEN_ROUNDS, MOST_ROUNDS, NOTICE, Rounds, RoundsFull


def test_a_round_is_claimed_once_and_not_once_decided() -> None:
    rounds = Rounds()
    assert rounds.claim("notice:done") and not rounds.claim("notice:done")
    rounds.publish("other", [b"x"])
    assert not rounds.claim("other") and rounds.decided("other") and not rounds.decided("never")


def test_a_round_only_callers_opened_is_forgotten_when_they_give_up() -> None:
    rounds = Rounds()
    rounds.for_caller("ahead", 4)
    rounds.wait("ahead")
    rounds.gave_up("ahead")
    assert "ahead" not in rounds and rounds.open == 0
    rounds.get("mine").started = True  # this task is in it: kept
    rounds.wait("mine")
    rounds.gave_up("mine")
    assert "mine" in rounds and rounds.open == 1


def test_callers_meet_the_bounds() -> None:
    rounds = Rounds()
    for i in range(MOST_OPEN_ROUNDS):
        rounds.for_caller(f"r{i}", 4)
    with pytest.raises(RoundsFull, match="rounds are open"):
        rounds.for_caller("one-more", 4)
    rounds.for_caller("r0", 4)  # a known round still takes callers
    for _ in range(4):
        rounds.wait("r1")
    with pytest.raises(RoundsFull, match="4 callers already wait"):
        rounds.for_caller("r1", 4)


def test_beyond_the_most_rounds_the_oldest_finished_are_forgotten_but_notices_kept() -> None:
    rounds = Rounds()
    rounds.publish(NOTICE + "ready", [b""])
    for i in range(MOST_ROUNDS + 1):
        rounds.publish(f"barrier#{i}", [b""])
    assert len(rounds) <= MOST_ROUNDS and NOTICE + "ready" in rounds
    assert "barrier#0" not in rounds and f"barrier#{MOST_ROUNDS}" in rounds and rounds.open == 0


def test_a_result_and_its_delivery_are_awaited_with_a_deadline() -> None:
    async def scenario() -> tuple[object, object, bool]:
        rounds = Rounds()
        loop = asyncio.get_running_loop()
        missing = await rounds.result("late", loop.time() + 0.05)
        loop.call_later(0.05, rounds.publish, "soon", [b"r"])
        found = await rounds.result("soon", loop.time() + 2)
        rounds.wait("soon")
        loop.call_later(0.05, rounds.sent, "soon")
        return missing, found, await rounds.delivered("soon", loop.time() + 2)

    assert asyncio.run(scenario()) == (None, [b"r"], True)
