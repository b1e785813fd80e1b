"""The training jobs on the real cluster: parameter servers, the tf.data service, DDP and JAX.

Each runs as users run it: a template through ``slurm-resolver submit --wait``, or the module
under ``srun``. Failures are injected from outside, as a node would fail: the test finds the
task's process by its environment and kills it with SIGKILL.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from ..conftest import ROOT, require

pytestmark = pytest.mark.slurm

CLI = [sys.executable, "-m", "slurm_resolver"]


def submit(template: str, tmp_path: Path, **values: str) -> subprocess.CompletedProcess[str]:
    sets = [f"--set={k}={v}" for k, v in {**values, "output": str(tmp_path / "out"), "python": sys.executable}.items()]
    return subprocess.run([*CLI, "submit", template, *sets, "--wait", "--timeout", "300"], capture_output=True,
                          text=True, timeout=360, cwd=tmp_path)


def task_pid(marker: str, rank: int) -> int:
    """The pid of task ``rank`` of the srun started with ``TEST_MARKER=marker``."""
    wanted = (f"TEST_MARKER={marker}".encode(), f"SLURM_PROCID={rank}".encode())
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if all(w in environ for w in wanted) and b"python" in command:
            return int(pid)
    raise AssertionError(f"no process of rank {rank}")


def run_and_kill(module: str, srun: list[str], args: list[str], rank: int | None, when: str, delay: float,
                 tmp_path: Path) -> tuple[int, str]:
    """Run ``module`` under srun; once a line contains ``when``, wait ``delay`` s and SIGKILL ``rank``."""
    marker = uuid.uuid4().hex
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TEST_MARKER": marker}
    proc = subprocess.Popen(["srun", *srun, sys.executable, "-m", module, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env, cwd=tmp_path)
    assert proc.stdout is not None
    lines, killed = [], rank is None
    deadline = time.monotonic() + 300
    for line in proc.stdout:
        lines.append(line)
        if not killed and when in line:
            time.sleep(delay)
            os.kill(task_pid(marker, rank), signal.SIGKILL)  # type: ignore[arg-type]
            killed = True
        assert time.monotonic() < deadline, "the job hangs"
    return proc.wait(timeout=60), "".join(lines)


def said(output: str, pattern: str) -> list[str]:
    return [line for line in output.splitlines() if re.search(pattern, line)]


def records(directory: Path) -> list[dict[str, object]]:
    """Every trainer's record of the elements it read, by trainer index."""
    found = sorted(directory.glob("data-service-*/trainer-*.json"))
    return [json.loads(path.read_text()) for path in found]


def only_the_jobs_own_lines(output: str) -> None:
    """No native TensorFlow record, no warning of a missing module, no line of kilobytes."""
    noise = [l for l in output.splitlines() if re.match(r"[IWE]\d{4} |WARNING: All log messages|.*UserWarning", l)]
    assert not noise and max(map(len, output.splitlines())) < 300, output[-3000:]


def test_ps_worker_template_trains_and_every_task_ends(slurm_cluster: dict[str, str], tmp_path: Path) -> None:
    require("tensorflow")
    out = submit("ps_worker", tmp_path, program_args="--epochs 4 --steps 20")
    assert out.returncode == 0 and "COMPLETED" in out.stderr, out.stderr + out.stdout
    losses = [float(m.group(1)) for line in said(out.stdout, r"chief:0.*epoch \d/4: loss")
              for m in [re.search(r"loss ([\d.]+)", line)] if m]
    assert len(losses) == 4 and losses[-1] < losses[0], out.stdout
    assert len(said(out.stdout, r"(ps|worker):\d .*the chief is done: leaving")) == 4  # 2 ps + 2 workers end
    assert said(out.stdout, r"training on 2 workers and 2 ps")
    only_the_jobs_own_lines(out.stdout)


def test_the_evaluator_runs_beside_the_training_cluster(slurm_cluster: dict[str, str], tmp_path: Path) -> None:
    require("tensorflow")
    out = submit("chief_evaluator", tmp_path, program_args="--epochs 2 --steps 10")
    assert out.returncode == 0, out.stderr + out.stdout
    assert said(out.stdout, r"training on 1 workers and 1 ps")  # no evaluator in TensorFlow's cluster
    assert said(out.stdout, r"evaluator:0 .*evaluated the final checkpoint: loss [\d.]+")


def test_a_killed_worker_does_not_stop_training(slurm_cluster: dict[str, str], tmp_path: Path) -> None:
    require("tensorflow")
    code, output = run_and_kill("slurm_resolver.training.parameter_server", ["-N4", "-n5"],
                                ["--epochs", "4", "--steps", "150"], 4, "epoch 1/4", 0.0, tmp_path)
    assert said(output, r"chief:0 .*epoch 4/4: loss") and said(output, r"chief:0 .*trained; checkpoint"), output
    assert len(said(output, r"the chief is done: leaving")) == 3  # both ps and the surviving worker end


def test_a_killed_ps_is_named_and_the_job_fails(slurm_cluster: dict[str, str], tmp_path: Path) -> None:
    require("tensorflow")
    start = time.monotonic()
    code, output = run_and_kill("slurm_resolver.training.parameter_server", ["-N4", "-n5"],
                                ["--epochs", "6", "--steps", "200"], 2, "epoch 1/6", 0.0, tmp_path)
    assert code != 0 and time.monotonic() - start < 200
    assert said(output, r"chief:0 .*FAILED: ps:1 \(rank 2\) on node\d failed during training"), output
    assert not said(output, r"trained; checkpoint")


