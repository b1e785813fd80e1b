from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from slurm_resolver import SlurmClusterResolver
from slurm_resolver.errors import ConfigurationError, SlurmResolverError

from ..conftest import captured


def test_tensorflow_contract() -> None:
    env = captured("srun_N3_n6")[5]
    r = SlurmClusterResolver(jobs={"ps": 1, "worker": 5}, environ=env)
    assert r.get_task_info() == ("worker", 4)
    assert (r.task_type, r.task_id, r.rpc_layer, r.environment) == ("worker", 4, "grpc", "")
    assert r.master() == "grpc://node3:8888"
    assert r.master("ps", 0) == "grpc://node1:8888"
    assert r.master("ps", 0, rpc_layer="http") == "http://node1:8888"
    assert r.cluster_spec().num_tasks("worker") == 5
    assert r.num_accelerators() == {}  # CPU-only step: no GPU is invented
    r.task_type, r.task_id = "ps", 0
    assert r.master() == "grpc://node1:8888"


def test_batch_step_works_where_tensorflow_fails() -> None:
    # TensorFlow 2.21: KeyError 'SLURM_STEP_NUM_TASKS not found' in the batch step.
    r = SlurmClusterResolver(environ=captured("sbatch_batch_step")[0])
    assert r.get_task_info() == ("worker", 0) and r.cluster.launcher == "batch"


def test_salloc_shell_has_no_task() -> None:
    r = SlurmClusterResolver(environ=captured("salloc_shell")[0])
    assert r.get_task_info() == (None, None) and r.master() == "" and r.cluster_spec().num_tasks("worker") == 4


@pytest.mark.parametrize("value", [-1, 1.5, "2", True])
def test_gpu_arguments_are_checked(value: object) -> None:
    with pytest.raises(ConfigurationError, match="gpus_per_node"):
        SlurmClusterResolver(gpus_per_node=value, environ=captured("srun_cpu_only")[0])  # type: ignore[arg-type]


def test_zero_gpus_are_accepted() -> None:
    r = SlurmClusterResolver(gpus_per_node=0, gpus_per_task=0, environ=captured("srun_cpu_only")[0])
    assert r.num_accelerators() == {}


READ = ["SLURM_PROCID", "SLURM_STEP_ID", "SLURM_LOCALID", "SLURMD_NODENAME", "SLURM_STEP_NUM_TASKS",
        "SLURM_STEP_NODELIST", "SLURM_STEP_TASKS_PER_NODE", "SLURM_DISTRIBUTION", "SLURM_DIST_PLANESIZE",
        "SLURM_JOB_NODELIST", "SLURM_TASKS_PER_NODE", "SLURM_NTASKS", "SLURM_HET_SIZE", "SLURM_JOB_ID",
        "SLURM_JOB_NODELIST_HET_GROUP_0", "SLURM_TASKS_PER_NODE_HET_GROUP_1", "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID",
        "PMIX_RANK", "SLURM_RESOLVER_JOBS", "SLURM_RESOLVER_PORT_BASE", "SLURM_RESOLVER_EXCHANGE"]
BASES = ["srun_N3_n6", "srun_het", "sbatch_batch_step", "sbatch_hetjob_batch_step", "salloc_shell", "srun_plane2"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(base=st.sampled_from(BASES), name=st.sampled_from(READ),
       value=st.one_of(st.text(max_size=30), st.from_regex(r"-?[0-9]{0,20}(\(x[0-9]{0,3}\))?(,[0-9]{0,3})?",
                                                           fullmatch=True)))
@example(base="srun_N3_n6", name="SLURM_PROCID", value="\u00b2")  # '²'.isdigit() but not int()
@example(base="srun_N3_n6", name="SLURM_STEP_TASKS_PER_NODE", value="\u0664")  # Arabic-Indic four
def test_malformed_variables_give_only_our_errors(base: str, name: str, value: str) -> None:
    env = dict(captured(base)[0], **{name: value})
    try:
        SlurmClusterResolver(environ=env, exchange="none")
    except SlurmResolverError as exc:
        assert isinstance(exc, (ValueError, RuntimeError))


def test_an_explicit_port_base_wins_over_the_variable_even_when_it_is_8888() -> None:
    import inspect

    env = dict(captured("srun_N3_n6")[0], SLURM_RESOLVER_PORT_BASE="9000")
    assert SlurmClusterResolver(environ=env, check_port=False).cluster_spec().task_address("worker", 0) == "node1:9000"
    explicit = SlurmClusterResolver(port_base=8888, environ=env, check_port=False)
    assert explicit.cluster_spec().task_address("worker", 0) == "node1:8888"
    assert "port_base: 'int | None' = 8888" in str(inspect.signature(SlurmClusterResolver))  # TensorFlow's look
