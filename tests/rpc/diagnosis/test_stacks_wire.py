"""Stacks' messages: hostile bytes are a malformed message, never anything else; an answer is bounded whatever
the stacks; and an answer fits its subtree only where it counts and names nothing else."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_resolver.rpc.diagnosis.stacks_wire import MOST_ANSWER, decode_ask, decode_stacks, encode_stacks
from slurm_resolver.rpc.messages import WireError
from slurm_resolver.rpc.wire import unwrap
from slurm_resolver.stacks.capture import Frame, ThreadStack
from slurm_resolver.stacks.classes import Stacks


def test_an_answer_is_bounded_whatever_the_stacks() -> None:
    from slurm_resolver.stacks.classes import MOST_CLASSES

    deep = tuple(Frame("/very/long/path/" * 40 + f"{i}.py", i, "f" * 300) for i in range(32))
    stacks = Stacks()
    for rank in range(MOST_CLASSES + 10):
        stacks = stacks | Stacks.of_task(rank, [ThreadStack("main", (*deep, Frame("x.py", rank, "odd")))])
    message = encode_stacks(stacks, b"n" * 16, 0, lambda h: b"")
    assert len(message) < MOST_ANSWER + 4096
    read, _, _ = decode_stacks(unwrap(message)[0], 1 << 20)
    assert len(read.classes) < MOST_CLASSES and len(read.others) == MOST_CLASSES + 10 - len(read.classes)

@settings(max_examples=200)
@given(st.binary(max_size=300))
def test_hostile_bytes_are_refused_as_malformed_never_raised_otherwise(data: bytes) -> None:
    for decode in (decode_ask, lambda d, w: decode_stacks(d, w)):
        try:
            decode(data, 16)
        except WireError:
            pass

@settings(max_examples=200)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40)), max_size=6), st.integers(0, 50),
       st.lists(st.integers(0, 40), max_size=12, unique=True))
def test_an_answer_fits_its_subtree_only_where_it_counts_and_names_nothing_else(
        ranges: list[tuple[int, int]], answered: int, subtree: list[int]) -> None:
    from slurm_resolver.rpc.diagnosis.stacks_wire import beyond
    from slurm_resolver.stacks.classes import Ranks

    ranks = Ranks(tuple((min(a, b), max(a, b)) for a, b in ranges), sum(abs(a - b) + 1 for a, b in ranges))
    stacks = Stacks(silent=ranks, answered=answered)
    fits = beyond(stacks, subtree) is None
    named = {r for first, last in ranks.ranges for r in range(first, last + 1)}
    assert fits == (answered + len(ranks) <= len(subtree) and named <= set(subtree))
