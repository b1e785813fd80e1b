"""Adapters: pure translators from a bootstrapped cluster to each framework.

Each returns a mapping (environment variables or keyword arguments); [`apply()`][slurm_resolver.adapters.apply] is
the one function that writes them to the environment, refusing to replace a different
value that is already set unless asked.

Which GPU is the task's, for every framework: [`device_ordinals()`][slurm_resolver.adapters.device_ordinals],
its GPUs as this process numbers them (positions in the ``CUDA_VISIBLE_DEVICES`` it sees), which every adapter
hands on: ``SLURM_RESOLVER_DEVICES`` (``tf``, ``torch``, ``shell``), `torch_device()`, JAX's
``local_device_ids`` (`jax_arguments()`) and ``JAX_LOCAL_DEVICE_IDS`` (``jax``). ``LOCAL_RANK`` is no device:
under ``--gpus-per-task=1`` the task of local rank 1 sees one device, ordinal 0.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from typing import Any

from . import template_schema
from .cluster import Task
from .environment import export, grpc_without_proxy, keep_grpc_off_proxies, snapshot, warn_of_grpc_proxy
from .gpus import ordinals, parse_devices
from .jax_detection import Jax, installed, refusal
from .optional import import_optional
from .rpc.bootstrapped import Bootstrapped

__all__ = ["tensorflow_env", "torch_env", "jax_arguments", "jax_env", "jax_platforms", "shell_env", "shell", "apply",
           "tensorflow_server", "tensorflow_resolver", "device_ordinals", "torch_device", "FORMATS"]


def _local(b: Bootstrapped) -> list[Task]:
    return [b.task(r) for r in b.cluster.local_group(b.rank)[1]]


def device_ordinals(b: Bootstrapped, environ: Mapping[str, str] | None = None) -> tuple[int, ...]:
    """The task's GPUs as this process numbers them (CUDA's, PyTorch's and JAX's ordinals): their positions in
    the ``CUDA_VISIBLE_DEVICES`` of ``environ`` (this process's now, by default), else in the list the task saw
    when it was resolved (Slurm's GPU variables, NVML's devices); ``()`` where the task has none.

    With ``CUDA_VISIBLE_DEVICES=2,3`` on both tasks of a node, rank 1's GPU ``3`` is ordinal 1; under
    ``--gpus-per-task=1`` every task sees its one GPU as ordinal 0; where the task's
    ``CUDA_VISIBLE_DEVICES`` was narrowed to its own GPUs (the training jobs do), they are ``0, 1...``.
    """
    mine = b.me.gpus or ()
    if not mine:
        return ()
    env = snapshot(environ)
    if "CUDA_VISIBLE_DEVICES" in env:
        return ordinals(mine, parse_devices(env["CUDA_VISIBLE_DEVICES"]))
    seen = b.cluster.gpu_plan.visible
    return ordinals(mine, seen.ids, seen.source)


def _devices(b: Bootstrapped, environ: Mapping[str, str] | None) -> dict[str, str]:
    return {"SLURM_RESOLVER_DEVICES": ",".join(map(str, device_ordinals(b, environ)))}


def tensorflow_env(b: Bootstrapped, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``TF_CONFIG`` of this task, on the spare ports (where TensorFlow's own servers will listen),
    ``SLURM_RESOLVER_DEVICES`` (`device_ordinals()`), and gRPC's proxy off where the environment (this
    process's, or ``environ``) names one."""
    config = {"cluster": b.framework_spec().as_dict(), "task": {"type": b.me.job, "index": b.me.index}}
    return {"TF_CONFIG": json.dumps(config), **_devices(b, environ), **grpc_without_proxy(snapshot(environ))}


def torch_env(b: Bootstrapped, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """What ``torch.distributed.init_process_group(init_method='env://')`` reads, and the task's GPUs as
    ``SLURM_RESOLVER_DEVICES`` (`device_ordinals()`: ``torch.cuda.set_device(int(first))``, not ``LOCAL_RANK``).

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
        **_devices(b, environ),
    }


def torch_device(b: Bootstrapped, environ: Mapping[str, str] | None = None) -> str:
    """The task's PyTorch device: ``cuda:N`` with N its first GPU's ordinal (`device_ordinals()`), ``cpu``
    where it has none; for ``torch.device(...)`` and ``torch.cuda.set_device(...)``."""
    found = device_ordinals(b, environ)
    return f"cuda:{found[0]}" if found else "cpu"


def jax_arguments(b: Bootstrapped, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Keyword arguments of ``jax.distributed.initialize``: right in every launch, since each is given
    (``local_device_ids``: `device_ordinals()`, None where the task has no GPU)."""
    found = device_ordinals(b, environ)
    return {
        "coordinator_address": f"{b.task(0).host}:{b.task(0).spare_port}",
        "num_processes": b.world_size,
        "process_id": b.rank,
        "local_device_ids": list(found) if found else None,
    }


def jax_platforms(b: Bootstrapped, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``{"JAX_PLATFORMS": "cpu"}`` where the task has no GPU of its own but sees some (a CPU job on a GPU node whose
    GPUs Slurm does not hide, or a ``ps`` given none beside its workers: the GPUs it sees are another task's or
    another job's, and JAX would start CUDA on them); nothing where ``environ`` (this process's by default) sets
    ``JAX_PLATFORMS``, or where the task sees no GPU (a CPU node, or accelerators that are not NVIDIA's: JAX finds
    them itself)."""
    if b.me.gpus or not b.cluster.gpu_plan.visible.ids or "JAX_PLATFORMS" in snapshot(environ):
        return {}
    return {"JAX_PLATFORMS": "cpu"}


def jax_env(b: Bootstrapped, environ: Mapping[str, str] | None = None, jax: Jax | None = None) -> dict[str, str]:
    """What a bare ``jax.distributed.initialize()`` reads, for ``slurm-resolver env --format jax`` and
    ``bootstrap --format jax``: ``JAX_COORDINATOR_ADDRESS`` (rank 0's spare port), ``JAX_LOCAL_DEVICE_IDS``
    (`device_ordinals()`, where the task has GPUs and the release reads it: 0.4.33 and later),
    ``JAX_PLATFORMS=cpu`` where the task has no GPU of its own but sees some (a CPU job on a GPU node whose GPUs
    Slurm does not hide, or a ``ps`` given none beside its workers: JAX would start CUDA on them; not where the
    environment sets ``JAX_PLATFORMS``, nor where it sees none: a CPU node, or other accelerators), and gRPC's
    proxy off (as `tensorflow_env()`: JAX's coordination service is gRPC). Nothing else: JAX takes the
    process count and id only from its own cluster detection, whose rules are those of ``jax`` (the
    installed release by default, `slurm_resolver.jax_detection.installed`: never imported).

    Raises:
        ConfigurationError: where JAX's detection in this environment (this process's, or ``environ``, which
            the command inherits) would take another count or id than the task's (the batch step, MPICH's
            and PMIx launchers, Open MPI 5 before JAX 0.11.2, workers below srun), or none, or (before JAX
            0.4.33) another GPU: said once for the job (a GPU by its task), with the call that is right in
            every launch.
    """
    env = snapshot(environ)
    jax = installed() if jax is None else jax
    args = jax_arguments(b, env)
    variables = {"JAX_COORDINATOR_ADDRESS": args["coordinator_address"], **grpc_without_proxy(env)}
    devices = args["local_device_ids"] or []
    if devices and "JAX_LOCAL_DEVICE_IDS" in jax.rules.reads:
        variables["JAX_LOCAL_DEVICE_IDS"] = ",".join(map(str, devices))
    variables.update(jax_platforms(b, env))
    launch = b.cluster.launch
    refused = refusal({**env, **variables}, b.rank, b.world_size, b.launcher, jax, devices,
                      task=launch.is_task or launch.standalone)
    if refused is not None:
        raise refused
    return variables


def shell_env(b: Bootstrapped, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Plain variables for shell scripts: ``SLURM_RESOLVER_TASK`` (JSON) and its main fields, and the task's
    GPUs as ordinals (``SLURM_RESOLVER_DEVICES``, `device_ordinals()`)."""
    described = b.describe()
    return {"SLURM_RESOLVER_TASK": json.dumps(described, sort_keys=True),
            "SLURM_RESOLVER_TASK_TYPE": b.me.job, "SLURM_RESOLVER_TASK_ID": str(b.me.index),
            "SLURM_RESOLVER_RANK": str(b.rank), "SLURM_RESOLVER_WORLD_SIZE": str(b.world_size),
            "SLURM_RESOLVER_ADDRESS": b.me.address, **_devices(b, environ)}


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
