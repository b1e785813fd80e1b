"""What a call is: its row (a shape, the part that answers it, its method, its bounds), the parts of a server
found by class, and the bounds every network checks in one place."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from slurm_resolver.rpc.refusals import LinkError, Refusal, Refused
from slurm_resolver.rpc.shapes import Parts, RoundCall, Shape, announced, round_call, served, stream, unary


class Part:
    """A part of a server, as a row names it."""

    async def answer(self, message: bytes, deadline: float) -> bytes:
        return message.upper()

    async def talk(self, messages: object) -> object:
        yield b"hello"

    world_size = 4

    def open_call(self, first: bytes) -> object:
        return SimpleNamespace(chunks=[b"a"])

    async def join(self, call: object, more: object, deadline: float) -> tuple[object, list[bytes]]:
        return None, []

    def sent(self, round: object) -> None:
        pass


ASK = unary("Ask", Part, Part.answer, most_request=8, most_answer=3)
TALK = stream("Talk", Part, Part.talk)
MEET = round_call("Meet", "MeetBundled", Part)


def test_a_row_says_its_method_its_shape_and_the_part_that_answers() -> None:
    assert (ASK.method, ASK.shape, ASK.part) == ("/slurm_resolver.v4.Coordination/Ask", Shape.UNARY, Part)
    assert (TALK.shape, MEET.shape) == (Shape.STREAM, Shape.ROUND)
    assert isinstance(MEET, RoundCall) and MEET.bundled_method.endswith("/MeetBundled")
    assert served([ASK, TALK, MEET]).keys() == {ASK.method, TALK.method, MEET.method, MEET.bundled_method}
    with pytest.raises(ValueError, match="two calls named Ask"):
        served([ASK, unary("Ask", Part, Part.answer)])


def test_a_servers_part_is_found_by_the_class_its_row_names_and_its_method_by_name() -> None:
    part = Part()
    parts = Parts({Part: part})
    assert asyncio.run(ASK.handler(parts)(b"abc", 0.0)) == b"ABC"
    assert MEET.handler(parts) is part
    with pytest.raises(Refused) as missing:
        Parts({}).of(Part)
    assert missing.value.code is Refusal.NOT_LEADER and "no Part" in missing.value.detail
    assert list(parts) == [part]


def test_the_bounds_are_the_rows_for_every_network() -> None:
    ASK.check_request(b"12345678")
    with pytest.raises(Refused) as long:
        ASK.check_request(b"123456789")
    assert long.value.code is Refusal.INVALID and "more than 8 bytes" in long.value.detail
    assert ASK.check_answer(b"abc") == b"abc"
    with pytest.raises(LinkError, match="answer of more than 3 bytes"):
        ASK.check_answer(b"abcd")
    call = SimpleNamespace(chunks=[b"d1", b"d2"])
    assert announced(call, [b"first", b"c1", b"c2"]) == [b"c1", b"c2"]
    with pytest.raises(Refused, match="not those it announced"):
        announced(call, [b"first", b"c1"])