def test_data_service_template_modes(slurm_cluster: dict[str, str], tmp_path: Path) -> None:
    require("tensorflow")
    out = submit("data_service", tmp_path, program_args="--elements 60")
    assert out.returncode == 0 and "COMPLETED" in out.stderr, out.stderr + out.stdout
    only_the_jobs_own_lines(out.stdout)
    assert said(out.stdout, r"dispatcher:0 .*distributed_epoch: 60 elements across 2 trainers \(\d+ \+ \d+\): "
                            r"every element exactly once$"), out.stdout
    assert said(out.stdout, r"dispatcher:0 .*parallel_epochs: 240 elements .*: each trainer read every element once "
                            r"from each of the 2 workers$")
    assert said(out.stdout, r"dispatcher:0 .*shared_parallel: 120 elements .*: every element once from each of the 2")
    trainers = records(tmp_path)  # the full record, in files
    assert len(trainers) == 2
    # distributed_epoch: every element exactly once across the two trainers
    assert sorted(trainers[0]["distributed_epoch"] + trainers[1]["distributed_epoch"]) == list(range(60))
    # parallel_epochs: each of the 2 workers gives each trainer a full epoch
    for trainer in trainers:
        assert sorted(trainer["parallel_epochs"]) == sorted(list(range(60)) * 2)
    # one job name shared by both trainers: they split the workers' epochs
    assert sorted(trainers[0]["shared_parallel"] + trainers[1]["shared_parallel"]) == sorted(list(range(60)) * 2)
    assert len(said(out.stdout, r"every consumer finished: stopped")) == 3  # the dispatcher and both workers
    assert not [name for name in os.listdir(tmp_path) if name.startswith("tf-data-service")]  # nothing to resume


def test_a_data_worker_killed_mid_epoch_does_not_stop_training(slurm_cluster: dict[str, str], tmp_path: Path) -> None:
    require("tensorflow")
    code, output = run_and_kill("slurm_resolver.training.data_service", ["-N3", "-n5"],
                                ["--modes", "train", "--elements", "6000", "--work", "10"], 1,
                                "worker serving", 1.0, tmp_path)
    trainers = records(tmp_path)
    assert len(trainers) == 2 and all(len(t["train"]) == 6000 for t in trainers), output[-3000:]
    assert said(output, r"dispatcher:0 .*every consumer finished")


def test_a_restarted_dispatcher_resumes_from_its_work_dir(slurm_cluster: dict[str, str], tmp_path: Path) -> None:
    require("tensorflow")
    code, output = run_and_kill("slurm_resolver.training.data_service", ["-N3", "-n5"],
                                ["--modes", "distributed_epoch", "--elements", "3000", "--work", "10",
                                 "--restart-dispatcher", "--keep-work-dir"], None, "", 0.0, tmp_path)
    assert code == 0 and said(output, r"dispatcher restarted from its work_dir"), output[-3000:]
    trainers = records(tmp_path)
    seen = trainers[0]["distributed_epoch"] + trainers[1]["distributed_epoch"]  # type: ignore[operator]
    assert sorted(set(seen)) == list(range(3000))  # every element, across the restart
    assert said(output, r"dispatcher:0 .*distributed_epoch: \d+ elements across 2 trainers")  # and its verdict
    assert any((tmp_path / name).is_dir() for name in os.listdir(tmp_path) if name.startswith("tf-data-service"))


def test_data_parallel_template_trains_with_ddp(slurm_cluster: dict[str, str], tmp_path: Path) -> None:
    require("torch")
    out = submit("data_parallel", tmp_path, nodes="3", tasks_per_node="2", program_args="--epochs 3")
    assert out.returncode == 0, out.stderr + out.stdout
    assert said(out.stdout, r"process group up \(gloo, 6 ranks\)")
    losses = [float(m.group(1)) for line in said(out.stdout, r"epoch \d/3: loss")
              for m in [re.search(r"loss ([\d.]+)", line)] if m]
    assert len(losses) == 3 and losses[-1] < losses[0]
    only_the_jobs_own_lines(out.stdout)


def test_sweep_template_trains_one_ddp_job_per_learning_rate(slurm_cluster: dict[str, str], tmp_path: Path) -> None:
    require("torch")
    sets = {"nodes": "1", "tasks_per_node": "2", "program_args": "--epochs 2 --samples 1024",
            "output": str(tmp_path / "out-%A_%a"), "python": sys.executable}
    out = subprocess.run([*CLI, "submit", "sweep", *[f"--set={k}={v}" for k, v in sets.items()], "--wait",
                          "--timeout", "300"], capture_output=True, text=True, timeout=360, cwd=tmp_path)
    assert out.returncode == 0, out.stderr + out.stdout
    summaries = said(out.stdout, r"summary: 2 epochs on 2 ranks .* at learning rate ([\d.]+)")
    rates = sorted(float(m.group(1)) for line in summaries for m in [re.search(r"learning rate ([\d.]+)", line)] if m)
    assert rates == [0.01, 0.03, 0.1], out.stdout  # the template's three entries, one element each
    assert len(list(tmp_path.glob("out-*_*"))) == 3


def test_jax_template_initialises_from_the_bootstrap(slurm_cluster: dict[str, str], tmp_path: Path) -> None:
    require("jax")
    out = submit("jax", tmp_path, nodes="2", tasks_per_node="1")
    assert out.returncode == 0, out.stderr + out.stdout
    assert said(out.stdout, r"2 processes, 2 devices; sum of ranks 1")
    fitted = said(out.stdout, r"fitted y = ([\d.]+) x")
    assert fitted and abs(float(re.search(r"y = ([\d.]+) x", fitted[0]).group(1)) - 3.0) < 0.1  # type: ignore[union-attr]
