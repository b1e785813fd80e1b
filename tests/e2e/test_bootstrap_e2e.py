"""Bootstrap on the real cluster: srun, mpirun, sbatch, two jobs at once, a dead rank, frameworks."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ..conftest import json_objects, require, sbatch_wait

pytestmark = pytest.mark.slurm

TASK = textwrap.dedent("""
    import json, os, sys, time
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("SLURM_PROCID", "0")))
    if rank == int(os.environ.get("TEST_DIE_RANK", "-1")):
        sys.exit(0)  # this rank dies before it bootstraps
    if rank == int(os.environ.get("TEST_KILL_RANK", "-1")):  # this rank dies in the middle of the exchange
        import signal, threading
        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGKILL)).start()
    time.sleep(float(os.environ.get("TEST_STAGGER", "0")) * ((rank * 7919) % 11) / 10)  # a start-up storm
    from slurm_resolver import SlurmResolverError, bootstrap
    start = time.monotonic()
    try:
        b = bootstrap(timeout=float(os.environ.get("TEST_TIMEOUT", "30")))
    except SlurmResolverError as exc:
        print(json.dumps({"error": str(exc), "truth_rank": rank, "truth_node": os.environ["SLURMD_NODENAME"],
                          "after": time.monotonic() - start}), flush=True)
        sys.exit(0)
    print(json.dumps({"rank": b.rank, "truth_rank": rank, "node": b.me.node,
                      "truth_node": os.environ["SLURMD_NODENAME"],
                      "spec": b.cluster_spec().as_dict(), "launcher": b.launcher, "rank0": b.task(0).port,
                      "exchanged": b.exchanged, "timings": b.timings}),
          flush=True)
    time.sleep(float(os.environ.get("TEST_HOLD", "0")))  # keep the servers up (two jobs overlap)
    b.stop()
