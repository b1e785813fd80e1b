"""Templates: golden files of the rendered text, valid bash, and the schema's errors."""

from __future__ import annotations

import shlex
import subprocess
import sys

import pytest

from slurm_resolver.errors import ConfigurationError
from slurm_resolver.templates import (
    SCHEMA,
    TemplateParameterError,
    _own_defaults,
    available,
    defaults,
    render,
    sbatch_header,
)

from .conftest import DATA

TEMPLATES = ["chief_evaluator", "data_parallel", "data_service", "hetjob", "jax", "mpirun", "ps_worker", "sweep"]
GOLDEN = {"python": "/usr/bin/python3", "partition": "debug"}


def test_every_topology_is_bundled() -> None:
    assert available() == TEMPLATES


@pytest.mark.parametrize("name", TEMPLATES)
def test_golden(name: str) -> None:
    assert render(name, GOLDEN) == (DATA / "golden" / f"{name}.sbatch").read_text(), \
        f"regenerate: slurm-resolver render {name} --set python=/usr/bin/python3 --set partition=debug"


@pytest.mark.parametrize("name", TEMPLATES)
def test_bash_accepts_it(name: str) -> None:
    text = render(name, {"command": "echo 'a b' \"$HOME\"", "extra_sbatch": "--exclusive; --mail-type=END"})
    subprocess.run(["bash", "-n"], input=text, text=True, check=True)


def test_values_are_quoted() -> None:
    text = render("data_parallel", {"job_name": "train@v2", "python": "/opt/my python/bin/python", "program": ""})
    assert "#SBATCH --job-name=train@v2" in text and "'/opt/my python/bin/python' -m slurm_resolver" in text


@pytest.mark.parametrize("key, good, bad", [
    ("nodes", ["1", "4096", ""], ["0", "-1", "abc", "2.5", " 2"]),
    ("time", ["30", "30:00", "01:30:00", "2-12", "2-12:30", "2-12:30:15"], ["1h", "1:2:3:4", "-1", "2-", "x"]),
    ("gpus_per_task", ["", "1", "8", "a100:2", "nvidia_h100:1"], ["0", "two", "a100:", ":2", "a100:0"]),
    ("job_name", ["train", "ps-worker_v2.1"], ["x; rm -rf /", "$(id)", "a b", "", "-flag"]),
    ("partition", ["", "debug", "gpu-long"], ["debug;x", "a'b"]),
    ("output", ["out-%j.txt", "/scratch/me/logs/%x-%j.out"], ["a;b", "$HOME/x", "`id`"]),
    ("jobs", ["", "ps=1,worker=3", "ps,worker"], ["ps=", "ps=1,,worker=2", "ps=x", "1ps=2"]),
    ("format", ["tf", "jax"], ["mxnet", ""]),
    ("hetjob", ["0", "1"], ["yes", "2", ""]),
    ("program", ["", "slurm_resolver.training.ddp"], ["a b", "1module", "x;y"]),
    ("command", ["python train.py --lr 0.1", "echo \"$HOME\""], ["a\nb"]),
    ("array", ["", "0-7", "1,3,5", "0-15:4", "0-7%2", "0,4-6%1"], ["-1", "0-", "a-b", "0-7%", "0-7%0", "0;1", "0 1"]),
    ("signal", ["", "USR2@60", "TERM@300"], ["USR2", "KILL@60", "USR2@-1"]),
    ("requeue", ["0", "1"], ["yes", ""]),
])
def test_every_parameter_is_checked_by_its_kind(key: str, good: list[str], bad: list[str]) -> None:
    for value in good:
        render("data_parallel", {key: value})
    for value in bad:
        with pytest.raises(TemplateParameterError) as info:
            render("data_parallel", {key: value})
        assert f"{key}={value!r}" in info.value.message and "e.g. --set" in str(info.value.hint)


def test_empty_options_are_left_out() -> None:
    text = render("data_parallel", {"partition": "", "account": "", "gpus_per_task": ""})
    assert "--partition" not in text and "--account" not in text and "--gpus-per-task" not in text
    assert "#SBATCH --gpus-per-task=1" in render("data_parallel", {"gpus_per_task": "1"})


