"""The GPU tests' marker and skip, and one srun task's variables made by hand where no Slurm is there."""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path

import pytest

from ..conftest import ROOT

HERE = Path(__file__).resolve().parent


@cache
def no_gpu() -> str | None:
    """Why the GPU tests cannot run here; None where NVIDIA's driver and NVML answer and ``nvidia-smi`` is there."""
    from slurm_resolver import nvml

    if not nvml.driver_present():
        return (f"no NVIDIA driver answers here ({' and '.join(nvml.DRIVER_FILES)} absent): run tests/gpu/ on a "
                "GPU node (docs/testing.md)")
    if shutil.which("nvidia-smi") is None:
        return "NVIDIA's driver files are there, but nvidia-smi is not on PATH (an emulated GPU node?)"
    if not nvml.devices():
        return "NVIDIA's driver is loaded, but NVML reads no GPU (is nvidia-ml-py installed? what does nvidia-smi say?)"
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test here is marked ``gpu``, and skipped with the reason where no GPU answers."""
    for item in items:
        if HERE in item.path.resolve().parents:
            item.add_marker(pytest.mark.gpu)
            if no_gpu():
                item.add_marker(pytest.mark.skip(reason=no_gpu()))


GPU_VARIABLES = ("CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS",
                 "SLURM_GPUS_ON_NODE", "SLURMD_TRES_BIND", "SLURM_GPU_BIND", "SLURM_GPUS_PER_TASK", "JAX_PLATFORMS",
                 "JAX_LOCAL_DEVICE_IDS")


SECRET = secrets.token_hex(24)
"""The emulated job's secret, as the templates give one (no munged on a GPU node without Slurm)."""


def host() -> str:
    """This node's name as Slurm would give it (the short host name), or ``localhost`` where that does not resolve."""
    name = socket.gethostname().split(".")[0]
    try:
        socket.getaddrinfo(name, None)
    except OSError:
        return "localhost"
    return name


def srun_task(rank: int, tasks: int, job: str = "45045", **gpus: str) -> dict[str, str]:
    """This process's environment as task ``rank`` of ``srun -N1 -n<tasks>`` on this node sees it: Slurm's and
    GPU variables replaced by the step's (``gpus``: e.g. ``CUDA_VISIBLE_DEVICES='0'`` for ``--gres=gpu:1``; none
    for a step that asked for no GPU), the project first on ``PYTHONPATH``."""
    node = host()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SLURMD_")) and k not in GPU_VARIABLES}
    env.update({
        "SLURM_JOB_ID": job, "SLURM_JOBID": job, "SLURM_STEP_ID": "0", "SLURM_STEPID": "0",
        "SLURM_PROCID": str(rank), "SLURM_LOCALID": str(rank), "SLURM_NODEID": "0", "SLURMD_NODENAME": node,
        "SLURM_STEP_NODELIST": node, "SLURM_JOB_NODELIST": node, "SLURM_NODELIST": node,
        "SLURM_STEP_NUM_NODES": "1", "SLURM_NNODES": "1", "SLURM_JOB_NUM_NODES": "1",
        "SLURM_STEP_NUM_TASKS": str(tasks), "SLURM_NTASKS": str(tasks), "SLURM_NPROCS": str(tasks),
        "SLURM_STEP_TASKS_PER_NODE": str(tasks), "SLURM_TASKS_PER_NODE": str(tasks),
        "SLURM_GTIDS": ",".join(map(str, range(tasks))), "SLURM_DISTRIBUTION": "block",
        "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
        "SLURM_RESOLVER_SECRET": SECRET,
    })
    env.update(gpus)
    return env


def run_tasks(command: Sequence[str], envs: Sequence[Mapping[str, str]], cwd: Path,
              timeout: float = 300) -> list[subprocess.CompletedProcess[str]]:
    """``command`` in one process a task, all at once (an srun step's tasks), each with its environment."""
    started = [subprocess.Popen(list(command), env=dict(env), cwd=cwd, text=True, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE) for env in envs]
    done = []
    for process in started:
        try:
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for p in started:
                p.kill()
            raise AssertionError(f"{' '.join(command)} did not end within {timeout} s") from None
        done.append(subprocess.CompletedProcess(process.args, process.returncode, out, err))
    return done


def bootstrap(fmt: str, code: str) -> list[str]:
    """``slurm-resolver bootstrap --format FMT -- python -c CODE`` with this interpreter."""
    return [sys.executable, "-m", "slurm_resolver", "bootstrap", "--format", fmt, "--", sys.executable, "-c", code]


def probe(code: str) -> str:
    """What ``python -c code`` prints here, in a process of its own (CUDA is never initialised in pytest's)."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    return done.stdout.strip() if done.returncode == 0 else f"failed: {done.stderr.strip()[-500:]}"
