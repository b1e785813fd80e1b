"""A server's coordination state: who may call, a round from the callers' side and the leader's own, notices."""

from __future__ import annotations

import asyncio
import time

import pytest

from slurm_resolver.rpc.messages import TABLE_ROUND, Contribution, Failure, Identity, Records, Round, Source
from slurm_resolver.rpc.rounds.codec import Decision, decision, decode_answer
from slurm_resolver.rpc.rounds.coordinator import Coordinator
from slurm_resolver.rpc.transport import Refusal, Refused
from slurm_resolver.rpc.trust.gate import Gate
from slurm_resolver.rpc.trust.seals import AuthMode, Authority
from slurm_resolver.rpc.wire import unwrap

from ..forge import call_at, join_call


def _keyed() -> Authority:
    authority = Authority(AuthMode.NONE, "a test")
    authority.learn(b"k" * 32)
    return authority


def _coordinator(authority: Authority | None = None, root: bool = True) -> Coordinator:
    """Rank 0 of launch 5.0 on port 8000, gathering rank 1 and the leader of node position 1."""
    return Coordinator(Gate(_identity(), 4, authority or _keyed(), 8000), [Source.task(1), Source.node(1)], root)


def _identity() -> Identity:
    return Identity("5.0", 0, "n0", "worker", 0)


def _refusal(coordinator: Coordinator, messages: list[bytes]) -> Refusal:
    with pytest.raises(Refused) as caught:
        coordinator.open_call(messages[0])
    return caught.value.code


def test_who_may_call_is_decided_from_the_first_message() -> None:
    coordinator, keyed = _coordinator(), _keyed()
    barrier = Round.barrier("b", 0)
    assert _refusal(coordinator, join_call("6.0", barrier, 1, port=8000, authority=keyed)) is Refusal.FOREIGN
    assert _refusal(coordinator, join_call("5.0", barrier, 3, port=8000, authority=keyed)) is Refusal.NOT_LEADER
    assert _refusal(coordinator, join_call("5.0", barrier, 1, port=8001, authority=keyed)) is Refusal.UNAUTHENTICATED
    assert _refusal(coordinator, join_call("5.0", barrier, 1, port=8000)) is Refusal.UNAUTHENTICATED  # no seal
    assert coordinator.gate.refused == 2
    below = _coordinator(root=False)
    assert _refusal(below, join_call("5.0", Round.announce("go"), 1, port=8000, authority=keyed)) is Refusal.INVALID
    assert coordinator.open_call(join_call("5.0", barrier, 1, port=8000, authority=keyed)[0]).source == 1
    # A leader of node position 1 calls with its node, whatever its rank.
    assert coordinator.open_call(join_call("5.0", barrier, 2, node=1, port=8000, authority=keyed)[0]).source == 2


def test_a_server_that_does_not_know_the_key_yet_says_so_and_is_asked_again() -> None:
    coordinator = _coordinator(Authority(AuthMode.NONE, "before the first round"))
    messages = join_call("5.0", Round.barrier("b", 0), 1, port=8000, authority=_keyed())
    assert _refusal(coordinator, messages) is Refusal.UNREADY and coordinator.gate.refused == 0
    first = join_call("5.0", TABLE_ROUND, 1, port=8000)  # the first round needs no key (auth none)
    assert coordinator.open_call(first[0]).round == TABLE_ROUND


def test_a_round_gathers_its_callers_and_this_tasks_own_and_answers_every_caller() -> None:
    async def scenario() -> tuple[Contribution, list[Decision], int]:
        coordinator = _coordinator()
        barrier = Round.vote("v", 0)
        callers = [asyncio.ensure_future(call_at(coordinator, join_call("5.0", barrier, rank, node=node, port=8000,
                                                                        authority=_keyed()), 5))
                   for rank, node in ((1, 0), (2, 1))]
        merged = await coordinator.gather(barrier, Contribution(votes=1), time.monotonic() + 5,
                                          lambda source: Failure.missing_ranks([source.number]))
        coordinator.publish(barrier, decision(Failure(), votes=merged.votes))
        answers = await asyncio.gather(*callers)
        delivered = await coordinator.delivered(barrier, time.monotonic() + 1)
        return merged, [decode_answer(unwrap(a[0])[0], 4).decision(a[1:]) for a in answers], int(delivered)

    merged, outcomes, delivered = asyncio.run(scenario())
    assert merged.votes == 1 and not merged.failure
    assert all(o == decision(Failure(), votes=1) for o in outcomes) and delivered == 1


