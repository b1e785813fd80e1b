"""Progress marks merged up the tree, and when they say a job hangs (once)."""

from __future__ import annotations

import functools
import operator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurm_resolver.stacks.classes import MOST_RANGES, Ranks
from slurm_resolver.stacks.progress import HangKind, HangWatch, Marks


@given(st.dictionaries(st.integers(0, 300), st.integers(0, 5), min_size=1, max_size=60), st.randoms())
def test_marks_merged_in_any_grouping_are_the_whole_sets(marks: dict[int, int], order: object) -> None:
    """Subtrees merged in any order and grouping give the job's lowest mark, the ranks at it, the
    highest, and the count, exactly."""
    items = [Marks.of_task(rank, mark) for rank, mark in marks.items()]
    order.shuffle(items)  # type: ignore[attr-defined]
    half = len(items) // 2
    merged = functools.reduce(operator.or_, items[:half], Marks()) | functools.reduce(operator.or_, items[half:],
                                                                                      Marks())
    lowest = min(marks.values())
    assert (merged.lowest, merged.highest, merged.tasks) == (lowest, max(marks.values()), len(marks))
    assert merged.behind == Ranks.of(r for r, m in marks.items() if m == lowest)


def test_marks_stay_bounded_whatever_the_job() -> None:
    merged = functools.reduce(operator.or_, (Marks.of_task(rank, rank % 2) for rank in range(16384)), Marks())
    assert len(merged.behind) == 8192 and len(merged.behind.ranges) == MOST_RANGES and merged.tasks == 16384


@pytest.mark.parametrize("steps, kind, at", [
    # (time, {rank: mark}) as the root sees them; a hang after 10 s
    ([(0, {}), (11, {})], HangKind.STILL, 11),  # nobody ever marked
    ([(0, {0: 1, 1: 1}), (5, {0: 2, 1: 2}), (14, {0: 2, 1: 2}), (15, {0: 2, 1: 2})], HangKind.STILL, 15),
    ([(0, {0: 1, 1: 1}), (4, {0: 2, 1: 1}), (8, {0: 3, 1: 1}), (12, {0: 4, 1: 1})], HangKind.LAGGING, 12),
    ([(0, {0: 1, 1: 1}), (6, {0: 2, 1: 2}), (12, {0: 3, 1: 3}), (18, {0: 4, 1: 4})], None, None),
])
def test_a_hang_is_said_once_when_marks_stand_still(steps: list[tuple[float, dict[int, int]]],
                                                   kind: HangKind | None, at: float | None) -> None:
    watch = HangWatch(10, now=0)
    found = []
    for now, marks in steps:
        job = functools.reduce(operator.or_, (Marks.of_task(r, m) for r, m in marks.items()), Marks())
        hang = watch.see(job, now)
        if hang is not None:
            found.append((now, hang))
    if kind is None:
        assert found == []
    else:
        assert [(now, hang.kind) for now, hang in found] == [(at, kind)]
        assert watch.check(100) is None and watch.see(Marks(), 200) is None  # said once


def test_a_lagging_task_is_named_with_its_mark() -> None:
    watch = HangWatch(10, now=0)
    watch.see(Marks.of_task(0, 1) | Marks.of_task(1, 1) | Marks.of_task(2, 1), 0)
    hang = watch.see(Marks.of_task(0, 9) | Marks.of_task(1, 1) | Marks.of_task(2, 9), 10.5)
    assert hang is not None and hang.kind is HangKind.LAGGING and list(hang.marks.behind) == [1]
    assert str(hang) == "rank 1 stayed at progress mark 1 for 10 s while others reached 9"


def test_a_hang_needs_a_positive_time() -> None:
    with pytest.raises(ValueError, match="positive"):
        HangWatch(0, now=0)
