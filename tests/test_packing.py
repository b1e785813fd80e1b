"""Packing ranks into jobs with TensorFlow's semantics, and each task's job and index."""

from __future__ import annotations

import pytest

from slurm_resolver.errors import ConfigurationError, ResolutionError
from slurm_resolver.packing import Packing, check_port_base, pack, runs


@pytest.mark.parametrize("jobs, world, components, expected", [
    (None, 3, (), (("worker", 3),)),
    ({"worker": 2, "ps": 1}, 3, (), (("ps", 1), ("worker", 2))),
    ({"worker": 2, "chief": 1, "evaluator": 1, "ps": 0}, 4, (), (("chief", 1), ("evaluator", 1), ("ps", 0),
                                                                 ("worker", 2))),
    (["ps", "worker"], 3, (1, 2), (("ps", 1), ("worker", 2))),
])
def test_runs(jobs: object, world: int, components: tuple[int, ...], expected: object) -> None:
    assert runs(jobs, world, components) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize("jobs, world, components, error, match", [
    ({"ps": 2, "worker": 6}, 6, (), ResolutionError, "ask for 8 tasks, but the job has 6"),
    ("ps=1", 1, (), ConfigurationError, "dict of counts or a list"),
    (["ps"], 3, (1, 2), ConfigurationError, "names 1 het components, but the job has 2"),
    ({"ps": -1, "worker": 4}, 3, (), ConfigurationError, "count >= 0"),
    ({"ps": True, "worker": 2}, 3, (), ConfigurationError, "count >= 0"),
])
def test_impossible_jobs(jobs: object, world: int, components: tuple[int, ...], error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        runs(jobs, world, components)  # type: ignore[arg-type]


def test_job_of_and_rank_of_are_inverse() -> None:
    packing = Packing((("ps", 1), ("worker", 2), ("ps", 1)))
    assert packing.columns == (("ps", "worker", "worker", "ps"), (0, 0, 1, 1))
    for rank in range(4):
        assert packing.rank_of(*packing.job_of(rank)) == rank
    assert packing.rank_of("ps", 2) is None and packing.rank_of("chief", 0) is None
    assert packing.grouped(["a", "b", "c", "d"]) == {"ps": ["a", "d"], "worker": ["b", "c"]}


@pytest.mark.parametrize("rank", [-1, 4])
def test_a_rank_outside_the_job_is_named(rank: int) -> None:
    with pytest.raises(IndexError, match=f"rank {rank} is not in a job of 4 tasks"):
        pack(None, 4).job_of(rank)


def test_port_base() -> None:
    check_port_base(8888, 4)
    with pytest.raises(ConfigurationError, match="not a TCP port"):
        check_port_base(0, 1)
    with pytest.raises(ConfigurationError, match="passes 65535"):
        check_port_base(65534, 4)
