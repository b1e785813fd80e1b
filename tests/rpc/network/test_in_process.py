"""The in-process network: servers on simulated hosts, links that reach them, what each server handled."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from types import SimpleNamespace
from typing import Any

import pytest

from slurm_resolver.rpc.calls import TABLE
from slurm_resolver.rpc.network.in_process import LocalNetwork
from slurm_resolver.rpc.rounds.coordinator import JOIN
from slurm_resolver.rpc.shapes import Parts
from slurm_resolver.rpc.transport import CallFailure, LinkError, Refusal, Refused
from slurm_resolver.rpc.trust.identity import WHO

from ..forge import standing_in


class Echo:
    """Handlers that answer every call with what it sent, and refuse a first message of b'no'."""

    world_size = 4

    @property
    def parts(self) -> Parts:
        return standing_in(self)

    def __init__(self, port: int) -> None:
        self.port = port

    def open_call(self, first: bytes) -> Any:
        if first == b"no":
            raise Refused(Refusal.INVALID, "said no")
        return SimpleNamespace(first=first, chunks=first.split(b",")[1:])  # announces its chunks

    async def join(self, call: Any, more: Sequence[bytes], deadline: float) -> tuple[Any, list[bytes]]:
        return call.first, [call.first, *more]

    def sent(self, round: Any) -> None:
        pass

    async def who(self, message: bytes, deadline: float) -> bytes:
        return message[::-1]

    async def stacks(self, message: bytes, deadline: float) -> bytes:
        return message[::-1]

    async def watch(self, beats: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        async for beat in beats:
            yield beat


def test_servers_bind_the_first_free_port_and_calls_reach_them_counted() -> None:
    async def scenario() -> tuple[int, int, list[bytes], bytes, bool, int]:
        network = LocalNetwork()
        first = await network.serve("a", [0], Echo, TABLE)
        taken = await network.serve("a", [first.port, first.port + 5], Echo, TABLE)  # the first is taken: the next
        link = network.connect("a", first.port)
        answer = await link.join(JOIN, [b"hello,1", b"more"], 1.0)
        with pytest.raises(LinkError, match="not those it announced"):
            await link.join(JOIN, [b"hello,1"], 1.0)
        who = await link.unary(WHO, b"abc", 1.0)
        await taken.stop()
        return first.port, taken.port, answer, who, await network.listening("a", taken.port), \
            network.stats[("a", first.port)].calls

    first, taken, answer, who, still, calls = asyncio.run(scenario())
    assert first >= 40000 and taken == first + 5
    assert answer == [b"hello,1", b"more"] and who == b"cba" and not still and calls == 3


def test_nobody_listening_and_a_refusal_reach_the_caller_as_link_errors() -> None:
    async def scenario() -> tuple[LinkError, LinkError]:
        network = LocalNetwork()
        served = await network.serve("a", [0], Echo, TABLE)
        with pytest.raises(LinkError) as nobody:
            await network.connect("b", served.port).join(JOIN, [b"x"], 1.0)
        with pytest.raises(LinkError) as refused:
            await network.connect("a", served.port).join(JOIN, [b"no"], 1.0)
        return nobody.value, refused.value

    nobody, refused = asyncio.run(scenario())
    assert nobody.kind is CallFailure.UNAVAILABLE and refused.code is Refusal.INVALID and refused.detail == "said no"


def test_reserved_ports_are_free_ones_and_no_port_left_is_said() -> None:
    async def scenario() -> tuple[int, int]:
        network = LocalNetwork()
        spare = network.reserve("a")
        served = await network.serve("a", [spare], Echo, TABLE)
        return spare, served.port

    spare, port = asyncio.run(scenario())
    assert spare == port
