"""The hung job's two codecs: sets of ranks and progress marks, round-tripped and bounded; hostile bytes
are a malformed message, never anything else."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_resolver.rpc import protos as pb
from slurm_resolver.rpc.diagnosis.marks import progress_pb, ranks_of, ranks_pb, read_progress
from slurm_resolver.rpc.messages import WireError
from slurm_resolver.stacks.classes import MOST_RANGES, Ranks
from slurm_resolver.stacks.progress import Marks


@settings(max_examples=100)
@given(st.sets(st.integers(0, 10_000), max_size=300))
def test_a_set_of_ranks_round_trips_its_ranges_and_its_exact_count(ranks: set[int]) -> None:
    sent = Ranks.of(ranks)
    read = ranks_of(pb.RankSet.FromString(ranks_pb(sent).SerializeToString()), 10_001)
    assert read == sent and len(read) == len(ranks) and len(read.ranges) <= MOST_RANGES


@pytest.mark.parametrize("message", [
    pb.RankSet(first=[1], last=[]),  # unpaired
    pb.RankSet(first=[5], last=[3], count=1),  # backwards
    pb.RankSet(first=[0], last=[16], count=17),  # beyond the job
    pb.RankSet(count=17),  # counts more than the job
    pb.RankSet(first=list(range(0, 130, 2)), last=list(range(0, 130, 2)), count=65),  # more ranges than any
])
def test_a_set_beyond_the_job_or_its_bounds_is_malformed(message: pb.RankSet) -> None:
    with pytest.raises(WireError, match="a malformed set of ranks"):
        ranks_of(message, 16)


def test_progress_marks_round_trip_and_impossible_ones_are_malformed() -> None:
    marks = Marks.of_task(3, 7) | Marks.of_task(5, 9)
    assert read_progress(progress_pb(marks), 16) == marks
    for bad in (pb.Progress(lowest=9, highest=7, tasks=1), pb.Progress(tasks=17)):
        with pytest.raises(WireError, match="malformed progress marks"):
            read_progress(bad, 16)
