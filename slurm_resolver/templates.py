"""sbatch templates: one declared schema of parameters, rendered by one pure function.

Templates live in ``sbatch_templates/`` (installed as ``slurm_resolver.sbatch_templates``):
one comment line ``# defaults: key=value ...`` (the template's own defaults, each a
parameter of [`SCHEMA`][slurm_resolver.template_schema.SCHEMA]), and the body with ``${name}``
placeholders. The ``#SBATCH``
header is built here from the schema, so templates hold no logic: an option left empty
is simply not written. Single-word values are quoted with `shlex.quote()`; ``command``
is shell text, taken as given (one line).
"""

from __future__ import annotations

import shlex
import string
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from importlib.abc import Traversable

from .errors import ConfigurationError
from .parsing import parse_jobs
from .template_schema import SCHEMA, SHELL_TEXT, TemplateParameterError, check, named

__all__ = ["Template", "available", "describe", "defaults", "render"]




def _root() -> Traversable:
    return resources.files("slurm_resolver.sbatch_templates")


def available() -> list[str]:
    """Names of the bundled templates."""
    return sorted(p.name.removesuffix(".sbatch") for p in _root().iterdir() if p.name.endswith(".sbatch"))


def _text(name: str) -> str:
    if name not in available():
        raise TemplateParameterError(f"no template named {name!r}", f"choose one of {', '.join(available())}")
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
    if values.get("signal"):
        lines.append(f"#SBATCH --signal=B:{values['signal']}")  # to the batch script, which passes it on
    if values.get("requeue") == "1":  # a requeued job's second run appends: the first run's lines stay
        lines += ["#SBATCH --requeue", "#SBATCH --open-mode=append"]
    lines += [f"#SBATCH {extra.strip()}" for extra in values.get("extra_sbatch", "").split(";") if extra.strip()]
    return "\n".join(lines)


SECRET_LINES = (
    "# The tasks prove to each other that they belong to this job with a secret that only its tasks hold\n"
    "# (srun passes the environment on; another user cannot read it). Made here, kept nowhere else.\n"
    'export SLURM_RESOLVER_SECRET="${SLURM_RESOLVER_SECRET:-$(od -An -N24 -tx1 /dev/urandom | tr -d \' \\n\')}"')
"""What every template's script runs first: the job's secret for the bootstrap (see ``rpc/trust/choice.py``)."""


def forwarding(values: Mapping[str, str]) -> tuple[str, str]:
    """The shell function that runs the launcher in the background and passes Slurm's warning
    signal on to it (srun hands it to every task), and the word that calls it; empty without a signal.

    >>> forwarding({"signal": ""})
    ('', '')
    """
    if not values.get("signal"):
        return "", ""
    name = values["signal"].partition("@")[0]
    function = (f"# Slurm's warning (SIG{name}) comes to this script: pass it on to every task.\n"
                f"forward() {{\n"
                f"    \"$@\" &\n"
                f"    local task=$! status=0\n"
                f"    trap 'kill -s {name} \"$task\" 2>/dev/null' {name}\n"
                f"    while true; do\n"
                f"        status=0; wait \"$task\" || status=$?\n"
                f"        kill -0 \"$task\" 2>/dev/null || break  # wait returned for the signal, not the end\n"
                f"    done\n"
                f"    return \"$status\"\n"
                f"}}")
    return function, "forward "


def highest_index(spec: str) -> int:
    """The highest index of Slurm's ``--array`` spec (its ``%N`` limit left out).

    >>> highest_index("0-7:3,5%2")
    6
    """
    highest = 0
    for part in spec.partition("%")[0].split(","):
        span, _, step = part.partition(":")
        low, _, high = span.partition("-")
        top = int(high or low)
        highest = max(highest, top - (top - int(low)) % int(step or 1) if top >= int(low) else int(low))
    return highest


def _entries(sweep: str) -> list[str]:
    return [entry.strip() for entry in sweep.split(";") if entry.strip()]


