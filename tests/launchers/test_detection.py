"""Each captured launch (tests/data/env, from the real test cluster) is detected as its plugin."""

from __future__ import annotations

import pytest

from slurm_resolver.errors import ConfigurationError, EnvironmentVariableError
from slurm_resolver.launchers import LAUNCHERS, by_name, detect, outside_of, register
from slurm_resolver.launchers.base import Launch, Launcher

from ..conftest import captured

CASES = [
    ("srun_N3_n6", "srun"), ("srun_N2_n4_cyclic", "srun"), ("srun_plane2", "srun"),
    ("srun_pmi2", "srun"), ("srun_pmix", "srun"), ("srun_het", "srun"), ("sbatch_srun", "srun"),
    ("sbatch_hetjob", "srun"), ("sbatch_batch_step", "batch"), ("sbatch_hetjob_batch_step", "batch"),
    ("salloc_shell", "salloc"), ("salloc_mpirun", "openmpi"),
]


@pytest.mark.parametrize(("case", "launcher"), CASES)
def test_captured_launch_is_detected(case: str, launcher: str) -> None:
    for env in captured(case):
        assert detect(env).name == launcher


@pytest.mark.parametrize(("env", "launcher"), [
    ({}, "single"),
    ({"PMI_RANK": "2", "PMI_SIZE": "4", "MPI_LOCALRANKID": "0"}, "mpich"),
    ({"PMIX_RANK": "1"}, "pmix"),
    # mpiexec.hydra inside Slurm: srun started the proxies, so SLURM_PROCID is the proxy's
    ({"PMI_RANK": "3", "PMI_SIZE": "4", "SLURM_PROCID": "1", "SLURM_STEP_ID": "0"}, "mpich"),
])
def test_synthetic_detection(env: dict[str, str], launcher: str) -> None:
    assert detect(env).name == launcher


def test_mpi_rank_wins_over_slurm_procid() -> None:
    envs = captured("salloc_mpirun")
    assert [e["SLURM_PROCID"] for e in envs] == ["0", "0", "0", "1"]  # the launcher step's ranks
    assert [detect(e).resolve(e).rank for e in envs] == [0, 1, 2, 3]


def test_het_srun_components() -> None:
    launch = detect(captured("srun_het")[0]).resolve(captured("srun_het")[0])
    assert launch.components == (1, 3)


def test_het_batch_step_sees_the_whole_job() -> None:
    env = captured("sbatch_hetjob_batch_step")[0]
    launch = detect(env).resolve(env)
    assert launch.layout == (("node1", 1), ("node2", 1), ("node3", 1)) and launch.components == (1, 2)


def test_registry() -> None:
    class Custom(Launcher):
        name = "custom"
        description = "test"

        @classmethod
        def detect(cls, env):  # type: ignore[no-untyped-def]
            return "CUSTOM_RANK" in env

        @classmethod
        def resolve(cls, env):  # type: ignore[no-untyped-def]
            return Launch("custom", 1, 0)

    register(Custom)
    try:
        assert detect({"CUSTOM_RANK": "0"}) is Custom and by_name("custom") is Custom
        register(Custom)  # the same plugin again: nothing changes
        assert LAUNCHERS.count(Custom) == 1

        class Impostor(Custom):
            pass

        with pytest.raises(ConfigurationError, match="a launcher named 'custom' is already registered"):
            register(Impostor)
    finally:
        LAUNCHERS.remove(Custom)
    with pytest.raises(ConfigurationError, match="srun"):
        by_name("nope")


def test_plugins_do_not_import_each_other() -> None:
    import ast
    from pathlib import Path

    import slurm_resolver.launchers as package

    for path in Path(package.__file__).parent.glob("*.py"):
        if path.name in ("__init__.py", "base.py"):
            continue
        imported = {node.module for node in ast.walk(ast.parse(path.read_text()))
                    if isinstance(node, ast.ImportFrom) and node.level == 1}
        assert imported <= {"base"}, f"{path.name} imports {imported - {'base'}}"


def test_launches_carry_their_capabilities() -> None:
    srun = detect(captured("srun_N3_n6")[0]).resolve(captured("srun_N3_n6")[0])
    assert srun.is_task and srun.can_bootstrap and not srun.mpi_launched and not srun.mpi_capable
    pmix = captured("srun_pmix")[0]
    assert detect(pmix).resolve(pmix).mpi_capable
    mpirun = captured("salloc_mpirun")[0]
    launch = detect(mpirun).resolve(mpirun)
    assert launch.mpi_launched and launch.needs_exchange and launch.is_task
    batch = captured("sbatch_batch_step")[0]
    assert not detect(batch).resolve(batch).can_bootstrap
    assert detect({}).resolve({}).standalone


def test_mismatched_layout_names_both_variables() -> None:
    env = dict(captured("srun_N3_n6")[0], SLURM_STEP_TASKS_PER_NODE="4,2")
    with pytest.raises(EnvironmentVariableError, match="SLURM_STEP_TASKS_PER_NODE.*SLURM_STEP_NODELIST"):
        detect(env).resolve(env)


def test_a_launcher_whose_process_is_no_task_says_what_it_is_called() -> None:
    """The command line names the batch script or the salloc shell from the plugin, never by comparing names."""
    assert (outside_of("batch"), outside_of("salloc"), outside_of("srun"), outside_of("unheard-of")) == \
        ("batch script", "salloc shell", None, None)
    assert {launcher.name for launcher in LAUNCHERS if launcher.outside} == {"batch", "salloc"}
