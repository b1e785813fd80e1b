"""The frameworks on a real GPU, each as one or more srun tasks made of their variables (no Slurm needed):
every getting-started page's ``train.py``, two JAX processes on a node of one GPU, torch's NCCL on the device
``SLURM_RESOLVER_DEVICES`` names."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from slurm_resolver import nvml

from ..conftest import ROOT
from .conftest import bootstrap, probe, run_tasks, srun_task

PAGES = ROOT / "docs" / "start"
FILE = re.compile(r'^```\w+ title="([^"]+)"\n(.*?)^```$', re.M | re.S)


def train_py(page: str) -> str:
    """The ``train.py`` a getting-started page prints, as it prints it."""
    return dict(FILE.findall((PAGES / f"{page}.md").read_text()))["train.py"]


def needs(module: str, gpu_check: str) -> None:
    """Skip, with the reason, where ``module`` is missing or sees no GPU here (checked in a process of its own)."""
    said = probe(f"import {module}; print({gpu_check})")
    if said.startswith("failed") and "No module named" in said:
        pytest.skip(f"{module} is not installed here")
    if said != "True":
        pytest.skip(f"{module} sees no GPU here ({gpu_check}: {said[-300:]})")


TORCH_GPU = "torch.cuda.is_available()"
JAX_GPU = "jax.default_backend() == 'gpu'"
TF_GPU = "bool(tensorflow.config.list_physical_devices('GPU'))"

# (page, module, the check that it sees a GPU, bootstrap's format or None (the page runs `srun python train.py`),
#  what runs before train.py to hold that the task trains on the GPU, what runs after it, its line)
PAGES_ON_GPU = [
    ("pytorch", "torch", TORCH_GPU, "torch",
     "import os; assert os.environ['SLURM_RESOLVER_DEVICES'] == '0', os.environ['SLURM_RESOLVER_DEVICES']", "",
     r"^rank 0 of 1 on \S+: loss [0-9.]+, sum of ranks 0$"),
    ("jax", "jax", JAX_GPU, "jax",
     "import os; assert os.environ['JAX_LOCAL_DEVICE_IDS'] == '0', os.environ",
     "import jax; assert jax.devices()[0].platform == 'gpu', jax.devices()",
     r"^process 0 of 1: 1 devices in all, sum of process indices 0$"),
    ("lightning", "lightning", TORCH_GPU, None, "", "",
     r"^rank 0 of 1 on \S+ \(node 0, local rank 0\): loss [0-9.]+, sum of ranks 0$"),
    ("tensorflow", "tensorflow", TF_GPU, "tf",
     "import tensorflow as tf; assert tf.config.list_physical_devices('GPU')", "",
     r"^worker 0 of 1 on \S+: weight 3.000 \(3.000 to learn\), sum of worker indices 0$"),
]


@pytest.mark.parametrize(("page", "module", "gpu_check", "fmt", "before", "after", "line"), PAGES_ON_GPU,
                         ids=[p[0] for p in PAGES_ON_GPU])
def test_each_getting_started_train_py_trains_on_the_gpu(tmp_path: Path, page: str, module: str, gpu_check: str,
                                                         fmt: str | None, before: str, after: str, line: str) -> None:
    """One task of ``srun -n1 --gres=gpu:1`` (CUDA_VISIBLE_DEVICES=0), running the page's ``train.py`` under
    ``slurm-resolver bootstrap`` as the page does (Lightning: ``accelerator="cuda"`` for the page's ``"cpu"``)."""
    needs(module, gpu_check)
    text = train_py(page)
    if page == "lightning":
        assert 'accelerator="cpu"' in text
        text = text.replace('accelerator="cpu"', 'accelerator="cuda"')
    (tmp_path / "train.py").write_text(text)
    run = f"{before}\nimport runpy; runpy.run_path('train.py', run_name='__main__')\n{after}"
    command = bootstrap(fmt, run) if fmt else [sys.executable, "-c", run]
    env = srun_task(0, 1, CUDA_VISIBLE_DEVICES="0", SLURM_STEP_GPUS="0", TF_CPP_MIN_LOG_LEVEL="2")
    [done] = run_tasks(command, [env], tmp_path)
    assert done.returncode == 0 and re.search(line, done.stdout, re.M), (done.stdout[-3000:], done.stderr[-6000:])


JAX_SHARE = """
import jax
import runpy
runpy.run_path("train.py", run_name="__main__")
print("platform", jax.process_index(), jax.devices()[0].platform, flush=True)
"""


def test_two_jax_processes_on_a_node_of_one_gpu(tmp_path: Path) -> None:
    """The JAX page's two tasks a node where the node has fewer GPUs than tasks and the step asked for none
    (NVML's GPUs; rule 4: no task gets one): both processes run and reduce, whatever device each takes."""
    needs("jax", JAX_GPU)
    count = len(nvml.device_ids() or ())
    if count > 3:
        pytest.skip(f"needs a node of at most 3 GPUs (one task more than GPUs); this one has {count}")
    tasks = count + 1
    (tmp_path / "train.py").write_text(train_py("jax"))
    done = run_tasks(bootstrap("jax", JAX_SHARE), [srun_task(r, tasks) for r in range(tasks)], tmp_path)
    for rank, process in enumerate(done):
        assert process.returncode == 0, (rank, process.stdout[-3000:], process.stderr[-6000:])
        assert re.search(rf"^process {rank} of {tasks}: \d+ devices in all, sum of process indices "
                         rf"{tasks * (tasks - 1) // 2}$", process.stdout, re.M), process.stdout
    print(*(re.findall(r"^platform .*$", p.stdout, re.M) for p in done))


NCCL = """
import json, os
import torch
import torch.distributed as dist

ordinal = int(os.environ["SLURM_RESOLVER_DEVICES"])  # the device to use, whatever LOCAL_RANK says
device = torch.device("cuda", ordinal)
torch.cuda.set_device(device)
dist.init_process_group("nccl", device_id=device)
total = torch.tensor([float(dist.get_rank())], device=device)
dist.all_reduce(total)
print(json.dumps({"rank": dist.get_rank(), "devices": os.environ["SLURM_RESOLVER_DEVICES"],
                  "on": total.device.index, "uuid": str(torch.cuda.get_device_properties(ordinal).uuid),
                  "sum": total.item()}), flush=True)
dist.destroy_process_group()
"""


def test_torchs_nccl_runs_on_the_device_slurm_resolver_devices_names(tmp_path: Path) -> None:
    """``srun -n<K> --gres=gpu:K`` (K = the node's GPUs, at most 2): each task is told its own GPU as its
    process numbers it, and NCCL reduces over exactly those devices."""
    needs("torch", TORCH_GPU)
    tasks = min(2, len(nvml.device_ids() or ()))
    gpus = ",".join(map(str, range(tasks)))
    envs = [srun_task(r, tasks, CUDA_VISIBLE_DEVICES=gpus, SLURM_STEP_GPUS=gpus) for r in range(tasks)]
    done = run_tasks(bootstrap("torch", NCCL), envs, tmp_path)
    rows = [json.loads(line) for p in done for line in p.stdout.splitlines() if line.startswith("{")]
    assert all(p.returncode == 0 for p in done) and len(rows) == tasks, [p.stderr[-4000:] for p in done]
    assert sorted(r["rank"] for r in rows) == list(range(tasks))
    assert all(r["on"] == r["rank"] and r["devices"] == str(r["rank"]) for r in rows), rows  # ordinals 0 and 1
    assert len({r["uuid"] for r in rows}) == tasks and all(r["sum"] == tasks * (tasks - 1) / 2 for r in rows)
