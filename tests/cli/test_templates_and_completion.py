"""``--version``, ``templates``, typed template parameters (exit 2), and shell completion."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

import pytest

from slurm_resolver import __version__
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
    assert "time            00:10:00" in out.stdout and "gpus_per_task" in out.stdout
    assert "ps_worker" in cli("submit", "--help").stdout and "tasks_per_node" in cli("render", "--help").stdout
    assert cli("templates", "nope").returncode == 2


@pytest.mark.parametrize("value, form", [("nodes=abc", "a whole number >= 1"), ("time=1h", "Slurm's time"),
                                         ("gpus_per_task=a100:", "type:count"), ("job_name=a;b", "a name of")])
def test_a_bad_template_value_is_a_usage_error_naming_it(cli: Any, value: str, form: str) -> None:
    out = cli("render", "data_parallel", "--set", value)
    key, _, bad = value.partition("=")
    assert out.returncode == 2 and f"{key}={bad!r}" in out.stderr and form in out.stderr
    assert out.stdout == ""


def complete(shell: str, script: str, words: list[str]) -> list[str]:
    setup = "autoload -U compinit; compinit -u; " if shell == "zsh" else ""
    arrays = "setopt ksharrays; " if shell == "zsh" else ""
    quoted = " ".join(f"'{w}'" for w in words)
    code = (f"{setup}eval \"$(cat)\"; {arrays}COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}; "
            "_slurm_resolver; printf '%s\\n' \"${COMPREPLY[@]}\"")
    out = subprocess.run([shell, "-c", code], input=script, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_completion_of_commands_templates_and_parameters(cli: Any, shell: str) -> None:
    assert shutil.which(shell), f"{shell} is installed by scripts/testcluster up"
    script = cli("completion", shell).stdout
    assert "complete -F _slurm_resolver slurm-resolver" in script
    assert "submit" in complete(shell, script, ["slurm-resolver", "sub"])
    assert set(available()) <= set(complete(shell, script, ["slurm-resolver", "submit", ""]))
    assert "tasks_per_node=" in complete(shell, script, ["slurm-resolver", "render", "jax", "--set", "tasks"])
    assert "--json" in complete(shell, script, ["slurm-resolver", "show", "--"])
