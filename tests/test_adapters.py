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

from .conftest import captured, require


def planned(rank: int, **kwargs: object) -> Bootstrapped:
    return Bootstrapped.from_cluster(resolve(captured("srun_N3_n6")[rank], resolves=lambda n: True, **kwargs))


def test_torch_env_names_rank_0_and_the_local_group() -> None:
    env = adapters.torch_env(planned(2))
    assert env == {"MASTER_ADDR": "node1", "MASTER_PORT": "8888", "RANK": "2", "WORLD_SIZE": "6",
                   "LOCAL_RANK": "2", "LOCAL_WORLD_SIZE": "4", "SLURM_RESOLVER_DEVICES": ""}
    assert adapters.torch_device(planned(2)) == "cpu"


def test_tensorflow_env_is_tf_config_on_the_spare_ports() -> None:
    config = json.loads(adapters.tensorflow_env(planned(4, jobs={"ps": 1, "worker": 5}))["TF_CONFIG"])
    assert config["task"] == {"type": "worker", "index": 3} and config["cluster"]["ps"] == ["node1:8888"]


def test_jax_arguments_and_env() -> None:
    b = planned(5)
    assert adapters.jax_arguments(b) == {"coordinator_address": "node1:8888", "num_processes": 6, "process_id": 5,
                                         "local_device_ids": None}
    # only what jax.distributed.initialize() reads: its own Slurm detection tells the count and id here
    assert adapters.jax_env(b, captured("srun_N3_n6")[5]) == {"JAX_COORDINATOR_ADDRESS": "node1:8888"}


def test_jax_runs_on_the_cpu_where_the_task_sees_gpus_that_are_not_its_own() -> None:
    """Both tasks see GPUs 2 and 3 (CUDA_VISIBLE_DEVICES, no device cgroup); the ps is given none, the worker both:
    JAX on the ps would start CUDA on the worker's GPUs. A task that sees none (a CPU node, above) is told nothing:
    JAX finds its CPU, or accelerators that are not NVIDIA's, itself; a JAX_PLATFORMS already set is kept."""
    tasks = [Bootstrapped.from_cluster(resolve(_gpus(captured("srun_gres3_n2")[r], "2,3"), resolves=lambda n: True,
                                               jobs={"ps": 1, "worker": 1}, gpus_per_task={"ps": 0, "worker": 2}))
             for r in (0, 1)]
    ps, worker = (adapters.jax_env(b, _gpus(captured("srun_gres3_n2")[b.rank], "2,3")) for b in tasks)
    assert ps["JAX_PLATFORMS"] == "cpu" and "JAX_LOCAL_DEVICE_IDS" not in ps
    assert "JAX_PLATFORMS" not in worker and worker["JAX_LOCAL_DEVICE_IDS"] == "0,1"
    chosen = {**_gpus(captured("srun_gres3_n2")[0], "2,3"), "JAX_PLATFORMS": "cuda"}
    assert "JAX_PLATFORMS" not in adapters.jax_env(tasks[0], chosen)
    # The bundled JAX job's rule (`python -m slurm_resolver.training.jax_job`) is the same.
    assert adapters.jax_platforms(tasks[0], {}) == {"JAX_PLATFORMS": "cpu"}
    assert adapters.jax_platforms(tasks[1], {}) == {}
    assert adapters.jax_platforms(tasks[0], chosen) == {}
    cpu_node = Bootstrapped.from_cluster(resolve(captured("srun_N3_n6")[5], resolves=lambda n: True))
    assert adapters.jax_platforms(cpu_node, captured("srun_N3_n6")[5]) == {}


def _task(case: str, rank: int, **changes: str) -> tuple[Bootstrapped, dict[str, str]]:
    env = {**captured(case)[rank], **changes}
    return Bootstrapped.from_cluster(resolve(env, resolves=lambda n: True)), env


def _gpus(env: dict[str, str], ids: str) -> dict[str, str]:
    return {**env, **{name: ids for name in ("CUDA_VISIBLE_DEVICES", "SLURM_STEP_GPUS", "GPU_DEVICE_ORDINAL")}}


