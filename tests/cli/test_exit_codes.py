"""What the command line returns: 0, 1 with one line and a hint, 2 for usage, 130 for Ctrl-C."""

from __future__ import annotations

import os
from typing import Any

import pytest

from slurm_resolver import cli as cli_module

from ..conftest import captured, require_command


def test_errors_are_one_line_with_exit_code_1(cli: Any) -> None:
    env = dict(captured("srun_N3_n6")[0], SLURM_STEP_TASKS_PER_NODE="4,x")
    out = cli("show", env=env)
    assert out.returncode == 1
    assert out.stderr.count("\n") == 1 and "SLURM_STEP_TASKS_PER_NODE='4,x' is invalid" in out.stderr
    assert "Traceback" not in out.stderr


def test_a_missing_variable_is_named_apart_from_the_text(cli: Any) -> None:
    env = {k: v for k, v in captured("srun_N3_n6")[0].items() if k != "SLURM_STEP_NODELIST"}
    out = cli("show", env=env)
    assert out.returncode == 1 and "SLURM_STEP_NODELIST is not set: expected" in out.stderr


def test_usage_error_exit_code_2(cli: Any) -> None:
    assert cli("frobnicate").returncode == 2
    for args in (["render", "nope"], ["submit", "nope"], ["templates", "nope"],
                 ["render", "ps_worker", "--set", "nodes"], ["render", "ps_worker", "--set", "nodes=four"],
                 ["render", "ps_worker", "--set", "node=4"]):
        out = cli(*args)
        assert out.returncode == 2 and out.stderr.count("\n") == 1, (args, out.stderr)


@pytest.mark.parametrize("args", [["submit", "data_parallel", "--timeout", "-5"],
                                  ["submit", "data_parallel", "--timeout", "nan"],
                                  ["bootstrap", "--timeout", "0"], ["show", "--port-base", "70000"]])
def test_impossible_numbers_are_usage_errors(cli: Any, args: list[str]) -> None:
    out = cli(*args)
    assert out.returncode == 2 and ("seconds" in out.stderr or "TCP port" in out.stderr), out.stderr


def test_global_options_work_before_and_after_the_command(cli: Any) -> None:
    env = dict(captured("srun_N3_n6")[0], SLURM_STEP_TASKS_PER_NODE="4,x")
    for args in (["--debug", "show"], ["show", "--debug"]):
        assert "Traceback" in cli(*args, env=env).stderr, args
    for args in (["-v", "show"], ["show", "-v"], ["show", "--verbose"]):
        out = cli(*args, env=captured("srun_N3_n6")[0])
        assert out.returncode == 0 and "port_base: 8888 (default)" in out.stderr, (args, out.stderr)
    assert "port_base" not in cli("show", env=captured("srun_N3_n6")[0]).stderr


def test_help_gives_defaults_units_and_examples(cli: Any) -> None:
    helps = {name: " ".join(cli(name, "--help").stdout.split()) for name in ("show", "env", "bootstrap", "submit",
                                                                             "check")}
    assert "default: shell" in helps["env"] and "default: 60 s" in helps["bootstrap"]
    assert "default: 3600 s" in helps["submit"] and "8888" in helps["show"]
    assert all("examples: " in text for text in helps.values())
    assert "--all-ranks" in helps["check"] and "WARN" in helps["check"]


class Interrupted:
    """Stands for a list whose reading the user interrupts (Ctrl-C)."""

    def __iter__(self) -> object:
        raise KeyboardInterrupt


