"""The contract between the protocol and a network: refusals as a caller sees them, and asking again."""

from __future__ import annotations

import asyncio
import time

import pytest

from slurm_resolver.rpc.transport import (
    CallFailure,
    Hedged,
    LinkError,
    Refusal,
    Refused,
    end_call,
    hedged,
    retrying,
    within,
)


@pytest.mark.parametrize("code, kind, again", [
    (Refusal.DEADLINE, CallFailure.DEADLINE, False), (Refusal.INVALID, CallFailure.REFUSED, False),
    (Refusal.UNREADY, CallFailure.REFUSED, True), (Refusal.BUSY, CallFailure.REFUSED, True),
    (Refusal.UNAUTHENTICATED, CallFailure.REFUSED, False),
])
def test_a_refusal_reaches_the_caller_with_its_code_and_whether_to_ask_again(code: Refusal, kind: CallFailure,
                                                                             again: bool) -> None:
    seen = LinkError.of(Refused(code, "why" * 300))
    assert (seen.kind, seen.code, seen.again, len(seen.detail)) == (kind, code, again, 500)
    assert LinkError(CallFailure.UNAVAILABLE, "nobody").again


def test_retrying_asks_again_while_it_may_and_gives_up_at_the_deadline() -> None:
    async def scenario() -> tuple[int, str, float]:
        tries = [0]

        async def flaky(left: float) -> int:
            tries[0] += 1
            if tries[0] < 3:
                raise LinkError(CallFailure.REFUSED, "not yet", Refusal.UNREADY)
            return tries[0]

        async def never(left: float) -> int:
            raise LinkError(CallFailure.UNAVAILABLE, "nobody")

        async def refused(left: float) -> int:
            raise LinkError(CallFailure.REFUSED, "no", Refusal.INVALID)

        got = await retrying(flaky, time.monotonic() + 5)
        start = time.monotonic()
        with pytest.raises(LinkError, match="nobody"):
            await retrying(never, start + 0.3)
        waited = time.monotonic() - start
        with pytest.raises(LinkError) as caught:
            await retrying(refused, time.monotonic() + 5)
        return got, caught.value.detail, waited

    got, detail, waited = asyncio.run(scenario())
    assert got == 3 and detail == "no" and 0.25 < waited < 3


def test_ending_a_call_closes_its_stream_whatever_its_state() -> None:
    async def scenario() -> list[str]:
        seen: list[str] = []

        async def stream():  # type: ignore[no-untyped-def]
            try:
                yield b"one"
                yield b"two"
            finally:
                seen.append("closed")

        started = stream()
        await started.__anext__()
        await end_call(started)
        await end_call(object())  # not a stream: nothing to do
        return seen

    assert asyncio.run(scenario()) == ["closed"]


def test_within_answers_or_times_out_in_the_callers_own_task_and_leaves_no_cancellation_behind() -> None:
    async def scenario() -> list[object]:
        seen: list[object] = []
        task = asyncio.current_task()
        assert task is not None
        tasks = len(asyncio.all_tasks())

        async def answer(after: float) -> str:
            seen.append(len(asyncio.all_tasks()) - tasks)  # no task of its own
            await asyncio.sleep(after)
            return "answer"

        with within(1.0):
            seen.append(await answer(0.0))
        with pytest.raises(asyncio.TimeoutError), within(0.05):
            await answer(5.0)
        seen.append(task.cancelling())
        await asyncio.sleep(0.01)  # nothing left pending: the task goes on
        return seen

    assert asyncio.run(scenario()) == [0, "answer", 0, 0]


def test_a_cancellation_from_elsewhere_during_within_stays_a_cancellation() -> None:
    async def scenario() -> str:
        async def waiting() -> None:
            with within(0.05):
                await asyncio.sleep(5.0)

        waiter = asyncio.ensure_future(waiting())
        await asyncio.sleep(0.01)
        waiter.cancel()
        try:
            await waiter
        except asyncio.CancelledError:
            return "cancelled"
        except asyncio.TimeoutError:  # pragma: no cover - the failure this test is for
            return "timed out"
        return "finished"  # pragma: no cover

    assert asyncio.run(scenario()) == "cancelled"


@pytest.mark.parametrize("check, hedge_after, expected", [
    ("", 0.05, ("call answered", [])),  # proven: the call is waited on alone
    ("silent", 0.05, ("hedged: elsewhere", ["hedge"])),  # doubted: the hedge answers first
    ("silent", 2.0, ("call answered", ["hedge"])),  # doubted: the call answers first, the hedge is dropped
    ("raise", 0.05, ("call answered", [])),  # a check that fails changes nothing
], ids=["proven", "hedge first", "call first", "check fails"])
def test_a_slow_call_is_never_given_up_for_suspicion_only_outrun_by_its_hedge(
        check: str, hedge_after: float, expected: tuple[str, list[str]]) -> None:
    """Past ``seconds``, the check runs beside the call (which stays open); only where it doubts the
    server does the hedge run too, and whichever answers first wins."""
    async def scenario() -> tuple[str, list[str]]:
        started: list[str] = []

        async def checking() -> str:
            await asyncio.sleep(0.02)
            if check == "raise":
                raise RuntimeError("the check broke")
            return check

        async def hedge() -> str:
            started.append("hedge")
            await asyncio.sleep(hedge_after)
            return "elsewhere"

        try:
            with hedged(0.05, checking, hedge):
                await asyncio.sleep(0.4)  # the call: slow, as a leader whose round takes long
                return "call answered", started
        except Hedged as won:
            return f"hedged: {won.answer}", started

    assert asyncio.run(scenario()) == expected


def test_a_call_answered_before_its_seconds_leaves_nothing_running_nor_cancelled() -> None:
    async def scenario() -> tuple[int, int]:
        task = asyncio.current_task()
        assert task is not None

        async def never() -> str:
            raise AssertionError("not past its seconds")

        with hedged(0.2, never, never):
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.3)
        return len(asyncio.all_tasks()), task.cancelling()

    assert asyncio.run(scenario()) == (1, 0)
