"""The one rule for a partial environment, over every variable of the table.

A process that holds none of the variables only a launch sets (`Variable.launched_with`) is no launch
at all: one process, rank 0 of 1. A process that holds any of them is part of a launch: a launcher
plugin takes it, or it is refused naming what is missing; it is never taken for one process alone.
"""

from __future__ import annotations

import pytest

from slurm_resolver.errors import EnvironmentVariableError, SlurmResolverError
from slurm_resolver.launchers import launch_of
from slurm_resolver.variables import VARIABLES

LAUNCH = [v for v in VARIABLES if v.launched_with]
OTHERS = [v for v in VARIABLES if not v.launched_with and "<" not in v.name]
_ALONE = {"RANK": "0", "LOCAL_RANK": "0", "TF_CONFIG": "{}"}
"""Values that say a process is alone, where "1" would not (PyTorch's convention: rank 0 of 1)."""


def _named(name: str) -> str:
    return name.replace("<n>", "1")


@pytest.mark.parametrize("row", LAUNCH, ids=lambda v: v.name)
def test_a_launch_variable_alone_is_never_one_process_alone(row: object) -> None:
    name = _named(row.name)  # type: ignore[attr-defined]
    try:
        launch = launch_of({name: "1"})
    except SlurmResolverError:
        return  # refused, naming what is missing
    assert not launch.standalone, f"{name}=1 alone was taken for one process alone"


@pytest.mark.parametrize("row", OTHERS, ids=lambda v: v.name)
def test_any_other_variable_alone_is_one_process_alone(row: object) -> None:
    name = row.name  # type: ignore[attr-defined]
    launch = launch_of({name: _ALONE.get(name, "1")})
    assert launch.standalone and (launch.rank, launch.world_size) == (0, 1)


PARTIAL = [  # the cases, and what each lacks
    ({"SLURM_NODELIST": "node[1-2]"}, "SLURM_JOB_ID"),
    ({"SLURM_JOB_NODELIST": "node[1-2]", "SLURM_TASKS_PER_NODE": "2(x2)"}, "SLURM_JOB_ID"),
    ({"SLURM_LOCALID": "1"}, "SLURM_PROCID"),
    ({"SLURM_NODEID": "1"}, "SLURM_PROCID"),
    ({"SLURMD_NODENAME": "node2"}, "SLURM_JOB_ID"),
    ({"SLURM_PROCID": "1"}, "SLURM_STEP_NODELIST"),
    ({"SLURM_STEP_NODELIST": "a,b", "SLURM_STEP_NUM_TASKS": "2"}, "SLURM_PROCID"),
    ({"SLURM_JOB_ID": "7", "SLURM_PROCID": "1"}, "SLURM_JOB_NODELIST"),
    ({"SLURM_ARRAY_TASK_ID": "3"}, "SLURM_JOB_ID"),
    ({"OMPI_COMM_WORLD_SIZE": "4"}, "OMPI_COMM_WORLD_RANK"),
    ({"PMI_SIZE": "4"}, "PMI_RANK"),
    ({"PMIX_NAMESPACE": "ns"}, "PMIX_RANK"),
    ({"TORCHELASTIC_RUN_ID": "none"}, "RANK"),
    ({"CROSS_RANK": "1"}, "LOCAL_SIZE"),
]


@pytest.mark.parametrize(("env", "missing"), PARTIAL, ids=lambda x: ",".join(x) if isinstance(x, dict) else x)
def test_a_partial_launch_is_refused_naming_what_is_missing(env: dict[str, str], missing: str) -> None:
    with pytest.raises(EnvironmentVariableError) as info:
        launch_of(env)
    assert info.value.variable == missing and "HINT" in str(info.value)


def test_no_launch_variable_at_all_is_one_process() -> None:
    env = {"SLURM_CONF": "/etc/slurm/slurm.conf", "SLURM_RESOLVER_JOBS": "worker=1", "CUDA_VISIBLE_DEVICES": "0",
           "SLURM_DISTRIBUTION": "cyclic", "SLURM_NTASKS_PER_NODE": "2", "https_proxy": "http://proxy:3128"}
    assert launch_of(env).standalone  # what a user's shell may export for srun or pip: no launch


SRUN_INPUT = [{"SLURM_NTASKS": "4"}, {"SLURM_NPROCS": "4"}, {"SLURM_NNODES": "2"}, {"SLURM_NTASKS_PER_NODE": "2"},
              {"SLURM_NTASKS": "8", "SLURM_NPROCS": "8", "SLURM_NNODES": "2", "SLURM_NTASKS_PER_NODE": "4"}]
"""srun's input variables (srun(1): ``-n``, ``-N``, ``--ntasks-per-node``), which a shell may export before
``srun``: alone, or all together, they tell no place in a launch."""


@pytest.mark.parametrize("env", SRUN_INPUT, ids=lambda env: ",".join(env))
def test_sruns_input_variables_exported_in_a_shell_are_one_process(env: dict[str, str]) -> None:
    launch = launch_of(env)
    assert launch.standalone and (launch.rank, launch.world_size) == (0, 1)


def test_sruns_input_variables_beside_a_partial_launch_are_refused_naming_what_is_missing() -> None:
    with pytest.raises(EnvironmentVariableError) as info:
        launch_of({"SLURM_NTASKS": "4", "SLURM_PROCID": "1"})
    assert info.value.variable == "SLURM_STEP_NODELIST"