# The three shapes of what a task sees, and its GPUs as its process numbers them (positions in that list):
ORDINALS = [
    # srun -w node1 -n2 --gres=gpu:2 while another job holds GPUs 0,1: both tasks see 2,3 (no device cgroup)
    ("a shared list not from 0", "srun_gres3_n2", {"CUDA_VISIBLE_DEVICES": "2,3", "SLURM_STEP_GPUS": "2,3",
                                                    "GPU_DEVICE_ORDINAL": "2,3"}, [("2",), ("3",)], [[0], [1]]),
    # srun --gpus-per-task=1 without device cgroups: task 1 sees GPU 1 alone, as ordinal 0 (captured)
    ("bound per task", "srun_gpus_per_task1", {}, [("0",), ("1",), ("2",), ("0",)], [[0]] * 4),
    # the same with ConstrainDevices=yes: Slurm numbers what each task sees from 0
    ("bound per task, device cgroups", "srun_gpus_per_task1", {"CUDA_VISIBLE_DEVICES": "0"}, [("0",)] * 4,
     [[0]] * 4),
]


@pytest.mark.parametrize(("case", "changes", "ids", "expected"), [c[1:] for c in ORDINALS],
                         ids=[c[0] for c in ORDINALS])
def test_every_adapter_gives_the_tasks_gpus_as_its_process_numbers_them(case: str, changes: dict[str, str],
                                                                        ids: list[tuple[str, ...]],
                                                                        expected: list[list[int]]) -> None:
    for rank, (slurm_ids, ordinals) in enumerate(zip(ids, expected)):
        b, env = _task(case, rank, **changes)
        assert b.me.gpus == slurm_ids  # Slurm's ids are kept as Slurm wrote them...
        assert list(adapters.device_ordinals(b, env)) == ordinals  # ...and handed on as ordinals
        assert adapters.jax_arguments(b, env)["local_device_ids"] == ordinals
        assert adapters.jax_env(b, env)["JAX_LOCAL_DEVICE_IDS"] == ",".join(map(str, ordinals))
        assert adapters.torch_device(b, env) == f"cuda:{ordinals[0]}"
        for fmt in ("tf", "torch", "shell"):
            assert adapters.FORMATS[fmt](b, env)["SLURM_RESOLVER_DEVICES"] == ",".join(map(str, ordinals))


def test_ordinals_follow_a_narrowed_cuda_visible_devices() -> None:
    """The training jobs narrow CUDA_VISIBLE_DEVICES to the task's own GPUs: then they are 0, 1..."""
    b, env = _task("srun_gres3_n2", 1, **_gpus({}, "2,3"))
    assert adapters.device_ordinals(b, env) == (1,)
    assert adapters.device_ordinals(b, {**env, **b.cluster.device_env()}) == (0,)
    with pytest.raises(ConfigurationError, match="not among the devices this process sees"):
        adapters.device_ordinals(b, {**env, "CUDA_VISIBLE_DEVICES": "0"})


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
    task = captured("srun_N3_n6")[0]
    proxy = {**task, "https_proxy": "http://proxy:3128"}
    assert adapters.tensorflow_env(planned(0), proxy)["grpc_proxy"] == ""
    assert adapters.jax_env(planned(0), proxy)["grpc_proxy"] == ""
    assert "grpc_proxy" not in adapters.tensorflow_env(planned(0), {}) | adapters.jax_env(planned(0), task)
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

    require("tensorflow")  # the [tensorflow] extra: a GPU node of torch and JAX may have none

    env = {k: v for k, v in os.environ.items() if k not in ("grpc_proxy", "no_grpc_proxy", "no_proxy", "NO_PROXY")}
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    code = TF_BEHIND_A_PROXY.format(keep="from slurm_resolver.environment import keep_grpc_off_proxies\n"
                                         "keep_grpc_off_proxies()")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert "computed on the other task: 6.0" in done.stdout, done.stderr[-2000:]
