"""A task's server put together: each call answered by its part, every part behind one gate."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from slurm_resolver.rpc.handlers import TaskHandlers
from slurm_resolver.rpc.messages import Failure, Identity, Round, Source
from slurm_resolver.rpc.rounds.codec import decision, decode_answer
from slurm_resolver.rpc.transport import Refusal, Refused
from slurm_resolver.rpc.trust.identity import IdentityHandler, decode_identity
from slurm_resolver.rpc.trust.seals import AuthMode, Authority
from slurm_resolver.rpc.wire import unwrap

from .forge import call_at, first_beat, join_call, who_call


def test_each_call_is_answered_by_its_part_behind_one_gate() -> None:
    authority = Authority(AuthMode.NONE, "a test")
    authority.learn(b"k" * 32)
    handlers = TaskHandlers(Identity("5.0", 0, "n0", "worker", 0), 4, authority, 8000, [Source.task(1)], root=True)
    barrier = Round.barrier("b", 0)

    async def scenario() -> tuple[Identity, int, Refusal]:
        said = await handlers.parts.of(IdentityHandler).who(who_call("5.0", 1, 8000, authority), time.monotonic() + 1)
        handlers.rounds.publish(barrier, decision(Failure(), votes=3))
        answer = await call_at(handlers.rounds, join_call("5.0", barrier, 1, port=8000, authority=authority), 1)
        handlers.watched.set(None)  # failure detection off: a watch is refused as such

        async def beats() -> AsyncIterator[bytes]:
            yield first_beat("5.0", 1, port=8000, authority=authority)

        with pytest.raises(Refused) as refused:
            async for _ in handlers.watching.watch(beats()):
                pass
        return decode_identity(unwrap(said)[0])[0], decode_answer(unwrap(answer[0])[0], 4).votes, refused.value.code

    assert asyncio.run(scenario()) == (handlers.identity, 3, Refusal.NOT_LEADER)
    assert all(part.gate is handlers.gate for part in handlers.parts)