def _with_sweep(values: dict[str, str]) -> None:
    """One array element per sweep entry where no array is given; an array beyond the sweep is an error."""
    entries = _entries(values.get("sweep", ""))
    if not entries:
        return
    if not values.get("array"):
        values["array"] = f"0-{len(entries) - 1}" if len(entries) > 1 else "0"
    highest = highest_index(values["array"])
    if highest >= len(entries):
        raise TemplateParameterError(
            f"template parameter array={values['array']!r} has element {highest}, beyond the sweep's "
            f"{len(entries)} entries (element i takes entry i)",
            f"leave array empty (one element per entry), or give array=0-{len(entries) - 1}")


def sweep_selection(values: Mapping[str, str]) -> str:
    """Shell that sets each array element's own arguments (``"$@"``) from the sweep; empty without one.

    >>> print(sweep_selection({"sweep": "--lr 1;--lr 2"}))  # doctest: +NORMALIZE_WHITESPACE
    # Each element of the array takes its own arguments from the sweep.
    case "${SLURM_ARRAY_TASK_ID:?submit this script as an array: sbatch --array=...}" in
        0) set -- --lr 1 ;;
        1) set -- --lr 2 ;;
        *) echo "slurm-resolver: array element $SLURM_ARRAY_TASK_ID has no sweep entry (2 entries)" >&2; exit 2 ;;
    esac
    """
    entries = _entries(values.get("sweep", ""))
    if not entries:
        return ""
    lines = ["# Each element of the array takes its own arguments from the sweep.",
             'case "${SLURM_ARRAY_TASK_ID:?submit this script as an array: sbatch --array=...}" in']
    lines += [f"    {i}) set -- {entry} ;;" for i, entry in enumerate(entries)]
    lines += [f'    *) echo "slurm-resolver: array element $SLURM_ARRAY_TASK_ID has no sweep entry '
              f'({len(entries)} entries)" >&2; exit 2 ;;', "esac"]
    return "\n".join(lines)


def _launch(values: Mapping[str, str]) -> str:
    """What every task runs: the command after the bootstrap, else the program, else a print of the task.

    >>> _launch({"python": "py", "jobs": "", "format": "tf", "command": "", "program": "m", "program_args": "-x"})
    'py -m m -x'
    """
    python = shlex.quote(values["python"])
    jobs = f" --jobs {shlex.quote(values['jobs'])}" if values["jobs"] else ""
    if values["program"] and not values["command"]:
        args = f" {values['program_args']}" if values["program_args"] else ""
        return f"{python} -m {values['program']}{jobs}{args}"
    command = values["command"] or f"{python} -m slurm_resolver show --bootstrapped"
    return f"{python} -m slurm_resolver bootstrap{jobs} --format {shlex.quote(values['format'])} -- {command}"


_RESTART = ("restarts", "spare_nodes", "min_nodes")


def _step(values: Mapping[str, str]) -> str:
    """What the script runs: srun of the launch, or ``slurm-resolver run``, which launches it again in
    the allocation when a task dies (the program then bootstraps in-process under run's bootstrap).

    >>> print(_step({"python": "py", "jobs": "", "format": "torch", "command": "", "program": "m", "program_args": "",
    ...              "srun_args": "-l -K", "restarts": "2", "spare_nodes": "1", "min_nodes": ""}))
    py -m slurm_resolver run --restarts 2 --spare-nodes 1 --srun-args '-l -K' --format shell -- py -m m
    """
    if not any(values.get(k) for k in _RESTART):
        return " ".join(word for word in ("srun", values["srun_args"], _launch(values)) if word)
    python = shlex.quote(values["python"])
    options = [f"--{k.replace('_', '-')} {shlex.quote(values[k])}" for k in (*_RESTART, "srun_args", "jobs")
               if values.get(k)]
    if values["program"] and not values["command"]:
        return f"{python} -m slurm_resolver run {' '.join(options)} --format shell -- {_launch(values)}"
    command = values["command"] or f"{python} -m slurm_resolver show --bootstrapped"
    return f"{python} -m slurm_resolver run {' '.join(options)} --format {shlex.quote(values['format'])} -- {command}"


