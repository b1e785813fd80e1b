"""Adapters: pure translators from a (bootstrapped or planned) cluster to each framework."""

from __future__ import annotations

import json
import os

import pytest

from slurm_resolver import adapters
from slurm_resolver.environment import grpc_without_proxy
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


@pytest.mark.parametrize(("variables", "expected"), [
    ({}, {}),
    ({"https_proxy": "http://proxy:3128"}, {"grpc_proxy": ""}),
    ({"http_proxy": "http://proxy:3128"}, {"grpc_proxy": ""}),
    ({"https_proxy": ""}, {}),  # set, but to nothing: no proxy
    ({"https_proxy": "http://proxy:3128", "grpc_proxy": "http://grpc-proxy:8080"}, {}),  # the user's own
    ({"https_proxy": "http://proxy:3128", "no_grpc_proxy": "node1,node2"}, {}),
    ({"https_proxy": "http://proxy:3128", "grpc_proxy": ""}, {}),  # already off
])
def test_grpc_is_kept_off_an_http_proxy_unless_the_user_says_otherwise(variables: dict[str, str],
                                                                        expected: dict[str, str]) -> None:
    assert grpc_without_proxy(variables) == expected


def test_the_tensorflow_and_jax_variables_turn_grpcs_proxy_off_where_one_is_set() -> None:
    proxy = {"https_proxy": "http://proxy:3128"}
    assert adapters.tensorflow_env(planned(0), proxy)["grpc_proxy"] == ""
    assert adapters.jax_env(planned(0), proxy)["grpc_proxy"] == ""
    assert "grpc_proxy" not in adapters.tensorflow_env(planned(0), {}) | adapters.jax_env(planned(0), {})
    assert "grpc_proxy" not in adapters.torch_env(planned(0))  # gloo and NCCL do not speak gRPC


TF_BEHIND_A_PROXY = """
import os, socket
os.environ["https_proxy"] = "http://127.0.0.1:9"  # nothing listens there: a proxy that reaches no node
{keep}
import tensorflow as tf

def free() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

spec = tf.train.ClusterSpec({{"worker": [f"127.0.0.1:{{free()}}", f"127.0.0.1:{{free()}}"]}})
other = tf.distribute.Server(spec, job_name="worker", task_index=1, start=True)
tf.config.experimental_connect_to_cluster(spec, job_name="worker", task_index=0)
with tf.device("/job:worker/task:1"):
    print("computed on the other task:", float(tf.constant(2.0) * 3.0), flush=True)
os._exit(0)
"""


def test_tensorflow_reaches_its_peers_with_a_proxy_in_the_environment() -> None:
    """TensorFlow's gRPC sends its calls to https_proxy: without `keep_grpc_off_proxies()` it hangs."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("grpc_proxy", "no_grpc_proxy", "no_proxy", "NO_PROXY")}
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    code = TF_BEHIND_A_PROXY.format(keep="from slurm_resolver.environment import keep_grpc_off_proxies\n"
                                         "keep_grpc_off_proxies()")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert "computed on the other task: 6.0" in done.stdout, done.stderr[-2000:]
