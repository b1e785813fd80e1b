"""SlurmClusterResolver on the real cluster, checked against Slurm's own ground truth.

Every task prints what it resolved next to SLURMD_NODENAME and its launcher rank; all
tasks must agree on one cluster, and each must sit where Slurm put it.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ..conftest import sbatch_wait

pytestmark = pytest.mark.slurm

TASK = textwrap.dedent("""
    import json, os
    from slurm_resolver import SlurmClusterResolver
    jobs = json.loads(os.environ.get("TEST_JOBS", "null"))
    r = SlurmClusterResolver(jobs=jobs)
    d = r.cluster.describe()
    d["truth_node"] = os.environ.get("SLURMD_NODENAME")
    d["truth_rank"] = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("SLURM_PROCID", "0")))
    print(json.dumps(d), flush=True)
""")

Run = Callable[..., list[dict[str, Any]]]


def check(rows: list[dict[str, Any]], tasks: int) -> dict[str, Any]:
    assert len(rows) == tasks, rows
    assert len({json.dumps(r["cluster"], sort_keys=True) for r in rows}) == 1, "tasks disagree"
    for row in rows:
        assert row["rank"] == row["truth_rank"]
        assert row["node"] == row["truth_node"]
        assert row["address"].startswith(row["truth_node"] + ":")
        assert row["world_size"] == tasks
    return rows[0]["cluster"]


@pytest.mark.parametrize(("args", "expected"), [
    (["-N3", "-n6"], ["node1:8888", "node1:8889", "node1:8890", "node1:8891", "node2:8888", "node3:8888"]),
    (["-N2", "--ntasks-per-node=2"], ["node1:8888", "node1:8889", "node2:8888", "node2:8889"]),
    (["-N2", "-n4", "-m", "cyclic"], None),
    (["-N2", "--ntasks-per-node=2", "-m", "cyclic"], ["node1:8888", "node2:8888", "node1:8889", "node2:8889"]),
    (["-N2", "-n6", "-m", "plane=2"], None),
    (["--mpi=pmix", "-N2", "-n4", "-m", "cyclic"], None),
])
def test_srun(run_tasks: Run, args: list[str], expected: list[str] | None) -> None:
    cluster = check(run_tasks(["srun", *args], TASK), len(expected) if expected else (6 if "-n6" in args else 4))
    if expected:
        assert cluster == {"worker": expected}


def test_sbatch_batch_step_then_srun(slurm_cluster: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "task.py").write_text(TASK)
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/bash\n{sys.executable} {tmp_path}/task.py\nsrun {sys.executable} {tmp_path}/task.py\n")
    sbatch_wait(script, "-N2", "-n4", "-o", str(tmp_path / "out"))
    rows = [json.loads(l) for l in (tmp_path / "out").read_text().splitlines() if l.startswith("{")]
    batch = [r for r in rows if r["launcher"] == "batch"]
    steps = sorted((r for r in rows if r["launcher"] == "srun"), key=lambda r: r["rank"])
    assert len(batch) == 1 and batch[0]["rank"] == 0 and batch[0]["node"] == "node1"
    assert batch[0]["cluster"] == check(steps, 4)


def test_mpirun_inside_salloc(run_tasks: Run) -> None:
    rows = run_tasks(["salloc", "-N2", "-n4", "mpirun", "--allow-run-as-root"], TASK)
    assert check(rows, 4) == {"worker": ["node1:8888", "node1:8889", "node1:8890", "node2:8888"]}
    assert {r["launcher"] for r in rows} == {"openmpi"}


def test_het_srun_components_as_jobs(run_tasks: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_JOBS", '["ps", "worker"]')
    rows = run_tasks(["srun", "-N1", "-n1", ":", "-N2", "-n3"], TASK)
    cluster = check(rows, 4)
    assert len(cluster["ps"]) == 1 and len(cluster["worker"]) == 3
    assert rows[0]["task_type"] == "ps" and rows[0]["node"] not in {r["node"] for r in rows[1:]}


def test_het_sbatch_hetjob(slurm_cluster: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "task.py").write_text(TASK)
    script = tmp_path / "job.sh"
    script.write_text(textwrap.dedent(f"""\
        #!/bin/bash
        #SBATCH -N1 -n1
        #SBATCH hetjob
        #SBATCH -N2 -n2
        export TEST_JOBS='["ps", "worker"]'
        {sys.executable} {tmp_path}/task.py
        srun --het-group=0,1 {sys.executable} {tmp_path}/task.py
    """))
    sbatch_wait(script, "-o", str(tmp_path / "out"))
    rows = [json.loads(l) for l in (tmp_path / "out").read_text().splitlines() if l.startswith("{")]
    batch = [r for r in rows if r["launcher"] == "batch"]
    steps = sorted((r for r in rows if r["launcher"] == "srun"), key=lambda r: r["rank"])
    cluster = check(steps, 3)
    assert batch[0]["cluster"] == cluster
    assert len(cluster["ps"]) == 1 and len(cluster["worker"]) == 2


def test_two_jobs_on_one_node_do_not_share_a_port_silently(run_tasks: Run, tmp_path: Path) -> None:
    """TensorFlow's fixed ports let a job talk to another job's server: here the port is checked."""
    holder = subprocess.Popen(
        ["srun", "--job-name=sr-port-holder", "-w", "node1", "-N1", "-n1", sys.executable, "-c",
         "import socket,time; s=socket.socket(); s.bind(('node1', 8888)); s.listen(); print('held', flush=True); "
         "time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout and holder.stdout.readline().strip() == "held"
        code = TASK
        rows = run_tasks(["srun", "-w", "node1", "-N1", "-n1"], code, check=False)
        err = run_tasks.last.stderr  # type: ignore[attr-defined]
        assert not rows and "port 8888 on node1 is already in use" in err and "port_base" in err
    finally:
        subprocess.run(["scancel", "--name", "sr-port-holder"], capture_output=True)
        holder.terminate()
        holder.wait(timeout=30)


def test_unresolvable_node_name_falls_back_to_nodeaddr(run_tasks: Run) -> None:
    hosts = Path("/etc/hosts")
    saved = hosts.read_text()
    hosts.write_text("".join(l for l in saved.splitlines(True) if not l.rstrip().endswith(" node4")))
    try:
        with pytest.raises(OSError):
            socket.getaddrinfo("node4", None)
        rows = run_tasks(["srun", "-w", "node4", "-N1", "-n1"], TASK)
        assert rows[0]["address"] == "127.0.1.4:8888"
    finally:
        hosts.write_text(saved)
