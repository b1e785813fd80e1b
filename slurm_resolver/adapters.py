"""Adapters: pure translators from a bootstrapped cluster to each framework.

Each returns a mapping (environment variables or keyword arguments); [`apply()`][slurm_resolver.adapters.apply] is
the one function that writes them to the environment, refusing to replace a different
value that is already set unless asked.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from typing import Any

from . import template_schema
from .cluster import Task
from .environment import export, grpc_without_proxy, keep_grpc_off_proxies, snapshot, warn_of_grpc_proxy
from .optional import import_optional
from .rpc.bootstrapped import Bootstrapped

__all__ = ["tensorflow_env", "torch_env", "jax_arguments", "jax_env", "shell_env", "shell", "apply",
           "tensorflow_server",
           "tensorflow_resolver", "FORMATS"]


def _local(b: Bootstrapped) -> list[Task]:
    return [b.task(r) for r in b.cluster.local_group(b.rank)[1]]


def tensorflow_env(b: Bootstrapped, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``TF_CONFIG`` of this task, on the spare ports (where TensorFlow's own servers will listen),
    and gRPC's proxy off where the environment (this process's, or ``environ``) names one."""
    config = {"cluster": b.framework_spec().as_dict(), "task": {"type": b.me.job, "index": b.me.index}}
    return {"TF_CONFIG": json.dumps(config), **grpc_without_proxy(snapshot(environ))}


def torch_env(b: Bootstrapped) -> dict[str, str]:
    """What ``torch.distributed.init_process_group(init_method='env://')`` reads.

    ``MASTER_PORT`` is the spare port rank 0 reserved on its node during the bootstrap.
    """
    rank0 = b.task(0)
    local = _local(b)
    return {
        "MASTER_ADDR": rank0.host,
        "MASTER_PORT": str(rank0.spare_port),
        "RANK": str(b.rank),
        "WORLD_SIZE": str(b.world_size),
        "LOCAL_RANK": str(b.me.local_rank),
        "LOCAL_WORLD_SIZE": str(len(local)),
    }


def jax_arguments(b: Bootstrapped) -> dict[str, Any]:
    """Keyword arguments of ``jax.distributed.initialize``."""
    gpus = b.me.gpus
    return {
        "coordinator_address": f"{b.task(0).host}:{b.task(0).spare_port}",
        "num_processes": b.world_size,
        "process_id": b.rank,
        "local_device_ids": [int(g) for g in gpus] if gpus and all(g.isdigit() for g in gpus) else None,
    }


def jax_env(b: Bootstrapped, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The same as environment variables, for ``slurm-resolver env --format jax`` (and gRPC's proxy
    off, as in `tensorflow_env()`: JAX's coordination service is gRPC)."""
    args = jax_arguments(b)
    env = {"JAX_COORDINATOR_ADDRESS": args["coordinator_address"], "JAX_NUM_PROCESSES": str(args["num_processes"]),
           "JAX_PROCESS_ID": str(args["process_id"]), **grpc_without_proxy(snapshot(environ))}
    if args["local_device_ids"] is not None:
        env["JAX_LOCAL_DEVICE_IDS"] = ",".join(map(str, args["local_device_ids"]))
    return env


def shell_env(b: Bootstrapped) -> dict[str, str]:
    """Plain variables for shell scripts: ``SLURM_RESOLVER_TASK`` (JSON) and its main fields."""
    described = b.describe()
    return {"SLURM_RESOLVER_TASK": json.dumps(described, sort_keys=True),
            "SLURM_RESOLVER_TASK_TYPE": b.me.job, "SLURM_RESOLVER_TASK_ID": str(b.me.index),
            "SLURM_RESOLVER_RANK": str(b.rank), "SLURM_RESOLVER_WORLD_SIZE": str(b.world_size),
            "SLURM_RESOLVER_ADDRESS": b.me.address}


FORMATS = dict(zip(template_schema.FORMATS, (tensorflow_env, torch_env, jax_env, shell_env)))
"""Each ``--format`` of the command line and its adapter: ``tf``, ``torch``, ``jax``, ``shell``."""


def shell(variables: Mapping[str, str]) -> str:
    """``export NAME=value`` lines, quoted for a POSIX shell."""
    return "".join(f"export {k}={shlex.quote(v)}\n" for k, v in variables.items())


def apply(variables: Mapping[str, str], overwrite: bool = False) -> dict[str, str]:
    """Write ``variables`` into ``os.environ``; a different existing value needs ``overwrite``."""
    return export(variables, overwrite=overwrite)


def tensorflow_server(b: Bootstrapped, config: Any = None, barrier: bool = True, timeout: float = 120.0) -> Any:
    """A real ``tf.distribute.Server`` for this task, on the port it exchanged for a framework.

    TensorFlow's servers listen on the spare ports of
    [`Bootstrapped.framework_spec()`][slurm_resolver.rpc.bootstrapped.Bootstrapped.framework_spec]
    while ours keep serving coordination; with ``barrier`` the call returns once every
    task's TensorFlow server listens, so no client can reach a port too early. A task that
    connects as a client instead (``tf.config.experimental_connect_to_cluster`` with its own
    job and index) calls ``b.barrier('tensorflow')`` before connecting. TensorFlow's gRPC is kept
    off an HTTP proxy of the environment first (`keep_grpc_off_proxies()`).
    """
    keep_grpc_off_proxies()
    tf = import_optional("tensorflow", "tensorflow", "A TensorFlow server")
    server = tf.distribute.Server(b.framework_spec().as_cluster_def(), job_name=b.me.job, task_index=b.me.index,
                                  protocol="grpc", config=config, start=True)
    if barrier:
        b.barrier("tensorflow", timeout)
    return server


def tensorflow_resolver(b: Bootstrapped) -> Any:
    """A genuine TensorFlow resolver over
    [`Bootstrapped.framework_spec()`][slurm_resolver.rpc.bootstrapped.Bootstrapped.framework_spec] for this
    task (an HTTP proxy in the environment, which TensorFlow's gRPC would use, is said once in the
    log: see `keep_grpc_off_proxies()`)."""
    warn_of_grpc_proxy("tensorflow_resolver()")
    tf = import_optional("tensorflow", "tensorflow", "A TensorFlow resolver")
    return tf.distribute.cluster_resolver.SimpleClusterResolver(
        b.framework_spec().to_tensorflow(), master=f"{b.me.host}:{b.me.spare_port}", task_type=b.me.job,
        task_id=b.me.index, rpc_layer="grpc", num_accelerators=b.num_accelerators())
