"""Templates: golden files of the rendered text, valid bash, and the schema's errors."""

from __future__ import annotations

import subprocess

import pytest

from slurm_resolver.errors import ConfigurationError
from slurm_resolver.templates import SCHEMA, _own_defaults, available, defaults, render, sbatch_header

from .conftest import DATA

TEMPLATES = ["chief_evaluator", "data_parallel", "data_service", "hetjob", "jax", "mpirun", "ps_worker"]
GOLDEN = {"python": "/usr/bin/python3", "partition": "debug"}


def test_the_five_topologies_are_bundled() -> None:
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
    text = render("data_parallel", {"job_name": "x; rm -rf /", "python": "/opt/my python/bin/python"})
    assert "#SBATCH --job-name='x; rm -rf /'" in text and "'/opt/my python/bin/python' -m slurm_resolver" in text


def test_empty_options_are_left_out() -> None:
    text = render("data_parallel", {"partition": "", "account": "", "gpus_per_task": ""})
    assert "--partition" not in text and "--account" not in text and "--gpus-per-task" not in text
    assert "#SBATCH --gpus-per-task=1" in render("data_parallel", {"gpus_per_task": "1"})


def test_unknown_key_lists_the_valid_ones_with_defaults() -> None:
    with pytest.raises(ConfigurationError) as info:
        render("ps_worker", {"nodez": "3"})
    assert "nodez" in info.value.message and "nodes (default '3')" in str(info.value.hint)
    assert "jobs (default 'chief=1,ps=2,worker=2')" in str(info.value.hint)


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
    with pytest.raises(ConfigurationError, match="hetjob='yes' must be 0 or 1"):
        render("data_parallel", {"hetjob": "yes"})