def test_ctrl_c_exits_130(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("slurm_resolver.launchers.LAUNCHERS", Interrupted())
    assert cli_module.main(["launchers"]) == 130
    assert "interrupted" in capsys.readouterr().err


def test_bootstrap_outside_a_launch_is_a_one_line_error(cli: Any) -> None:
    batch = {"SLURM_JOB_ID": "5", "SLURM_PROCID": "0", "SLURMD_NODENAME": "localhost", "PATH": "/usr/bin:/bin",
             "SLURM_JOB_NODELIST": "localhost", "SLURM_TASKS_PER_NODE": "2", "CUDA_VISIBLE_DEVICES": ""}
    out = cli("bootstrap", "--", "true", env=batch)
    assert out.returncode == 1 and out.stderr.count("\n") == 1 and "srun" in out.stderr


def test_submit_without_a_controller_points_at_slurms_configuration(cli: Any) -> None:
    require_command("sbatch", "scripts/testcluster up")
    env = {k: v for k, v in os.environ.items() if k != "SLURM_CONF"}
    out = cli("submit", "data_parallel", env=env)
    assert out.returncode == 1 and out.stderr.count("\n") == 1, out.stderr
    assert "Could not establish a configuration source" in out.stderr
    assert "set SLURM_CONF to the cluster's slurm.conf" in out.stderr and "render" not in out.stderr


def test_an_error_every_task_computes_alike_is_said_by_rank_0_alone(cli: Any) -> None:
    said = [cli("show", "--jobs", "ps=1,worker=2", env=task) for task in captured("srun_N3_n6")]
    assert all(out.returncode == 1 for out in said) and [out.stderr for out in said[1:]] == [""] * 5
    assert said[0].stderr == ("slurm-resolver: error: --jobs ps=1,worker=2 ask for 3 tasks, but the job has 6 (hint: "
                              "e.g. --jobs ps=1,worker=5 for the job's 6 tasks, or launch 3 tasks (srun -n3))\n")


def test_a_usage_error_is_said_by_rank_0_alone(cli: Any) -> None:
    tasks = captured("srun_N3_n6")
    assert cli("show", "--josn", env=tasks[0]).stderr.endswith("--josn (did you mean --json?)\n")
    quiet = cli("show", "--josn", env=tasks[3])
    assert quiet.returncode == 2 and quiet.stderr == ""


@pytest.mark.parametrize("args, said", [(["shwo"], "invalid choice: 'shwo' (did you mean show?)"),
                                        (["env", "--format", "pytorch"], "(did you mean torch?)"),
                                        (["show", "--jobs", "ps=x"], "'ps=x' is not name=count pairs"),
                                        (["run"], "run needs a command"), (["run", "--"], "run needs a command")])
def test_usage_errors_exit_2_with_what_was_meant(cli: Any, args: list[str], said: str) -> None:
    out = cli(*args)
    assert out.returncode == 2 and said in out.stderr, out.stderr


def test_outside_any_job_an_error_caused_by_it_begins_with_that_fact(cli: Any) -> None:
    out = cli("show", "--jobs", "ps=1,worker=2", env={"PATH": "/usr/bin:/bin"})
    assert out.returncode == 1 and out.stderr.startswith("slurm-resolver: error: no Slurm job or MPI launch found: "
                                                         "this is one local process, but --jobs ps=1,worker=2 ask")
    alone = cli("bootstrap", env={"PATH": "/usr/bin:/bin", "SLURM_RESOLVER_AUTH": "none"})
    assert alone.returncode == 0 and alone.stderr.splitlines() == [
        "slurm-resolver: no Slurm job or MPI launch found: the bootstrap describes this one local process alone "
        "(rank 0 of 1); run it inside srun, sbatch or salloc to see a job"]


def test_help_is_grouped_and_says_the_global_options_once(cli: Any) -> None:
    top = cli("--help").stdout
    assert [line for line in top.splitlines() if line.endswith(":") and not line.startswith(" ")][:5] == [
        "in a job (srun ... slurm-resolver COMMAND runs it in every task):", "submitting a job:",
        "a running job (from the login node):", "tools:", "options:"]
    for name in ("show", "render", "submit"):
        text = cli(name, "--help").stdout
        assert "--verbose" not in text and "--debug" not in text, name
    assert len(cli("render", "--help").stdout.splitlines()) < 25
