"""The command line on the real cluster: every template through `submit --wait`, `check`, `env`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import json_objects

pytestmark = pytest.mark.slurm

CLI = [sys.executable, "-m", "slurm_resolver"]

CASES = {  # template: (extra --set values, tasks, jobs expected); program= prints each bootstrapped task
    "data_parallel": ({"nodes": "2", "tasks_per_node": "2", "program": ""}, 4, {"worker": 4}),
    "ps_worker": ({"program": ""}, 5, {"chief": 1, "ps": 2, "worker": 2}),
    "chief_evaluator": ({"nodes": "2", "tasks_per_node": "2", "program": ""}, 4,
                        {"chief": 1, "evaluator": 1, "ps": 1, "worker": 1}),
    "data_service": ({"program": ""}, 5, {"data_worker": 2, "dispatcher": 1, "trainer": 2}),
    "jax": ({"nodes": "2", "tasks_per_node": "1", "program": ""}, 2, {"worker": 2}),
    "mpirun": ({"nodes": "2", "tasks_per_node": "2", "mpirun_args": "--allow-run-as-root"}, 4, {"worker": 4}),
    "hetjob": ({}, 3, {"ps": 1, "worker": 2}),
}


def submit(template: str, values: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    sets = [f"--set={k}={v}" for k, v in {**values, "output": str(tmp_path / "out"),
                                          "python": sys.executable}.items()]
    return subprocess.run([*CLI, "submit", template, *sets, "--wait", "--timeout", "180"], capture_output=True,
                          text=True, timeout=240)


@pytest.mark.parametrize("template", sorted(CASES))
def test_submit_wait_runs_every_template(slurm_cluster: dict[str, str], tmp_path: Path, template: str) -> None:
    values, tasks, jobs = CASES[template]
    out = submit(template, values, tmp_path)
    assert out.returncode == 0, out.stderr + out.stdout
    assert "COMPLETED" in out.stderr  # the progress display
    rows = json_objects(out.stdout)  # one answer per job: rank 0's verified cluster
    assert [(r["rank"], r["world_size"]) for r in rows] == [(0, tasks)], out.stdout
    assert {job: len(addresses) for job, addresses in rows[0]["cluster"].items()} == jobs


@pytest.mark.parametrize("template", ["data_parallel", "mpirun", "hetjob"])
def test_every_task_prints_the_same_cluster_with_all_ranks(slurm_cluster: dict[str, str], tmp_path: Path,
                                                          template: str) -> None:
    values, tasks, jobs = CASES[template]
    command = f"{sys.executable} -m slurm_resolver show --bootstrapped --all-ranks"
    out = submit(template, {**values, "command": command}, tmp_path)
    assert out.returncode == 0, out.stderr + out.stdout
    rows = json_objects(out.stdout)
    assert len(rows) == tasks and len({json.dumps(r["cluster"], sort_keys=True) for r in rows}) == 1
    assert sorted(r["rank"] for r in rows) == list(range(tasks))


def test_submit_wait_exits_with_the_jobs_code(slurm_cluster: dict[str, str], tmp_path: Path) -> None:
    out = subprocess.run([*CLI, "submit", "data_parallel", "--set=nodes=1", "--set=tasks_per_node=1",
                          f"--set=output={tmp_path / 'out'}", f"--set=python={sys.executable}",
                          "--set=command=bash -c 'exit 3'", "--wait"], capture_output=True, text=True, timeout=240)
    assert out.returncode == 3 and "FAILED" in out.stderr


def test_check_ok_inside_a_job_once_for_the_job(slurm_cluster: dict[str, str]) -> None:
    out = subprocess.run(["srun", "-N2", "-n2", *CLI, "check"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert [l.split()[1] for l in lines] == ["launcher:", "variables:", "resolution:", "gpus:", "names:", "auth:",
                                             "ports:"]  # rank 0's, once: rank 1 has no failure to report
    assert all(l.startswith("OK") for l in lines) and any("names: all 2" in l for l in lines)
    every = subprocess.run(["srun", "-N2", "-n2", *CLI, "check", "--all-ranks"], capture_output=True, text=True,
                           timeout=60)
    assert len(every.stdout.splitlines()) == 14 and "this is worker:1 (rank 1) on " in every.stdout


def test_a_task_with_a_busy_port_alone_reports_it_with_its_rank(slurm_cluster: dict[str, str]) -> None:
    import socket

    with socket.socket() as held:  # rank 1 of the step on node1 plans port 8889 there
        held.bind(("127.0.1.1", 8889))
        held.listen()
        out = subprocess.run(["srun", "-w", "node1", "-N1", "-n2", *CLI, "check"], capture_output=True, text=True,
                             timeout=60)
    assert out.returncode != 0
    failing = [l for l in out.stdout.splitlines() if l.startswith("FAIL")]
    assert failing == [l for l in failing if l.startswith("FAIL rank 1: ports: port 8889 on node1 is in use")]
    assert len(failing) == 1 and len(out.stdout.splitlines()) == 8  # rank 0's seven lines, and rank 1's failure


def test_show_prints_one_table_for_the_job(slurm_cluster: dict[str, str]) -> None:
    out = subprocess.run(["srun", "-N2", "-n4", *CLI, "show"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 6 and lines[0].startswith("launcher srun: rank 0 of 4") and "other 3 tasks" in lines[0]
    every = subprocess.run(["srun", "-N2", "-n4", *CLI, "show", "--all-ranks"], capture_output=True, text=True,
                           timeout=60)
    assert every.stdout.count("launcher srun: rank") == 4 and len(every.stdout.splitlines()) == 4 * 6


def test_check_fails_with_the_hint_for_an_unresolvable_node(slurm_cluster: dict[str, str]) -> None:
    hosts = Path("/etc/hosts")
    saved = hosts.read_text()
    hosts.write_text("".join(l for l in saved.splitlines(True) if not l.rstrip().endswith(" node4")))
    try:
        out = subprocess.run(["srun", "-w", "node[3-4]", "-N2", "-n2", *CLI, "check"], capture_output=True,
                             text=True, timeout=60)
    finally:
        hosts.write_text(saved)
    assert out.returncode != 0
    failing = [l for l in out.stdout.splitlines() if l.startswith("FAIL")]
    assert failing and all("node4" in l and "hint: add them to DNS or /etc/hosts" in l for l in failing)


def test_env_exports_for_a_shell(slurm_cluster: dict[str, str]) -> None:
    out = subprocess.run(["srun", "-N2", "-n2", "bash", "-c",
                          f"eval \"$({' '.join(CLI)} env --format torch)\"; echo $RANK/$WORLD_SIZE@$MASTER_ADDR"],
                         capture_output=True, text=True, timeout=60, check=True)
    assert sorted(out.stdout.split()) == ["0/2@node1", "1/2@node1"]


def test_a_command_that_bootstraps_itself_runs_under_bootstrap(slurm_cluster: dict[str, str], tmp_path: Path) -> None:
    """`bootstrap -- python train.py` where train.py calls bootstrap() too: the command's bootstrap gets
    rendezvous ports of its own (the same ports made the two meet: 'a second process claims it')."""
    out = subprocess.run(["srun", "-N2", "-n4", *CLI, "bootstrap", "--", sys.executable, "-m",
                          "slurm_resolver.training.resumable", "--steps", "10"], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "finished: 10 steps, model 45 (expected 45)" in out.stdout, out.stdout + out.stderr


def test_bootstrap_without_a_command_prints_the_verified_cluster_once(slurm_cluster: dict[str, str]) -> None:
    out = subprocess.run(["srun", "-N2", "-n4", *CLI, "bootstrap"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    rows = json_objects(out.stdout)
    assert [(r["rank"], r["world_size"], len(r["cluster"]["worker"])) for r in rows] == [(0, 4, 4)]
    every = subprocess.run(["srun", "-N2", "-n4", *CLI, "bootstrap", "--all-ranks"], capture_output=True, text=True,
                           timeout=120)
    assert sorted(r["rank"] for r in json_objects(every.stdout)) == [0, 1, 2, 3]
