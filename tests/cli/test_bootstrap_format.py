"""``slurm-resolver bootstrap -- COMMAND`` without ``--format`` exports what the command's framework reads."""

from __future__ import annotations

import os
from typing import Any

import pytest

ALONE = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "SLURM_RESOLVER_AUTH": "none"}  # no launch: one process

SHOW = "import os\nif False:\n    import {module}\nprint(os.environ.get('{variable}', 'unset'))\n"
"""A script that imports a framework (never run) and prints a variable."""


@pytest.mark.parametrize(("module", "variable", "shown"), [
    ("torch", "MASTER_ADDR", "localhost"),
    ("lightning.fabric", "MASTER_PORT", None),
    ("tensorflow", "TF_CONFIG", None),
    ("numpy", "SLURM_RESOLVER_RANK", "0"),  # no framework: the shell's variables
])
def test_the_default_format_is_the_one_the_script_imports(cli: Any, module: str, variable: str,
                                                         shown: str | None) -> None:
    code = SHOW.format(module=module, variable=variable)
    out = cli("bootstrap", "--", "python3", "-c", code, env=ALONE)
    assert out.returncode == 0, out.stderr
    printed = out.stdout.strip().splitlines()[-1]
    assert printed != "unset" and (shown is None or printed == shown)


def test_a_jax_script_whose_bare_initialize_cannot_be_served_gets_the_shells_variables_and_why(cli: Any) -> None:
    """One process alone: JAX's own detection finds no cluster, so no variable could make a bare
    initialize() right; told from the script, bootstrap says so and exports the shell's variables."""
    out = cli("bootstrap", "--", "python3", "-c", SHOW.format(module="jax", variable="SLURM_RESOLVER_WORLD_SIZE"),
              env=ALONE)
    assert out.returncode == 0 and out.stdout.strip().splitlines()[-1] == "1", out.stderr
    assert "a bare jax.distributed.initialize() would take no process count" in out.stderr
    explicit = cli("bootstrap", "--format", "jax", "--", "true", env=ALONE)
    assert explicit.returncode == 1 and "would take no process count" in explicit.stderr
