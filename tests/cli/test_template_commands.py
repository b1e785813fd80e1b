"""``--version``, ``templates`` (and ``--json``), and template parameters on the command line (exit 2)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from slurm_resolver import __version__
from slurm_resolver.template_schema import SCHEMA
from slurm_resolver.templates import available


def test_version(cli: Any) -> None:
    out = cli("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"slurm-resolver {__version__}"


def test_templates_lists_every_template_with_its_purpose_and_every_parameter(cli: Any) -> None:
    out = cli("templates")
    assert out.returncode == 0
    for name in available():
        line = next(l for l in out.stdout.splitlines() if l.split()[:1] == [name])
        assert len(line.split()) > 3, f"{name} has no purpose"
    assert "time              00:10:00" in out.stdout and "gpus_per_task" in out.stdout
    assert "ps_worker" in cli("submit", "--help").stdout and "tasks_per_node" in cli("render", "--help").stdout
    assert cli("templates", "nope").returncode == 2


def test_one_template_lists_its_own_defaults(cli: Any) -> None:
    rows = {l.split()[0]: l.split()[1:3] for l in cli("templates", "ps_worker").stdout.splitlines()[4:]}
    assert rows["nodes"] == ["*", "3"] and rows["tasks"] == ["*", "5"] and rows["tasks_per_node"] == ["*", "-"]
    assert rows["time"][0] == "00:10:00"


def test_templates_json_for_scripts(cli: Any) -> None:
    data = json.loads(cli("templates", "--json").stdout)
    assert [t["name"] for t in data["templates"]] == available()
    assert [p["name"] for p in data["parameters"]] == [p.name for p in SCHEMA]
    one = json.loads(cli("templates", "ps_worker", "--json").stdout)["templates"]
    assert len(one) == 1 and one[0]["defaults"]["nodes"] == "3" and one[0]["own_defaults"]["tasks"] == "5"


@pytest.mark.parametrize("value, form", [("nodes=abc", "a whole number >= 1"), ("time=1h", "Slurm's time"),
                                         ("gpus_per_task=a100:", "type:count"), ("job_name=a;b", "a name of")])
def test_a_bad_template_value_is_a_usage_error_naming_it(cli: Any, value: str, form: str) -> None:
    out = cli("render", "data_parallel", "--set", value)
    key, _, bad = value.partition("=")
    assert out.returncode == 2 and f"{key}={bad!r}" in out.stderr and form in out.stderr
    assert out.stdout == ""


def test_a_misspelt_parameter_gets_the_closest_names(cli: Any) -> None:
    out = cli("render", "ps_worker", "--set", "node=4")
    assert out.returncode == 2 and out.stderr == ("slurm-resolver: error: unknown template parameter 'node' "
                                                  "(hint: did you mean nodes or ps_nodes? `slurm-resolver templates` "
                                                  "lists every parameter)\n")


def test_sbatchs_spelling_is_accepted(cli: Any) -> None:
    out = cli("render", "data_parallel", "--set", "ntasks-per-node=4", "--set", "job-name=x")
    assert out.returncode == 0 and "#SBATCH --ntasks-per-node=4\n" in out.stdout and "--job-name=x\n" in out.stdout
