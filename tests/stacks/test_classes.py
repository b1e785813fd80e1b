"""Classes of identical stacks: merged up the tree by rank sets, bounded whatever the job's size."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurm_resolver.stacks import classes
from slurm_resolver.stacks.capture import Frame, ThreadStack
from slurm_resolver.stacks.classes import MOST_RANGES, Ranks, Stacks

A, B, C = (Frame("train.py", line, name) for line, name in ((1, "main"), (2, "step"), (3, "load")))


@pytest.mark.parametrize("ranks, text, count", [
    ([], "", 0), ([5], "5", 1), ([0, 1, 2, 5, 7, 8], "0-2,5,7-8", 6), (range(4096), "0-4095", 4096),
    ([*range(1023), *range(1024, 4096)], "0-1022,1024-4095", 4095),
])
def test_ranks_read_as_slurm_writes_ranges(ranks: list[int], text: str, count: int) -> None:
    assert (str(Ranks.of(ranks)), len(Ranks.of(ranks))) == (text, count)


def test_ranks_beyond_the_ranges_kept_are_counted_and_marked() -> None:
    every_other = Ranks.of(range(0, 4 * MOST_RANGES, 2))
    assert len(every_other) == 2 * MOST_RANGES and len(every_other.ranges) == MOST_RANGES
    assert not every_other.complete and str(every_other).endswith(",...")


@given(st.lists(st.sets(st.integers(0, 500), max_size=40), min_size=1, max_size=6))
def test_merging_rank_sets_is_their_union_in_any_order(groups: list[set[int]]) -> None:
    merged = Ranks()
    for group in groups:
        merged = merged | Ranks.of(group)
    union = set().union(*groups)
    if merged.complete:
        assert set(merged) == union and len(merged) == len(union)


def _task(rank: int, *stacks: tuple[Frame, ...]) -> Stacks:
    return Stacks.of_task(rank, [ThreadStack("main", stacks[0]), *(ThreadStack(f"Thread-{i}", s)
                                                                  for i, s in enumerate(stacks[1:]))])


def test_identical_stacks_of_many_tasks_are_one_class_the_rarest_first() -> None:
    merged = Stacks()
    for rank in range(100):
        merged = merged | _task(rank, (A, C) if rank == 42 else (A, B))
    merged = merged | Stacks.silent_tasks([100, 101])
    assert [(c.frames, str(c.ranks)) for c in merged.classes] == [((A, C), "42"), ((A, B), "0-41,43-99")]
    assert (merged.answered, len(merged.silent), merged.tasks) == (100, 2, 102)


def test_a_pools_identical_threads_count_once_for_their_task() -> None:
    one = _task(7, (A,), (B,), (B,), (B,))
    assert sorted(len(c.ranks) for c in one.classes) == [1, 1]


def test_what_a_leader_sends_grows_with_distinct_stacks_never_with_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(classes, "MOST_CLASSES", 8)
    merged = Stacks()
    for rank in range(2000):
        merged = merged | _task(rank, (A, Frame("train.py", 100 + rank % 20, "step")))
    kept = sum(len(c.ranks) for c in merged.classes)
    assert len(merged.classes) == 8 and kept + len(merged.others) == merged.answered == 2000
    assert all(len(c.ranks.ranges) <= MOST_RANGES for c in merged.classes)