def test_a_source_that_never_comes_is_covered_and_its_callers_hear_who_is_missing() -> None:
    async def scenario() -> tuple[Contribution, str]:
        coordinator = _coordinator()
        barrier = Round.barrier("b", 0)
        merged = await coordinator.gather(barrier, Contribution(), time.monotonic() + 0.1,
                                          lambda source: Failure.missing_ranks([1 if source == Source.task(1) else 3]))
        coordinator.publish(barrier, decision(merged.failure))
        later = Round.barrier("b", 1)
        gathering = asyncio.ensure_future(coordinator.gather(later, Contribution(), time.monotonic() + 5,
                                                             lambda source: Failure()))
        try:
            await call_at(coordinator, join_call("5.0", later, 1, port=8000, authority=_keyed()), 0.5)
        except Refused as exc:
            return merged, f"{exc.code.value}: {exc.detail}"
        finally:
            gathering.cancel()
        return merged, "answered"

    merged, why = asyncio.run(scenario())
    assert merged.failure.missing == (1, 3)
    assert why.startswith("deadline: ") and "still waited for the leaders of node positions 1" in why


def test_a_second_process_claiming_a_source_with_other_records_is_refused() -> None:
    async def scenario() -> str:
        coordinator = _coordinator()
        round = Round.barrier("b", 0)
        first = asyncio.ensure_future(call_at(coordinator, join_call("5.0", round, 1, port=8000,
                                                                     authority=_keyed()), 5))
        await asyncio.sleep(0.05)
        try:
            await call_at(coordinator, join_call("5.0", round, 1, port=8000, authority=_keyed(),
                                                 records=Records([1], [9000], [9001])), 5)
        except Refused as exc:
            return f"{exc.code.value}: {exc.detail}"
        finally:
            first.cancel()
        return "answered"

    assert asyncio.run(scenario()).endswith("with other records: a second process claims it")


def test_an_announcement_at_the_root_decides_the_notice_for_its_waiters() -> None:
    async def scenario() -> tuple[Decision | None, Decision | None, bool]:
        coordinator = _coordinator()
        notice = Round.notice("go")
        missing = await coordinator.result(notice, time.monotonic() + 0.05)
        await call_at(coordinator, join_call("5.0", Round.announce("go"), 1, port=8000, authority=_keyed()), 1)
        return missing, await coordinator.result(notice, time.monotonic() + 1), coordinator.decided(notice)

    assert asyncio.run(scenario()) == (None, decision(Failure()), True)


def test_a_leader_asks_above_once_for_all_its_notices_waiters() -> None:
    asked: list[Round] = []

    async def above(notice: Round, deadline: float) -> Decision:
        asked.append(notice)
        await asyncio.sleep(0.05)
        return decision(Failure())

    async def scenario() -> list[Decision | None]:
        coordinator = Coordinator(Gate(_identity(), 4, _keyed(), 8000), [Source.task(1)], False, above)
        notice = Round.notice("go")
        coordinator.want(notice, time.monotonic() + 5)
        coordinator.want(notice, time.monotonic() + 5)
        waiter = call_at(coordinator, join_call("5.0", notice, 1, port=8000, authority=_keyed()), 5)
        own = coordinator.result(notice, time.monotonic() + 5)
        answer, result = await asyncio.gather(waiter, own)
        return [decode_answer(unwrap(answer[0])[0], 4).decision(answer[1:]), result]

    assert asyncio.run(scenario()) == [decision(Failure()), decision(Failure())] and asked == [Round.notice("go")]


@pytest.mark.parametrize("mode, shown", [(AuthMode.NONE, True), (AuthMode.SECRET, False)])
def test_the_root_hands_the_launch_key_down_in_the_clear_only_where_callers_prove_nothing(mode: AuthMode,
                                                                                          shown: bool) -> None:
    authority = Authority(mode, "a test", secret=b"s" * 32 if mode is AuthMode.SECRET else None, launch="5.0")
    key = _coordinator(authority).table_key()
    assert (key == authority.key) is shown and (key == b"") is not shown