""")

Run = Callable[..., list[dict[str, Any]]]


def agreed(rows: list[dict[str, Any]], tasks: int) -> dict[str, Any]:
    assert len(rows) == tasks and not [r for r in rows if "error" in r], rows
    assert len({json.dumps(r["spec"], sort_keys=True) for r in rows}) == 1
    for row in rows:
        assert row["rank"] == row["truth_rank"] and row["node"] == row["truth_node"]
    spec = rows[0]["spec"]
    assert len({a for tasks_ in spec.values() for a in tasks_}) == tasks  # every task its own bound port
    return spec


def test_srun_three_nodes_six_tasks(run_tasks: Run) -> None:
    spec = agreed(run_tasks(["srun", "-N3", "-n6"], TASK), 6)
    assert [a.split(":")[0] for a in spec["worker"]] == ["node1"] * 4 + ["node2", "node3"]


@pytest.mark.parametrize("mpi, exchanged", [("pmix", "mpi"), ("pmi2", "tree")])
def test_srun_with_mpi_plugins(run_tasks: Run, mpi: str, exchanged: str) -> None:
    """With PMIx, MPI initialises through Slurm and carries the exchange; PMI-2 is never tried (Debian's
    Open MPI aborts in MPI_Init there), so the tree does."""
    rows = run_tasks(["srun", f"--mpi={mpi}", "-N2", "-n3"], TASK)
    agreed(rows, 3)
    assert {r["exchanged"] for r in rows} == {exchanged}


def test_sixteen_tasks_on_four_nodes(run_tasks: Run) -> None:
    rows = run_tasks(["srun", "-N4", "-n16"], TASK)
    spec = agreed(rows, 16)
    assert [a.split(":")[0] for a in spec["worker"]] == [f"node{n}" for n in range(1, 5) for _ in range(4)]
    assert {r["exchanged"] for r in rows} == {"tree"}


def test_mpirun_inside_salloc(run_tasks: Run) -> None:
    rows = run_tasks(["salloc", "-N2", "-n4", "mpirun", "--allow-run-as-root"], TASK)
    agreed(rows, 4)
    assert {r["launcher"] for r in rows} == {"openmpi"} and {r["exchanged"] for r in rows} == {"mpi"}


def test_from_an_sbatch_script(slurm_cluster: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "task.py").write_text(TASK)
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/bash\nsrun {sys.executable} {tmp_path}/task.py\n")
    sbatch_wait(script, "-N2", "-n4", "-o", str(tmp_path / "out"))
    rows = sorted(json_objects((tmp_path / "out").read_text()), key=lambda r: r["truth_rank"])
    agreed(rows, 4)


def test_two_jobs_at_once_on_the_same_nodes(slurm_cluster: dict[str, str], tmp_path: Path) -> None:
    """Both jobs are given the same rendezvous ports on purpose: each must skip the other's server."""
    (tmp_path / "task.py").write_text(TASK)
    env = {**__import__("os").environ, "SLURM_RESOLVER_RENDEZVOUS_PORTS": "31001,31002,31003,31004",
           "TEST_HOLD": "3"}
    for _ in range(3):
        jobs = [subprocess.Popen(["srun", "-w", "node[1-2]", "-N2", "-n3", sys.executable, str(tmp_path / "task.py")],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
                for _ in range(2)]
        specs, rank0_ports = [], []
        for job in jobs:
            out, err = job.communicate(timeout=120)
            rows = sorted(json_objects(out), key=lambda r: r["truth_rank"])
            assert len(rows) == 3, (rows, err[-4000:])
            specs.append(agreed(rows, 3))
            rank0_ports.append(rows[0]["rank0"])
        # Both jobs held their servers at once: never one server for both, never the same rendezvous.
        assert not set(specs[0]["worker"]) & set(specs[1]["worker"]), "the jobs share a server"
        assert rank0_ports[0] != rank0_ports[1]


def test_a_leader_killed_mid_exchange_is_named(run_tasks: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rank 4 leads node2 and dies (SIGKILL) while its node's tasks wait on it."""
    monkeypatch.setenv("TEST_KILL_RANK", "4")
    monkeypatch.setenv("TEST_DIE_RANK", "7")  # keeps the round open past the kill
    monkeypatch.setenv("TEST_TIMEOUT", "4")
    rows = run_tasks(["srun", "-N2", "-n8", "--ntasks-per-node=4"], TASK, check=False)
    assert len(rows) == 6 and all("error" in r for r in rows), rows
    for row in rows:
        assert row["after"] < 10
        assert "rank 4" in row["error"] or "(rank 4)" in row["error"], row


@pytest.mark.parametrize("dead", [2, 0])
def test_a_dead_rank_is_named_within_the_timeout(run_tasks: Run, monkeypatch: pytest.MonkeyPatch, dead: int) -> None:
    monkeypatch.setenv("TEST_DIE_RANK", str(dead))
    monkeypatch.setenv("TEST_TIMEOUT", "4")
    rows = run_tasks(["srun", "-N2", "-n3"], TASK)
    assert len(rows) == 2 and all("error" in r for r in rows), rows
    # Block distribution: ranks 0 and 1 share the first node, rank 2 has the second (whichever nodes Slurm gave).
    first = next(r["truth_node"] for r in rows if r["truth_rank"] == 1)
    for row in rows:
        assert row["after"] < 15
        if dead == 2:
            assert re.search(r"worker:2 \(rank 2\) on node\d", row["error"]), row
            assert f"worker:2 (rank 2) on {first}" not in row["error"], row
        else:
            assert f"rank 0 (worker:0 on {first}) did not answer" in row["error"], row


TF_TASK = textwrap.dedent("""
    import json, os, pathlib, time
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    from slurm_resolver import adapters, bootstrap, resolve
    done = pathlib.Path(os.environ["TEST_DONE"])
    b = bootstrap(resolve(jobs={"ps": 1, "worker": 2}), timeout=60)
    import tensorflow as tf
    if (b.task_type, b.task_id) == ("worker", 0):
        b.barrier("tensorflow")  # every other task's TensorFlow server listens
        tf.config.experimental_connect_to_cluster(adapters.tensorflow_resolver(b), job_name="worker", task_index=0)
        with tf.device("/job:ps/replica:0/task:0/device:CPU:0"):
            v = tf.Variable(3.0)
            doubled = v * 2.0
        print(json.dumps({"device": v.device, "value": float(doubled.numpy()),
                          "spec": b.framework_spec().as_dict()}), flush=True)
        done.write_text("done")
    else:
        server = adapters.tensorflow_server(b)
        deadline = time.monotonic() + 120
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
""")


def test_tensorflow_op_on_ps_from_worker(run_tasks: Run, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    require("tensorflow")
    monkeypatch.setenv("TEST_DONE", str(tmp_path / "done"))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    rows = run_tasks(["srun", "-N3", "-n3"], TF_TASK, timeout=240)
    assert len(rows) == 1 and "/job:ps/" in rows[0]["device"] and rows[0]["value"] == 6.0
    assert [a.split(":")[0] for a in rows[0]["spec"]["worker"]] == ["node2", "node3"]


TORCH_TASK = textwrap.dedent("""
    import json, os
    from slurm_resolver import adapters, bootstrap
    b = bootstrap(timeout=60)
    adapters.apply(adapters.torch_env(b))
    b.stop(0)
    import torch, torch.distributed as dist
    dist.init_process_group("gloo", init_method="env://")
    t = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(t)
    print(json.dumps({"rank": dist.get_rank(), "world": dist.get_world_size(), "sum": t.item(),
                      "node": os.environ["SLURMD_NODENAME"], "truth_rank": int(os.environ["SLURM_PROCID"])}),
          flush=True)
    dist.destroy_process_group()
""")


def test_pytorch_all_reduce_with_gloo(run_tasks: Run) -> None:
    require("torch")
    rows = run_tasks(["srun", "-N3", "-n3"], TORCH_TASK, timeout=240)
    assert [(r["rank"], r["world"], r["sum"]) for r in rows] == [(0, 3, 6.0), (1, 3, 6.0), (2, 3, 6.0)]
    assert sorted(r["node"] for r in rows) == ["node1", "node2", "node3"]


JAX_TASK = textwrap.dedent("""
    import json, os
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    from slurm_resolver import adapters, bootstrap
    b = bootstrap(timeout=60)
    arguments = adapters.jax_arguments(b)
    b.stop()
    import jax
    jax.distributed.initialize(**arguments)
    print(json.dumps({"process_count": jax.process_count(), "process_index": jax.process_index(),
                      "truth_rank": int(os.environ["SLURM_PROCID"]), "node": os.environ["SLURMD_NODENAME"]}),
          flush=True)
    jax.distributed.shutdown()
""")


def test_jax_distributed_initialize(run_tasks: Run) -> None:
    require("jax")
    rows = run_tasks(["srun", "-N2", "-n2"], JAX_TASK, timeout=240)
    assert [(r["process_count"], r["process_index"]) for r in rows] == [(2, 0), (2, 1)]
    assert sorted(r["node"] for r in rows) == ["node1", "node2"]


def test_a_start_up_storm_on_busy_cores_still_bootstraps(run_tasks: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    """The 4x4 bootstrap with every core of the machine busy (a CPU hog per core) and the tasks
    starting up to 5 s apart, as thousands of processes importing from a shared file system do:
    slow handshakes and late leaders are waited for within the timeout, never fail the job."""
    import signal

    hog = "import os, time\nparent, end = os.getppid(), time.monotonic() + 600\n" \
          "while os.getppid() == parent and time.monotonic() < end: pass"
    hogs = [subprocess.Popen([sys.executable, "-c", hog]) for _ in range(os.cpu_count() or 2)]  # that end with pytest
    try:
        monkeypatch.setenv("TEST_STAGGER", "5")
        monkeypatch.setenv("TEST_TIMEOUT", "60")
        for _ in range(2):
            agreed(run_tasks(["srun", "-N4", "-n16"], TASK, timeout=180), 16)
    finally:
        for hog in hogs:
            hog.send_signal(signal.SIGKILL)
            hog.wait()
