"""Adapters: pure translators from a (bootstrapped or planned) cluster to each framework."""

from __future__ import annotations

import json

import pytest

from slurm_resolver import adapters
from slurm_resolver.errors import ConfigurationError
from slurm_resolver.resolution import resolve
from slurm_resolver.rpc.bootstrapped import Bootstrapped

from .conftest import captured


def planned(rank: int, **kwargs: object) -> Bootstrapped:
    return Bootstrapped.from_cluster(resolve(captured("srun_N3_n6")[rank], resolves=lambda n: True, **kwargs))


def test_torch_env_names_rank_0_and_the_local_group() -> None:
    env = adapters.torch_env(planned(2))
    assert env == {"MASTER_ADDR": "node1", "MASTER_PORT": "8888", "RANK": "2", "WORLD_SIZE": "6",
                   "LOCAL_RANK": "2", "LOCAL_WORLD_SIZE": "4"}


def test_tensorflow_env_is_tf_config_on_the_spare_ports() -> None:
    config = json.loads(adapters.tensorflow_env(planned(4, jobs={"ps": 1, "worker": 5}))["TF_CONFIG"])
    assert config["task"] == {"type": "worker", "index": 3} and config["cluster"]["ps"] == ["node1:8888"]


def test_jax_arguments_and_env() -> None:
    b = planned(5)
    assert adapters.jax_arguments(b) == {"coordinator_address": "node1:8888", "num_processes": 6, "process_id": 5,
                                         "local_device_ids": None}
    assert adapters.jax_env(b)["JAX_PROCESS_ID"] == "5"


def test_shell_env_and_quoting() -> None:
    env = adapters.shell_env(planned(0))
    assert env["SLURM_RESOLVER_RANK"] == "0" and json.loads(env["SLURM_RESOLVER_TASK"])["world_size"] == 6
    assert adapters.shell({"A": "x y", "B": "it's"}) == "export A='x y'\nexport B='it'\"'\"'s'\n"


def test_the_salloc_shell_is_no_task() -> None:
    with pytest.raises(ConfigurationError, match="not a task"):
        Bootstrapped.from_cluster(resolve(captured("salloc_shell")[0], resolves=lambda n: True))