def _with_spares(values: dict[str, str], name: str, text: str) -> None:
    """Spare nodes go into ``--nodes``, whose tasks per node must then be the same everywhere; with spares
    or a smaller step allowed, ``--no-kill`` keeps the allocation when a node fails."""
    if not any(values.get(k) for k in _RESTART):
        return
    if "${step}" not in text:
        raise TemplateParameterError(f"template {name} has no srun step that slurm-resolver run could restart",
                                     "leave restarts, spare_nodes and min_nodes empty for it")
    if values["hetjob"] == "1":
        raise TemplateParameterError("slurm-resolver run does not restart heterogeneous jobs (hetjob=1)",
                                     "leave restarts, spare_nodes and min_nodes empty")
    if values.get("spare_nodes") or values.get("min_nodes"):
        if not values["nodes"] or not values["tasks_per_node"]:
            raise TemplateParameterError("spare_nodes and min_nodes need nodes and tasks_per_node (every node "
                                         "the same tasks)", "e.g. --set nodes=2 --set tasks_per_node=2")
        total = int(values["nodes"]) * int(values["tasks_per_node"])
        if values["tasks"] and int(values["tasks"]) != total:
            raise TemplateParameterError(f"template parameter tasks={values['tasks']} does not fill nodes="
                                         f"{values['nodes']} x tasks_per_node={values['tasks_per_node']}, which "
                                         "spare_nodes and min_nodes need", f"--set tasks={total}, or leave it out")
        values["tasks"] = ""  # the spares have no tasks of the step's: --ntasks-per-node says it all
        values["nodes"] = str(int(values["nodes"]) + int(values.get("spare_nodes") or 0))
        values["extra_sbatch"] = ";".join(filter(None, ["--no-kill", values.get("extra_sbatch", "")]))


def _tasks_of_jobs(merged: dict[str, str], given: set[str]) -> None:
    """A job layout with counts (``chief=1,ps=2,worker=13``) sets ``tasks`` to their sum,
    unless ``tasks`` is given too: then the two must agree."""
    jobs = parse_jobs(merged["jobs"], "jobs") if merged["jobs"] else None
    if not isinstance(jobs, dict) or merged["hetjob"] == "1":
        return
    total = sum(jobs.values())
    if "tasks" not in given:
        merged["tasks"] = str(total)
    elif merged["tasks"] != str(total):
        raise TemplateParameterError(f"template parameters jobs={merged['jobs']} ({total} tasks) and "
                                     f"tasks={merged['tasks']} disagree",
                                     f"give --set tasks={total}, or leave tasks out: the jobs' counts set it")


def render(name: str, values: Mapping[str, str] | None = None) -> str:
    """The sbatch text of template ``name``: its defaults, overridden by ``values`` (by the
    schema's names, or sbatch's spellings such as ``ntasks-per-node``)."""
    base = defaults(name)  # names a template that does not exist first
    given = named(values or {})
    merged = {**base, **given}
    check(merged)
    _tasks_of_jobs(merged, set(given))
    _with_sweep(merged)
    text = _text(name)
    step = _step(merged)
    _with_spares(merged, name, text)
    substituted = {k: (v if k in SHELL_TEXT else shlex.quote(v)) for k, v in merged.items()}
    substituted["launch"] = _launch(merged)
    substituted["step"] = step
    substituted["sbatch_header"] = sbatch_header(merged, het=merged["hetjob"] == "1")
    substituted["forwarding"], substituted["forward"] = forwarding(merged)
    substituted["secret"] = SECRET_LINES
    substituted["select"] = sweep_selection(merged)
    body = "\n".join(line for line in text.splitlines() if not line.startswith((_DEFAULTS, _PURPOSE))) + "\n"
    try:
        return string.Template(body).substitute(substituted)
    except (KeyError, ValueError) as exc:  # the template's own fault, not the values'
        raise ConfigurationError(f"template {name} has a bad placeholder ({exc})",
                                 "write $$ for a literal $, and ${name} only for parameters of the schema") from None
