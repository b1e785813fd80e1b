"""Slurm's layout variables, read by pure functions: node lists, counts, het components, distribution."""

from __future__ import annotations

import pytest

from slurm_resolver.errors import EnvironmentVariableError, ResolutionError
from slurm_resolver.layout import distribution, het_components, job_layout, launch_key, layout_of

from .conftest import captured


@pytest.mark.parametrize("value, expected", [
    (None, "block"), ("", "block"), ("cyclic", "cyclic"), ("Cyclic:Block", "cyclic"), ("block,pack", "block"),
    ("plane=4", "plane=4"), ("arbitrary", "arbitrary"),
])
def test_distribution(value: str | None, expected: str) -> None:
    assert str(distribution({} if value is None else {"SLURM_DISTRIBUTION": value})) == expected


@pytest.mark.parametrize("size", ["0", "x", "", "1234567"])
def test_a_bad_plane_size_names_the_variable(size: str) -> None:
    with pytest.raises(EnvironmentVariableError, match="SLURM_DIST_PLANESIZE"):
        distribution({"SLURM_DISTRIBUTION": "plane", "SLURM_DIST_PLANESIZE": size})


def test_layout_needs_one_count_per_node() -> None:
    assert layout_of({"N": "a,b", "C": "3,1"}, "N", "C") == (("a", "b"), (3, 1))
    with pytest.raises(EnvironmentVariableError, match="one count per node of N='a,b'"):
        layout_of({"N": "a,b", "C": "3"}, "N", "C")


def test_het_components_of_a_step_and_of_the_job() -> None:
    env = captured("srun_het")[0]
    assert het_components(env, (("node1", "node2", "node3"), (1, 2, 1))) == (1, 3)
    assert job_layout(captured("sbatch_hetjob_batch_step")[0])[1] == (1, 2)
    shared = dict(env, SLURM_JOB_NODELIST_HET_GROUP_1="node[1-3]")
    with pytest.raises(ResolutionError, match="share node node1"):
        het_components(shared, (("node1",), (1,)))


def test_launch_key_names_the_step() -> None:
    assert launch_key({"SLURM_JOB_ID": "5", "SLURM_STEPID": "2"}) == "5.2"
    assert launch_key({"OMPI_MCA_ess_base_jobid": "123"}) == "123"
