"""``import slurm_resolver`` stays light: nothing heavy at module level."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("grpc", "mpi4py", "pynvml", "kubernetes", "tensorflow", "torch", "jax")


def imported_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True, check=True)
    return {line.split("|")[-1].strip().split(".")[0] for line in out.stderr.splitlines() if "|" in line}


def test_import_is_light() -> None:
    assert not imported_after("import slurm_resolver") & set(HEAVY)


def test_resolving_stays_light() -> None:
    # With CUDA_VISIBLE_DEVICES set, NVML is not consulted either.
    code = ("import slurm_resolver as s; s.SlurmClusterResolver(environ={'CUDA_VISIBLE_DEVICES': '0'}).cluster_spec(); "
            "s.TFConfigClusterResolver(environ={}).cluster_spec()")
    assert not imported_after(code) & set(HEAVY)


def test_nvml_is_consulted_only_without_gpu_variables_and_with_a_driver() -> None:
    with_driver = ("import slurm_resolver as s; from slurm_resolver import nvml; "
                   "nvml.DRIVER_FILES = ('/proc/self/status',); s.SlurmClusterResolver(environ={})")
    assert "pynvml" in imported_after(with_driver)
    without = ("import slurm_resolver as s; from slurm_resolver import nvml; "
               "nvml.DRIVER_FILES = ('/nonexistent',); s.SlurmClusterResolver(environ={}).num_accelerators()")
    assert "pynvml" not in imported_after(without)


def test_a_tasks_start_loads_only_what_it_uses() -> None:
    """What an srun task's bootstrap runs before its server: the launch resolved (its names answered as if they
    resolve), the bootstrap's modules, MUNGE's library; none of what only other paths need (benchmarks/README.md)."""
    import json

    from .conftest import DATA

    with open(DATA / "env" / "srun_N2_ntasks_per_node2.jsonl") as lines:
        env = json.loads(lines.readline())
    code = ("import sys; from slurm_resolver import bootstrap, resolve; "
            "import slurm_resolver.rpc.network.grpc_network; "
            "from slurm_resolver.launchers.below import refuse_written_in_batch_step; "
            "from slurm_resolver import munge; munge._library(); "
            "from slurm_resolver.addresses import resolves; resolves('localhost'); "
            f"env = {env!r}; refuse_written_in_batch_step(env); "
            "resolve(env, resolves=lambda name: True, hostname=lambda: env['SLURMD_NODENAME']); print(*sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(done.stdout.split())
    spared = {"slurm_resolver.slurmctl", "slurm_resolver.rpc.network.in_process", "ctypes.util", "json",
              "google.protobuf", "datetime", "calendar",  # protobuf, and the well-known types it loads: rpc/proto3.py
              "encodings.idna", "stringprep",  # a name looked up as text: getaddrinfo encodes it with idna
              "slurm_resolver.stacks.render", "slurm_resolver.stacks.picture",  # a hang's tree, written or drawn
              "slurm_resolver.rpc.diagnosis.judge",  # a hang judged
              "slurm_resolver.stacks.command", "mmap",  # a progress mark's file, a command's stacks
              "hmac", "secrets", "random",  # `random`'s seeding: rpc/primitives.py
              "bisect"}  # a Stacks answer's check, a block layout of unequal counts
    if _own_sha256():  # CPython's own SHA-256 (a Fedora or RHEL build has none: hashlib's is OpenSSL's there)
        spared |= {"hashlib", "_hashlib"}
    assert "slurm_resolver.rpc.bootstrap" in loaded and not loaded & spared, loaded & spared


def test_a_tasks_start_compiles_no_dataclass_method() -> None:
    """A dataclass compiles its methods with exec at import (about a millisecond of CPU a class on Python 3.11, in
    every task): the bootstrap's own values are `slurm_resolver.values.Value`s and the resolution's public values,
    dataclasses to their users (`dataclasses.replace`, `fields`), `PublicValue`s, which compile nothing
    (benchmarks/README.md, issue 47). Dataclasses' generated code is a function named ``__create_fn__``, whose
    text the interpreter's audit hook sees compiled."""
    code = ("import sys, dataclasses\n"
            "made = []\n"
            "sys.addaudithook(lambda event, args: made.append(1) if event == 'compile' "
            "and '__create_fn__' in str(args[0]) else None)\n"
            "from slurm_resolver import bootstrap\n"
            "from slurm_resolver import nvml\n"  # a task on a node without GPU variables asks NVML
            "print(len(made), *sorted(f'{m.__name__}.{name}' for m in list(sys.modules.values()) "
            "if m.__name__.startswith('slurm_resolver') "
            "for name, value in vars(m).items() if isinstance(value, type) and dataclasses.is_dataclass(value) "
            "and value.__module__ == m.__name__))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    compiled, *made = done.stdout.split()
    public = {"slurm_resolver.faults.Fault", "slurm_resolver.packing.Packing", "slurm_resolver.layout.Distribution",
              "slurm_resolver.launchers.base.Launch", "slurm_resolver.placement.Placement",
              "slurm_resolver.gpus.Visible", "slurm_resolver.cluster.Task", "slurm_resolver.cluster.Cluster",
              "slurm_resolver.environment.Snapshot", "slurm_resolver.rpc.options.BootstrapOptions"}
    assert compiled == "0" and set(made) == public, (compiled, sorted(set(made) ^ public))


def _own_sha256() -> bool:
    import importlib.util

    return any(importlib.util.find_spec(name) is not None for name in ("_sha2", "_sha256"))
