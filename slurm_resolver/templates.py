"""sbatch templates: one declared schema of parameters, rendered by one pure function.

Templates live in ``sbatch_templates/`` (installed as ``slurm_resolver.sbatch_templates``):
one comment line ``# defaults: key=value ...`` (the template's own defaults, each a
parameter of :data:`SCHEMA`), and the body with ``${name}`` placeholders. The ``#SBATCH`` header is built here from :data:`SCHEMA`, so
templates hold no logic: an option left empty is simply not written. Single-word values are
quoted with :func:`shlex.quote`; ``command`` is shell text, taken as given (one line).
"""

from __future__ import annotations

import shlex
import string
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from importlib.abc import Traversable

from .errors import ConfigurationError
from .template_schema import SCHEMA, SHELL_TEXT, Parameter, TemplateParameterError, check

__all__ = ["Parameter", "SCHEMA", "Template", "available", "describe", "defaults", "render", "sbatch_header",
           "TemplateParameterError"]




def _root() -> Traversable:
    return resources.files("slurm_resolver.sbatch_templates")


def available() -> list[str]:
    """Names of the bundled templates."""
    return sorted(p.name.removesuffix(".sbatch") for p in _root().iterdir() if p.name.endswith(".sbatch"))


def _text(name: str) -> str:
    if name not in available():
        raise ConfigurationError(f"no template named {name!r}", f"choose one of {', '.join(available())}")
    return str(_root().joinpath(f"{name}.sbatch").read_text())


_DEFAULTS = "# defaults:"
_PURPOSE = "# purpose:"


@dataclass(frozen=True)
class Template:
    """A bundled template: its name, its purpose in one line, and the defaults it changes."""

    name: str
    purpose: str
    defaults: Mapping[str, str]


def describe(name: str) -> Template:
    """The template ``name`` as the command line lists it."""
    text = _text(name)
    purpose = next((line[len(_PURPOSE):].strip() for line in text.splitlines() if line.startswith(_PURPOSE)), "")
    return Template(name, purpose, _own_defaults(name, text))


def _own_defaults(name: str, text: str) -> dict[str, str]:
    """The ``# defaults:`` line of a template, checked against the schema."""
    lines = [line for line in text.splitlines() if line.startswith(_DEFAULTS)]
    if len(lines) > 1:
        raise ConfigurationError(f"template {name} has {len(lines)} '{_DEFAULTS}' lines", "keep exactly one")
    items = shlex.split(lines[0][len(_DEFAULTS):]) if lines else []
    own = dict(item.partition("=")[::2] for item in items)
    unknown = sorted(set(own) - {p.name for p in SCHEMA})
    if unknown or any("=" not in item for item in items):
        raise ConfigurationError(f"template {name}'s defaults name unknown parameters {unknown or items}",
                                 "use key=value pairs of parameters in templates.SCHEMA")
    return own


def defaults(name: str) -> dict[str, str]:
    """The schema's defaults overridden by the template's ``# defaults:`` line."""
    return {**{p.name: p.default for p in SCHEMA}, **_own_defaults(name, _text(name))}


def sbatch_header(values: Mapping[str, str], het: bool = False) -> str:
    """The ``#SBATCH`` lines for ``values``; a heterogeneous job gets a ps component first.

    >>> print(sbatch_header({"job_name": "x", "nodes": "2", "partition": ""}))
    #SBATCH --job-name=x
    #SBATCH --nodes=2
    """
    lines = []
    options = [p for p in SCHEMA if p.option and values.get(p.name)]
    if het:
        for p in options:
            if p.name in ("job_name", "time", "partition", "account", "output"):
                lines.append(f"#SBATCH {p.option}={shlex.quote(values[p.name])}")
        lines += [f"#SBATCH --nodes={shlex.quote(values['ps_nodes'])}", "#SBATCH --ntasks-per-node=1",
                  "#SBATCH hetjob"]
        options = [p for p in options if p.name in ("nodes", "tasks_per_node", "tasks", "gpus_per_task",
                                                    "cpus_per_task")]
    lines += [f"#SBATCH {p.option}={shlex.quote(values[p.name])}" for p in options]
    lines += [f"#SBATCH {extra.strip()}" for extra in values.get("extra_sbatch", "").split(";") if extra.strip()]
    return "\n".join(lines)


def _launch(values: Mapping[str, str]) -> str:
    """What every task runs: the command after the bootstrap, else the program, else a print of the task.

    >>> _launch({"python": "py", "jobs": "", "format": "tf", "command": "", "program": "m", "program_args": "-x"})
    'py -m m -x'
    """
    python = shlex.quote(values["python"])
    jobs = f" --jobs {shlex.quote(values['jobs'])}" if values["jobs"] else ""
    if values["program"] and not values["command"]:
        return f"{python} -m {values['program']}{jobs}" + (f" {values['program_args']}" if values["program_args"] else "")
    command = values["command"] or f"{python} -m slurm_resolver show --bootstrapped"
    return f"{python} -m slurm_resolver bootstrap{jobs} --format {shlex.quote(values['format'])} -- {command}"


def render(name: str, values: Mapping[str, str] | None = None) -> str:
    """The sbatch text of template ``name``: its defaults, overridden by ``values``."""
    known = {p.name for p in SCHEMA}
    unknown = sorted(set(values or {}) - known)
    base = defaults(name)
    if unknown:
        listing = ", ".join(f"{p.name} (default {base[p.name]!r})" for p in SCHEMA)
        raise TemplateParameterError(f"unknown template parameter(s) {unknown}", f"valid parameters: {listing}")
    merged = {**base, **(values or {})}
    check(merged)
    text = _text(name)
    substituted = {k: (v if k in SHELL_TEXT else shlex.quote(v)) for k, v in merged.items()}
    substituted["launch"] = _launch(merged)
    substituted["sbatch_header"] = sbatch_header(merged, het=merged["hetjob"] == "1")
    body = "\n".join(line for line in text.splitlines() if not line.startswith((_DEFAULTS, _PURPOSE))) + "\n"
    return string.Template(body).substitute(substituted)
