"""sbatch templates: one declared schema of parameters, rendered with safe quoting.

Templates live in ``sbatch_templates/`` (installed as ``slurm_resolver.sbatch_templates``)
and use ``${name}`` placeholders for the parameters of :data:`SCHEMA`; they hold no logic.
"""

from __future__ import annotations

import shlex
import string
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources

from .errors import ConfigurationError

__all__ = ["Parameter", "SCHEMA", "available", "render"]


@dataclass(frozen=True)
class Parameter:
    """One template parameter: its default and what it means."""

    name: str
    default: str
    meaning: str
    quote: bool = False


SCHEMA: tuple[Parameter, ...] = (
    Parameter("job_name", "slurm-resolver", "#SBATCH --job-name"),
    Parameter("nodes", "2", "#SBATCH --nodes"),
    Parameter("tasks_per_node", "2", "#SBATCH --ntasks-per-node"),
    Parameter("time", "00:10:00", "#SBATCH --time"),
    Parameter("output", "slurm-resolver-%j.out", "#SBATCH --output"),
    Parameter("extra_sbatch", "", "extra #SBATCH lines, one per line"),
    Parameter("srun_args", "", "extra srun arguments"),
    Parameter("python", sys.executable, "the Python interpreter of the tasks", quote=True),
)


def available() -> list[str]:
    """Names of the bundled templates."""
    root = resources.files("slurm_resolver.sbatch_templates")
    return sorted(p.name.removesuffix(".sbatch") for p in root.iterdir() if p.name.endswith(".sbatch"))


def render(name: str, values: Mapping[str, str] | None = None) -> str:
    """The sbatch text of template ``name`` with ``values`` over the schema's defaults."""
    known = {p.name: p for p in SCHEMA}
    unknown = sorted(set(values or {}) - set(known))
    if unknown:
        listing = ", ".join(f"{p.name} (default {p.default!r})" for p in SCHEMA)
        raise ConfigurationError(f"unknown template parameter(s) {unknown}", f"valid parameters: {listing}")
    if name not in available():
        raise ConfigurationError(f"no template named {name!r}", f"choose one of {', '.join(available())}")
    merged = {p.name: (values or {}).get(p.name, p.default) for p in SCHEMA}
    for key, value in merged.items():
        if "\n" in value and key != "extra_sbatch":
            raise ConfigurationError(f"template parameter {key}={value!r} must be one line")
        if known[key].quote:
            merged[key] = shlex.quote(value)
    text = resources.files("slurm_resolver.sbatch_templates").joinpath(f"{name}.sbatch").read_text()
    return string.Template(text).substitute(merged)
