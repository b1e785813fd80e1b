"""The launches captured on each Slurm the test cluster runs resolve alike: Debian 12's 22.05
(``tests/data/env``), Debian 13's 24.11 (``tests/data/env-slurm-24.11``, ``testcluster`` with
``SR_CLUSTER_SLURM=trixie``) and Debian sid's 26.05 (``tests/data/env-slurm-26.05``, ``SR_CLUSTER_SLURM=sid``).
Slurm changes its variables between versions (docs/testcluster.md lists what changed); every task must
still be where Slurm put it, and the changed variables read as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slurm_resolver.gpus import bound_per_task
from slurm_resolver.layout import launch_key
from slurm_resolver.resolution import resolve

from .conftest import DATA
from .test_resolution import STEP_CASES, always, exchanged, resolve_all, truth_rank

VERSIONS = {"22.05": DATA / "env", "24.11": DATA / "env-slurm-24.11", "26.05": DATA / "env-slurm-26.05"}
"""Each Slurm's captures (tests/e2e/capture_all on a test cluster of that Slurm), by the same case names."""

UNCAPTURED = {"26.05": {"srun_pmix"}}
"""Launches a version cannot make: sid's Slurm 26.05.5 package has no mpi/pmix plugin."""

HET_LEARNED = ["srun_het", "srun_het_cyclic", "srun_het_mixed", "sbatch_hetjob_multi"]


def launch(version: str, case: str) -> list[dict[str, str]]:
    """The environments of every task of a launch captured on ``version`` (skipped where it cannot be made)."""
    if case in UNCAPTURED.get(version, ()):
        pytest.skip(f"Slurm {version} cannot launch {case} here")
    lines = (VERSIONS[version] / f"{case}.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def test_every_version_has_every_case() -> None:
    cases = {version: sorted(p.stem for p in Path(folder).glob("*.jsonl")) for version, folder in VERSIONS.items()}
    for version, found in cases.items():
        assert set(found) == set(cases["22.05"]) - UNCAPTURED.get(version, set()), version


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("case", STEP_CASES)
def test_every_task_is_where_slurm_put_it(case: str, version: str) -> None:
    envs = launch(version, case)
    clusters = resolve_all(envs)
    assert len({c.spec().to_json() for c in clusters}) == 1, "tasks disagree on the cluster"
    for env, cluster in zip(envs, clusters):
        assert cluster.me is not None and cluster.rank == truth_rank(env)
        assert cluster.me.node == env["SLURMD_NODENAME"] and cluster.me.local_rank == int(env["SLURM_LOCALID"])


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("case", HET_LEARNED)
def test_a_het_layout_is_learned_from_every_task(case: str, version: str) -> None:
    """No version gives every het step's tasks their component's SLURM_DISTRIBUTION, and each errs in other
    cases (22.05: 'cyclic' to all of srun_het_mixed; 24.11 and 26.05: 'block' to all of srun_het_cyclic):
    the layout is learned, never taken from it."""
    envs = launch(version, case)
    truth = tuple(e["SLURMD_NODENAME"] for e in envs)
    assert all(c.nodes == truth and c.placement.exact for c in exchanged(envs))


@pytest.mark.parametrize("version", VERSIONS)
def test_mpirun_ranks_exchange_their_nodes(version: str) -> None:
    """Open MPI 4's mpirun beside 22.05, Open MPI 5's (PRRTE) beside 24.11: the ranks are mpirun's."""
    envs = launch(version, "salloc_mpirun")
    clusters = exchanged(envs)
    assert [c.rank for c in clusters] == [truth_rank(e) for e in envs] == [0, 1, 2, 3]
    assert [c.me.node for c in clusters if c.me] == [e["SLURMD_NODENAME"] for e in envs]


@pytest.mark.parametrize("version", VERSIONS)
def test_the_batch_step_is_the_jobs_view(version: str) -> None:
    """26.05 sets SLURM_STEP_ID=-5 (its batch script's special step id) there, where 22.05 and 24.11 set none:
    still the batch step, keyed by the job alone."""
    env = launch(version, "sbatch_batch_step")[0]
    assert env.get("SLURM_STEP_ID") == ("-5" if version == "26.05" else None)
    cluster = resolve(env, resolves=always)
    assert cluster.launcher == "batch" and cluster.rank == 0 and cluster.world_size == 4
    assert launch_key(env) == env["SLURM_JOB_ID"]


@pytest.mark.parametrize(("version", "written", "tasks"), [("22.05", "gpu:per_task:1", 3),
                                                            ("24.11", "gres/gpu:per_task:1", 3),
                                                            ("26.05", "gres/gpu:per_task:1", 4)])
def test_gpus_bound_per_task_are_read_in_either_format(version: str, written: str, tasks: int) -> None:
    """24.11 names the GRES in SLURMD_TRES_BIND (and adds SLURM_TRES_BIND); before 26.05, a node's lone task
    (node2's here) is given none."""
    bound = [env for env in launch(version, "srun_gpus_per_task1") if "SLURMD_TRES_BIND" in env]
    assert len(bound) == tasks and all(env["SLURMD_TRES_BIND"] == written and bound_per_task(env) for env in bound)
