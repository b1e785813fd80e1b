"""Trouble said once, on the real cluster: an error every task computes alike, a bootstrap missing a task,
``-v``'s lines, ``submit --wait`` following the output as it is written, and the batch script's footgun."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ..conftest import sbatch_wait

pytestmark = pytest.mark.slurm

CLI = [sys.executable, "-m", "slurm_resolver"]


def said(stderr: str) -> list[str]:
    """slurm-resolver's own lines (srun's are left out)."""
    return [line for line in stderr.splitlines() if line.startswith(("slurm-resolver", "usage:"))]


@pytest.mark.parametrize("tasks", [4, 8])
def test_an_error_every_task_computes_alike_is_said_once_at_any_task_count(slurm_cluster: dict[str, str],
                                                                           tasks: int) -> None:
    out = subprocess.run(["srun", "-N4", f"-n{tasks}", *CLI, "show", "--jobs", "ps=1,worker=2"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 1 and said(out.stderr) == [
        f"slurm-resolver: error: --jobs ps=1,worker=2 ask for 3 tasks, but the job has {tasks} (hint: e.g. --jobs "
        f"ps=1,worker={tasks - 1} for the job's {tasks} tasks, or launch 3 tasks (srun -n3))"], out.stderr
    usage = subprocess.run(["srun", "-N4", f"-n{tasks}", *CLI, "show", "--josn"], capture_output=True, text=True,
                           timeout=120)
    assert usage.returncode == 2 and said(usage.stderr)[-1].endswith("--josn (did you mean --json?)")
    assert len([line for line in said(usage.stderr) if "error" in line]) == 1, usage.stderr


def test_a_task_that_never_bootstraps_is_named_once(slurm_cluster: dict[str, str]) -> None:
    skip = f"if [ $SLURM_PROCID != 5 ]; then {' '.join(CLI)} bootstrap --timeout 5 -- true; fi"
    out = subprocess.run(["srun", "-N4", "-n8", "bash", "-c", skip], capture_output=True, text=True, timeout=120)
    errors = said(out.stderr)
    assert out.returncode == 1 and len(errors) == 1, out.stderr
    assert re.match(r"slurm-resolver: error: rank 0: bootstrap: 1 of 8 tasks did not join the bootstrap within 5 s: "
                    r"worker:5 \(rank 5\)", errors[0]), errors


def test_a_root_that_never_bootstraps_is_named_once_by_a_task_of_another_node(slurm_cluster: dict[str, str]) -> None:
    """Every task that calls rank 0 directly finds it silent: one of them says so, on another node than rank 0's."""
    skip = f"if [ $SLURM_PROCID != 0 ]; then {' '.join(CLI)} bootstrap --timeout 5 -- true; else sleep 8; fi"
    out = subprocess.run(["srun", "-N4", "-n8", "bash", "-c", skip], capture_output=True, text=True, timeout=120)
    errors = said(out.stderr)
    assert out.returncode == 1 and len(errors) == 1, out.stderr
    assert re.match(r"slurm-resolver: error: rank [1-7]: bootstrap: rank 0 \(worker:0 on (node\d)\) did not answer on "
                    r"\1 ", errors[0]), errors


def test_a_late_root_leaves_the_tasks_that_gave_up_waiting_on_it_silent(slurm_cluster: dict[str, str]) -> None:
    """Tasks that started well before rank 0 give up before it decides; it answered them, and says why, once."""
    late = (f"if [ $SLURM_PROCID = 0 ]; then sleep 2; fi; if [ $SLURM_PROCID != 5 ]; then {' '.join(CLI)} bootstrap "
            "--timeout 6 -- true; fi")
    out = subprocess.run(["srun", "-N4", "-n8", "bash", "-c", late], capture_output=True, text=True, timeout=120)
    errors = said(out.stderr)
    assert out.returncode == 1 and len(errors) == 1, out.stderr
    assert re.match(r"slurm-resolver: error: rank 0: bootstrap: 1 of 8 tasks did not join the bootstrap within 6 s: "
                    r"worker:5 \(rank 5\)", errors[0]), errors


def test_verbose_lines_begin_with_their_task_and_leave_grpc_out(slurm_cluster: dict[str, str]) -> None:
    out = subprocess.run(["srun", "-N2", "-n4", *CLI, "-v", "bootstrap", "--", "true"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = said(out.stderr)
    assert lines and all(re.match(r"slurm-resolver: rank [0-3] node[1-4]: ", line) for line in lines), lines
    assert not any(word in out.stderr for word in ("_cygrpc", "Using selector", "POLLER", "Launch("))
    settings = [line.split(": ", 2)[2] for line in lines if re.search(r": (jobs|port_base|exchange): ", line)]
    assert sorted(set(settings)) == ["exchange: auto (default)", "jobs: not set (one job 'worker')",
                                     "port_base: 8888 (default)"] and len(settings) == 12, settings  # no reprs
    decisions = [line for line in lines if ": bootstrap: " in line]
    assert len(decisions) == 4 and all(" s (" in line and "verified" in line for line in decisions), decisions


def test_submit_wait_shows_each_line_within_seconds_of_its_writing(slurm_cluster: dict[str, str],
                                                                   tmp_path: Path) -> None:
    output = tmp_path / "out-%j.txt"
    command = "bash -c 'date +%s.%N; sleep 10; echo done; exit 3'"
    follow = subprocess.Popen([*CLI, "submit", "data_parallel", "--set=nodes=1", "--set=tasks_per_node=1",
                               f"--set=output={output}", f"--set=python={sys.executable}", f"--set=command={command}",
                               "--wait", "--timeout", "180"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    assert follow.stdout is not None and follow.stderr is not None
    try:
        first = follow.stdout.readline()  # the job's first line, read as it arrives
        arrived = time.time()
        rest = follow.stdout.read()
        code = follow.wait(timeout=60)
    finally:
        follow.kill()
    assert arrived - float(first) < 5.0, (first, arrived)  # not at the job's end, 10 s later
    assert "done" in rest and code == 3
    progress = follow.stderr.read().splitlines()
    job = progress[0].split()[-1]
    path = str(output).replace("%j", job)
    assert progress[1] == f"slurm-resolver: output: {path}" and not any(l.endswith("nodes ") for l in progress)
    assert re.fullmatch(rf"job {job} FAILED \(exit 3\) after \d\d:\d\d:\d\d: see {re.escape(path)}", progress[-1])


def test_env_in_the_batch_script_warns_and_the_refusal_names_its_cause(slurm_cluster: dict[str, str],
                                                                     tmp_path: Path) -> None:
    cli = " ".join(CLI)
    script = tmp_path / "job.sbatch"
    script.write_text(f"#!/bin/bash\n#SBATCH -N4 -n8 -o {tmp_path}/out.txt\n"
                      f"eval \"$({cli} env --format torch)\"\n"
                      f"srun {cli} bootstrap --format torch -- true\n")
    sbatch_wait(script)
    lines = said((tmp_path / "out.txt").read_text())
    assert len(lines) == 2 and all(len(line) < 500 for line in lines), lines  # not one a task, nor the JSON
    assert lines[0].startswith("slurm-resolver: warning: env describes the batch step, this one process, not the "
                               "tasks srun starts: every task given these variables would be rank 0")
    assert lines[1].startswith("slurm-resolver: error: refusing to replace ") and "SLURM_RESOLVER_DEVICES" in lines[1]
    assert "and 2 more" in lines[1]  # SLURM_RESOLVER_TASK and WORLD_SIZE: six are named, the rest counted
    assert "`slurm-resolver env` wrote them in the batch step (rank 0 of 8" in lines[1] and "{" not in lines[1]