@pytest.mark.parametrize("key, guess", [("nodez", "nodes"), ("node", "nodes"), ("task_per_node", "tasks_per_node"),
                                        ("gpus-per-nodes", "gpus_per_task"), ("jbos", "jobs")])
def test_an_unknown_key_suggests_the_closest_names_in_one_short_line(key: str, guess: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        render("ps_worker", {key: "3"})
    line = info.value.one_line()
    assert f"unknown template parameter {key!r}" in line and f"did you mean {guess}" in line
    assert len(line) < 160 and "/" not in line.replace("render|submit", "")  # no machine path, no listing


def test_an_unknown_key_without_a_close_name_points_at_the_listing() -> None:
    with pytest.raises(ConfigurationError) as info:
        render("ps_worker", {"frobnicate": "3"})
    assert info.value.hint == ("`slurm-resolver templates` lists every parameter; a program's own option goes in "
                               "program_args: --set program_args='--frobnicate 3'")


@pytest.mark.parametrize("key, value, hint", [("gpus", "2", "did you mean gpus_per_task?"),
                                              ("epochs", "3", "--set program_args='--epochs 3'")])
def test_a_word_that_names_no_parameter_gets_the_parameter_it_means(key: str, value: str, hint: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        render("data_parallel", {key: value})
    assert hint in str(info.value.hint)


def test_a_misspelt_choice_is_answered_with_the_closest() -> None:
    with pytest.raises(ConfigurationError) as info:
        render("data_parallel", {"format": "pytorch"})
    assert info.value.hint == "e.g. --set format=torch"


@pytest.mark.parametrize("spelling, name", [("tasks-per-node", "tasks_per_node"), ("ntasks-per-node", "tasks_per_node"),
                                            ("ntasks", "tasks"), ("job-name", "job_name"),
                                            ("cpus-per-task", "cpus_per_task"), ("gpus-per-task", "gpus_per_task"),
                                            ("program-args", "program_args")])
def test_sbatch_spellings_mean_the_parameter_they_name(spelling: str, name: str) -> None:
    value = {"job_name": "x", "program_args": "--epochs 3"}.get(name, "4")
    assert render("data_parallel", {spelling: value}) == render("data_parallel", {name: value})


def test_a_parameter_given_twice_differently_is_refused() -> None:
    with pytest.raises(TemplateParameterError, match="given twice"):
        render("data_parallel", {"tasks_per_node": "2", "ntasks-per-node": "4"})


def test_a_hint_does_not_repeat_the_message() -> None:
    for key, bad, example in (("nodes", "abc", "2"), ("jobs", "ps=", "ps=1,worker=3"), ("time", "1h", "00:10:00"),
                              ("python", "a;b", "/usr/bin/python3")):
        with pytest.raises(TemplateParameterError) as info:
            render("data_parallel", {key: bad})
        assert info.value.hint == f"e.g. --set {key}={example}"


def test_a_requeueable_job_appends_to_its_output() -> None:
    assert "#SBATCH --requeue\n#SBATCH --open-mode=append\n" in render("data_parallel")
    assert "--open-mode" not in render("data_parallel", {"requeue": "0"})


def test_errors() -> None:
    with pytest.raises(ConfigurationError, match="no template named"):
        render("nope")
    with pytest.raises(ConfigurationError, match="one line"):
        render("data_parallel", {"command": "a\nb"})
    with pytest.raises(ConfigurationError, match="format"):
        render("data_parallel", {"format": "mxnet"})


def test_header_and_defaults() -> None:
    assert defaults("ps_worker")["jobs"] == "chief=1,ps=2,worker=2"
    assert {p.name for p in SCHEMA} >= {"nodes", "tasks_per_node", "gpus_per_task", "cpus_per_task", "time",
                                        "partition", "account", "jobs", "command", "extra_sbatch"}
    het = sbatch_header({"nodes": "2", "ps_nodes": "1", "tasks_per_node": "1"}, het=True)
    assert het.splitlines()[:3] == ["#SBATCH --nodes=1", "#SBATCH --ntasks-per-node=1", "#SBATCH hetjob"]


def test_defaults_are_read_by_their_marker_and_checked_against_the_schema() -> None:
    text = "#!/bin/bash\n# A comment first.\n# defaults: nodes=3 hetjob=1\nsrun true\n"
    assert _own_defaults("t", text) == {"nodes": "3", "hetjob": "1"}
    with pytest.raises(ConfigurationError, match="unknown parameters \\['nodez'\\]"):
        _own_defaults("t", "# defaults: nodez=3\n")
    with pytest.raises(ConfigurationError, match="2 '# defaults:' lines"):
        _own_defaults("t", "# defaults: nodes=1\n# defaults: nodes=2\n")


def test_hetjob_is_a_declared_parameter() -> None:
    assert "hetjob" in {p.name for p in SCHEMA} and defaults("hetjob")["hetjob"] == "1"
    assert "#SBATCH hetjob" in render("data_parallel", {"hetjob": "1"})
    with pytest.raises(ConfigurationError, match="hetjob='yes' is not 0 or 1"):
        render("data_parallel", {"hetjob": "yes"})


def test_a_sweep_gives_each_array_element_its_entry() -> None:
    text = render("sweep", {"sweep": "--lr 0.1; --lr 0.01", "program_args": "--epochs 2"})
    assert "#SBATCH --array=0-1" in text and "0) set -- --lr 0.1 ;;" in text and "1) set -- --lr 0.01 ;;" in text
    assert render("sweep", {"sweep": "--lr 1", "array": "0"}).count("#SBATCH --array=0") == 1
    assert "#SBATCH --array=0-3%2" in render("data_parallel", {"array": "0-3%2"})  # any template may be an array
    selection = text.split("# Slurm's warning")[0]  # the header, set -euo pipefail and the case
    for element, expected in ((0, "--lr 0.1"), (1, "--lr 0.01")):
        out = subprocess.run(["bash", "-c", selection + 'echo "$*"'], env={"SLURM_ARRAY_TASK_ID": str(element)},
                             capture_output=True, text=True, check=True)
        assert out.stdout.strip() == expected
    out = subprocess.run(["bash", "-c", selection], env={"SLURM_ARRAY_TASK_ID": "7"}, capture_output=True, text=True)
    assert out.returncode == 2 and "array element 7 has no sweep entry" in out.stderr


@pytest.mark.parametrize("array, sweep", [("0-2", "--lr 1;--lr 2"), ("0,5", "a;b"), ("0-9:3", "a;b;c;d;e;f;g;h;i")])
def test_an_array_beyond_its_sweep_is_refused(array: str, sweep: str) -> None:
    with pytest.raises(TemplateParameterError) as info:
        render("sweep", {"array": array, "sweep": sweep})
    assert "beyond the sweep" in info.value.message and "leave array empty" in str(info.value.hint)


def test_a_bad_placeholder_in_a_template_is_named() -> None:
    with pytest.raises(ConfigurationError) as info:
        from slurm_resolver import templates

        original = templates._text
        templates._text = lambda name: "#!/bin/bash\necho $@\n"  # type: ignore[assignment]
        try:
            render("sweep")
        finally:
            templates._text = original  # type: ignore[assignment]
    assert "bad placeholder" in info.value.message


def test_a_job_layout_with_counts_sets_the_tasks_or_must_agree_with_them() -> None:
    text = render("ps_worker", {"nodes": "4", "tasks_per_node": "4", "jobs": "chief=1,ps=2,worker=13"})
    assert "#SBATCH --ntasks=16\n" in text
    assert "#SBATCH --ntasks=16\n" in render("ps_worker", {"tasks": "16", "jobs": "chief=1,ps=2,worker=13"})
    with pytest.raises(TemplateParameterError, match=r"\(16 tasks\) and tasks=5 disagree"):
        render("ps_worker", {"tasks": "5", "jobs": "chief=1,ps=2,worker=13"})
    assert "#SBATCH --ntasks=7\n" in render("ps_worker", {"tasks": "7", "jobs": "ps,worker"})  # no counts: any


def test_restarts_launch_the_step_through_run() -> None:
    text = render("data_parallel", {"restarts": "3", "command": "python train.py --lr 0.1", "srun_args": "-l"})
    assert text.splitlines()[-1] == (f"forward {shlex.quote(sys.executable)} -m slurm_resolver run --restarts 3 "
                                     "--srun-args -l --format torch -- python train.py --lr 0.1")
    assert "--no-kill" not in text and "#SBATCH --nodes=2\n" in text


def test_spare_nodes_are_added_to_the_nodes_with_no_kill() -> None:
    text = render("data_parallel", {"spare_nodes": "1", "program": "slurm_resolver.training.resumable",
                                    "python": "py", "extra_sbatch": "--exclusive"})
    assert "#SBATCH --nodes=3\n#SBATCH --ntasks-per-node=2\n" in text
    assert "#SBATCH --no-kill\n#SBATCH --exclusive\n" in text
    assert text.splitlines()[-1] == ("forward py -m slurm_resolver run --spare-nodes 1 --format shell -- "
                                     "py -m slurm_resolver.training.resumable")
    jobs = render("ps_worker", {"min_nodes": "2", "nodes": "3", "tasks_per_node": "2", "jobs": "chief=1,ps=1,worker=4",
                                "python": "py"})
    assert "#SBATCH --nodes=3\n" in jobs and "--ntasks=" not in jobs and "#SBATCH --no-kill" in jobs
    assert "run --min-nodes 2 --jobs chief=1,ps=1,worker=4 --format shell -- py -m" in jobs
    subprocess.run(["bash", "-n"], input=text, text=True, check=True)


@pytest.mark.parametrize(("name", "values", "error"), [
    ("mpirun", {"restarts": "2"}, "template mpirun has no srun step that slurm-resolver run could restart"),
    ("hetjob", {"restarts": "2"}, "template hetjob has no srun step"),
    ("data_parallel", {"restarts": "2", "hetjob": "1"}, r"does not restart heterogeneous jobs \(hetjob=1\)"),
    ("data_parallel", {"spare_nodes": "1", "tasks_per_node": "", "tasks": "5"}, "need nodes and tasks_per_node"),
    ("ps_worker", {"spare_nodes": "1"}, "need nodes and tasks_per_node"),
    ("ps_worker", {"spare_nodes": "1", "tasks_per_node": "2"}, r"tasks=5 does not fill nodes=3 x tasks_per_node=2"),
    ("data_parallel", {"restarts": "0"}, r"restarts='0' is not a whole number >= 1"),
])
def test_restarts_that_cannot_be_are_refused(name: str, values: dict[str, str], error: str) -> None:
    with pytest.raises(TemplateParameterError, match=error):
        render(name, values)


@pytest.mark.parametrize("name", TEMPLATES)
def test_every_job_makes_a_secret_of_its_own_unless_given_one(name: str) -> None:
    """The script exports SLURM_RESOLVER_SECRET before any launch: 48 random hex digits, new for every
    run; a secret already in the submitter's environment is kept."""
    lines = render(name, {}).splitlines()
    line = next(line for line in lines if line.startswith("export SLURM_RESOLVER_SECRET="))
    launches = [i for i, text in enumerate(lines) if not text.startswith("#") and
                any(word in text for word in ("srun ", "mpirun ", "slurm_resolver run"))]
    assert launches and lines.index(line) < min(launches)
    show = f"{line}\necho \"$SLURM_RESOLVER_SECRET\""
    made = [subprocess.run(["bash", "-c", show], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"},
                           check=True).stdout.strip() for _ in range(2)]
    assert all(len(m) == 48 and int(m, 16) >= 0 for m in made) and made[0] != made[1]
    kept = subprocess.run(["bash", "-c", show], capture_output=True, text=True, check=True,
                          env={"PATH": "/usr/bin:/bin", "SLURM_RESOLVER_SECRET": "mine" * 6}).stdout.strip()
    assert kept == "mine" * 6
