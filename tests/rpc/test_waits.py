"""Waiting cheaply: a flag that stands for asyncio.Event, a wait with a deadline."""

from __future__ import annotations

import asyncio
import time

import pytest

from slurm_resolver.rpc.waits import Flag, wait_until


def test_a_flag_wakes_its_waiters_as_an_event_does_and_holds_no_list_without_one() -> None:
    """`Flag` stands for asyncio.Event in every round: set wakes every waiter, a waiter that is cancelled
    (its deadline) leaves, clear makes the next wait block; no waiter, no list (what it saves)."""
    async def scenario() -> tuple[list[bool], bool, bool, bool]:
        flag = Flag()
        assert flag._waiters is None and not flag.is_set()
        waiters = [asyncio.ensure_future(flag.wait()) for _ in range(3)]
        cancelled = asyncio.ensure_future(flag.wait())
        await asyncio.sleep(0)
        cancelled.cancel()
        await asyncio.sleep(0)
        flag.set()
        woken = list(await asyncio.gather(*waiters))
        flag.clear()
        blocked = not await wait_until(flag, time.monotonic() + 0.05)
        flag.set()
        return woken, cancelled.cancelled(), blocked, await wait_until(flag, time.monotonic() + 0.05) \
            and flag._waiters is None

    woken, cancelled, blocked, set_again = asyncio.run(scenario())
    assert woken == [True, True, True] and cancelled and blocked and set_again


def test_a_value_that_comes_later_comes_once_and_is_waited_for_within_a_deadline() -> None:
    from slurm_resolver.rpc.waits import Later

    async def scenario() -> tuple[object, bool, object, bool]:
        later = Later[str]()
        early = await later.wait(time.monotonic() + 0.05)  # not yet: None at the deadline
        came_before = later.came
        asyncio.get_running_loop().call_later(0.02, later.set, "settled")
        return early, came_before, await later.wait(time.monotonic() + 5), later.came

    assert asyncio.run(scenario()) == (None, False, "settled", True)
    once = Later[None]()
    once.set(None)
    assert once.came and once.value is None  # a value of None came: "off", not "not yet"
    with pytest.raises(RuntimeError, match="came twice"):
        once.set(None)
