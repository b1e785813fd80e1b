"""``slurm-resolver check``: rank 0's checks once for the job, every other task's failures, JSON."""

from __future__ import annotations

import json
from typing import Any

from slurm_resolver.diagnostics import Check, Level, own_row, run_checks
from slurm_resolver.resolution import resolve

from ..conftest import DATA, captured


def test_check_reports_a_malformed_variable() -> None:
    results = run_checks(dict(captured("srun_N3_n6")[0], SLURM_STEP_TASKS_PER_NODE="4,x"))
    failed = [r for r in results if r.level is Level.FAIL]
    assert failed and failed[0].name == "resolution" and "SLURM_STEP_TASKS_PER_NODE" in failed[0].detail


def test_check_warns_when_the_bootstrap_would_not_be_authenticated() -> None:
    env = dict(captured("srun_N3_n6")[0], SLURM_RESOLVER_MUNGE_SOCKET="/nonexistent/munge.socket")
    warned = [r for r in run_checks(env) if r.name == "auth"]
    assert warned and warned[0].level is Level.WARN and "not authenticated" in warned[0].detail


def test_a_task_other_than_rank_0_checks_only_its_own_node_name() -> None:
    names = {whole: next(r for r in run_checks(captured("srun_N3_n6")[4], whole) if r.name == "names").detail
             for whole in (True, False)}
    assert names == {True: "all 3 node names resolve", False: "node2 resolves"}


def test_check_says_where_a_tasks_gpus_come_from_or_why_it_sees_none() -> None:
    env = captured("srun_N3_n6")[0]
    env.pop("CUDA_VISIBLE_DEVICES", None)

    def detail(**more: str) -> str:
        return next(r for r in run_checks(dict(env, **more)) if r.name == "gpus").detail

    assert detail(CUDA_VISIBLE_DEVICES="0,1,2,3") == \
        "0,1,2,3 (from CUDA_VISIBLE_DEVICES): this task gets 0, an even split among node1's 4 tasks"
    assert detail(CUDA_VISIBLE_DEVICES="") == "none visible (CUDA_VISIBLE_DEVICES names none)"
    assert detail().startswith("none visible (no CUDA_VISIBLE_DEVICES")


def test_every_captured_task_finds_its_own_row_right() -> None:
    checked = 0
    for path in sorted((DATA / "env").glob("*.jsonl")):
        for env in captured(path.stem):
            try:
                cluster = resolve(env, exchange="none")
            except Exception:  # noqa: BLE001 - layouts that need an exchange are the bootstrap's to learn
                continue
            assert own_row(cluster) == [], (path.stem, env.get("SLURM_PROCID"))
            checked += 1
    assert checked > 40


def test_rank_0_prints_every_check_and_the_others_nothing_when_all_is_well(cli: Any) -> None:
    tasks = captured("srun_N2_ntasks_per_node2")
    first = cli("check", env=tasks[0])
    assert first.returncode == 0 and [l.split()[1] for l in first.stdout.splitlines()] == \
        ["launcher:", "variables:", "resolution:", "gpus:", "names:", "auth:", "ports:"]
    for env in tasks[1:]:
        out = cli("check", env=env)
        assert out.returncode == 0 and out.stdout == "", out.stdout


def test_a_failing_task_prints_only_its_failures_with_its_rank(cli: Any) -> None:
    out = cli("check", env=dict(captured("srun_N3_n6")[3], SLURM_STEP_TASKS_PER_NODE="4,x"))
    assert out.returncode == 1
    assert out.stdout.splitlines() == [l for l in out.stdout.splitlines() if l.startswith("FAIL rank 3: resolution: ")]
    assert len(out.stdout.splitlines()) == 1


def test_all_ranks_keeps_every_tasks_every_line(cli: Any) -> None:
    out = cli("check", "--all-ranks", env=captured("srun_N3_n6")[3])
    assert len(out.stdout.splitlines()) == 7 and "rank 3: " not in out.stdout


def test_check_json_for_scripts(cli: Any) -> None:
    out = cli("check", "--json", env=captured("srun_N3_n6")[0])
    data = json.loads(out.stdout)
    assert data["rank"] == 0 and data["level"] in ("ok", "warn")
    assert [c["name"] for c in data["checks"]][:3] == ["launcher", "variables", "resolution"]
    assert set(data["checks"][0]) == {"name", "level", "detail", "hint"}
    failing = cli("check", "--json", env=dict(captured("srun_N3_n6")[3], SLURM_STEP_TASKS_PER_NODE="4,x"))
    data = json.loads(failing.stdout)
    assert failing.returncode == 1 and data["rank"] == 3 and data["level"] == "fail"
    assert [c["level"] for c in data["checks"]] == ["fail"]
    assert cli("check", "--json", env=captured("srun_N3_n6")[3]).stdout == ""


def test_outside_any_job_check_warns_that_it_describes_one_local_process(cli: Any) -> None:
    out = cli("check", env={"PATH": "/usr/bin:/bin"})
    assert out.returncode == 0
    assert out.stdout.startswith("WARN launcher: no Slurm job or MPI launch found: the checks below describe this "
                                 "one local process alone (hint: run it inside a job: srun, sbatch or salloc)")


def test_a_warning_line_carries_its_hint_and_an_ok_line_none() -> None:
    assert Check(Level.WARN, "auth", "x", "run munged").line() == "WARN auth: x (hint: run munged)"
    assert Check(Level.OK, "auth", "x", "unused").line() == "OK   auth: x"


def test_check_says_how_tasks_prove_themselves_and_fails_a_secret_that_cannot_be() -> None:
    base = {"SLURM_RESOLVER_MUNGE_SOCKET": "/nonexistent/socket"}
    secret = [r for r in run_checks({**base, "SLURM_RESOLVER_SECRET": "s" * 32}) if r.name == "auth"][0]
    assert secret.level is Level.OK and "a secret in SLURM_RESOLVER_SECRET" in secret.detail
    short = [r for r in run_checks({**base, "SLURM_RESOLVER_SECRET": "short"}) if r.name == "auth"][0]
    assert short.level is Level.FAIL and "too short" in short.detail


def test_check_in_a_task_names_what_env_wrote_in_the_batch_step(cli: Any) -> None:
    """The batch script's footgun, diagnosed: the batch step's RANK=0 is named with its cause, not taken for a
    launcher below srun, and the task's own resolution goes on."""
    batch = cli("env", "--format", "torch", env=dict(captured("sbatch_batch_step")[0], PATH="/usr/bin:/bin"))
    written = dict(line.removeprefix("export ").split("=", 1) for line in batch.stdout.splitlines())
    task = dict(captured("srun_N3_n6")[4], PATH="/usr/bin:/bin", **{k: v.strip("'") for k, v in written.items()})
    out = cli("check", "--all-ranks", env=task)
    lines = out.stdout.splitlines()
    assert out.returncode == 1 and lines[0].startswith("OK   launcher: srun:"), out.stdout
    assert lines[1].startswith("FAIL leftovers: RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE came from the batch "
                               "step: `slurm-resolver env` wrote them there"), lines
    assert any(line.startswith("OK   resolution: 6 tasks; this is worker:4 (rank 4)") for line in lines), lines
