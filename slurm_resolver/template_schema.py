"""The parameters of the sbatch templates: one declared schema, each parameter typed and checked.

Every value is checked against its kind before anything is rendered or submitted; a bad
value is a [`TemplateParameterError`][slurm_resolver.template_schema.TemplateParameterError] that names the
parameter, the value and the
accepted form (the command line exits 2 for it, as for any usage error).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from .errors import ConfigurationError

__all__ = ["Parameter", "Kind", "SCHEMA", "KINDS", "TemplateParameterError", "check", "named", "SHELL_TEXT", "FORMATS"]

FORMATS = ("tf", "torch", "jax", "shell")
"""The sets of variables a task can export (``--format``; `slurm_resolver.adapters` makes each)."""


class TemplateParameterError(ConfigurationError):
    """A template parameter with a value of the wrong form (a usage error)."""


_NAME = r"[A-Za-z0-9][A-Za-z0-9._+@:=-]{0,127}"
_TIME = (r"\d{1,6}", r"\d{1,6}:\d{1,2}", r"\d{1,6}:\d{1,2}:\d{1,2}", r"\d{1,4}-\d{1,2}", r"\d{1,4}-\d{1,2}:\d{1,2}",
         r"\d{1,4}-\d{1,2}:\d{1,2}:\d{1,2}")
_JOB = r"[A-Za-z_][A-Za-z0-9_]{0,63}"
_INDICES = r"\d{1,7}(-\d{1,7}(:[1-9]\d{0,6})?)?"

@dataclass(frozen=True)
class Kind:
    """A kind of parameter value: the pattern its values match in full, the form in words, an example."""

    pattern: str
    form: str
    example: str


KINDS: dict[str, Kind] = {
    "count": Kind(r"[1-9]\d{0,6}", "a whole number >= 1", "2"),
    "time": Kind("|".join(_TIME), "Slurm's time: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS", "1:00:00"),
    "gpus": Kind(r"[1-9]\d{0,3}|[A-Za-z0-9_.-]{1,64}:[1-9]\d{0,3}", "a GPU count, or type:count (a100:2)", "1"),
    "name": Kind(_NAME, "a name of letters, digits and ._+@:=- (a job, partition or account name)", "x"),
    "path": Kind(r"[^\x00-\x1f'\"`$\\\\;&|<>*?]{1,1024}", "a file path (no quotes, $, ;, &, |, <, >, *, ?)",
                 "out-%j.txt"),
    "jobs": Kind(rf"({_JOB}=\d{{1,6}}(,{_JOB}=\d{{1,6}})*|{_JOB}(,{_JOB})*)",
                 "name=count pairs such as ps=1,worker=3, or names per het component such as ps,worker",
                 "ps=1,worker=3"),
    "format": Kind("|".join(FORMATS), f"{', '.join(FORMATS[:-1])} or {FORMATS[-1]}", "torch"),
    "flag": Kind(r"0|1", "0 or 1", "1"),
    "signal": Kind(r"(USR1|USR2|TERM|INT|HUP|QUIT|URG|XCPU|XFSZ|VTALRM|PROF|WINCH)@\d{1,5}",
                   "SIGNAL@SECONDS before the end, such as USR2@60 (empty: no warning)", "USR2@60"),
    "module": Kind(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*",
                   "a Python module such as slurm_resolver.training.ddp", "slurm_resolver.training.ddp"),
    "text": Kind(r"[^\n\r\x00]*", "one line of shell text", "'--epochs 3'"),
    "array": Kind(rf"{_INDICES}(,{_INDICES})*(%[1-9]\d{{0,4}})?",
                  "Slurm's array indices: 0-7, 1,3,5, 0-15:4, with %N to run at most N at once (0-7%2)", "0-7"),
}
"""Every kind of parameter value, by name."""


@dataclass(frozen=True)
class Parameter:
    """One template parameter: its default, kind, meaning, and the #SBATCH option it sets."""

    name: str
    default: str
    kind: str
    meaning: str
    option: str = ""
    optional: bool = True
    """Whether an empty value is allowed (it leaves the option out)."""
    example: str = ""
    """A value to show in a hint where the default is none (or depends on the machine)."""

    @property
    def spellings(self) -> tuple[str, ...]:
        """Other names the parameter answers to: its name with dashes, and sbatch's option.

        >>> SCHEMA[2].spellings
        ('tasks-per-node', 'ntasks-per-node')
        """
        names = (self.name.replace("_", "-"), self.option.removeprefix("--"))
        return tuple(n for n in dict.fromkeys(names) if n and n != self.name)


SCHEMA: tuple[Parameter, ...] = (
    Parameter("job_name", "slurm-resolver", "name", "the job's name", "--job-name", optional=False),
    Parameter("nodes", "2", "count", "nodes (of the workers, in a heterogeneous job)", "--nodes"),
    Parameter("tasks_per_node", "2", "count", "tasks per node (empty: see tasks)", "--ntasks-per-node"),
    Parameter("tasks", "", "count", "tasks in all, where they do not fill nodes evenly", "--ntasks"),
    Parameter("gpus_per_task", "", "gpus", "GPUs per task: N or type:N (empty: none requested)", "--gpus-per-task"),
    Parameter("cpus_per_task", "1", "count", "CPUs per task", "--cpus-per-task"),
    Parameter("time", "00:10:00", "time", "time limit", "--time"),
    Parameter("partition", "", "name", "partition (empty: the default)", "--partition"),
    Parameter("account", "", "name", "account (empty: the default)", "--account"),
    Parameter("output", "slurm-resolver-%j.out", "path", "output file (%j: the job id)", "--output"),
    Parameter("ps_nodes", "1", "count", "heterogeneous job: nodes of the ps component"),
    Parameter("jobs", "", "jobs", "job layout, e.g. ps=1,worker=3 (empty: every task a worker)"),
    Parameter("format", "tf", "format", "variables the bootstrap exports: tf, torch, jax or shell", optional=False),
    Parameter("command", "", "text", "the command every task runs after the bootstrap (empty: the program)"),
    Parameter("program", "", "module", "the module every task runs without a command; it bootstraps in-process "
              "(empty: print the bootstrapped task)"),
    Parameter("program_args", "", "text", "arguments of the program, e.g. --epochs 3"),
    Parameter("srun_args", "", "text", "extra srun arguments"),
    Parameter("mpirun_args", "", "text", "extra mpirun arguments"),
    Parameter("extra_sbatch", "", "text", "extra #SBATCH lines, separated by ';'"),
    Parameter("python", sys.executable, "path", "the Python interpreter of the tasks", optional=False,
              example="/usr/bin/python3"),
    Parameter("hetjob", "0", "flag", "1 for a heterogeneous job: a ps component of ps_nodes nodes, then the workers",
              optional=False),
    Parameter("signal", "USR2@60", "signal", "the warning Slurm sends before the time limit or a preemption, "
              "passed on to every task (empty: none)"),
    Parameter("array", "", "array", "a job array: every element its own job and cluster "
              "(empty: no array; with sweep: one element per entry)", "--array"),
    Parameter("sweep", "", "text", "each array element's own arguments, entries separated by ';' "
              "(element i takes entry i), e.g. --learning-rate 0.1;--learning-rate 0.01"),
    Parameter("requeue", "1", "flag", "1: the job may be requeued (by Slurm, or by itself after a warning)",
              optional=False),
    Parameter("restarts", "", "count", "launch the step through slurm-resolver run, which launches it again in "
              "the same allocation when a task dies, at most this many times (empty: plain srun)"),
    Parameter("spare_nodes", "", "count", "nodes added to --nodes (and --no-kill) that run keeps for lost nodes"),
    Parameter("min_nodes", "", "count", "the fewest nodes run restarts the step on, where no spare is left "
              "(and --no-kill; empty: all)"),
)
"""Every template parameter, in the order the listing shows them."""
SHELL_TEXT = frozenset(p.name for p in SCHEMA if p.kind == "text")
"""Parameters that are shell text, taken as given (one line); every other value is quoted."""

_BY_NAME = {p.name: p for p in SCHEMA}


def check(values: Mapping[str, str]) -> None:
    """Fail on the first value that is not of its parameter's kind.

    >>> check({"nodes": "4", "time": "1-12:00"})
    >>> check({"nodes": "four"})
    Traceback (most recent call last):
    ...
    slurm_resolver.template_schema.TemplateParameterError: template parameter nodes='four' is not a whole number >= 1
    HINT: e.g. --set nodes=2
    """
    for key, value in values.items():
        parameter = _BY_NAME.get(key)
        if parameter is None:
            continue
        kind = KINDS[parameter.kind]
        if value == "" and parameter.optional:
            continue
        if not re.fullmatch(kind.pattern, value):
            example = _closest(value, kind) or parameter.example or parameter.default or kind.example
            raise TemplateParameterError(f"template parameter {key}={value!r} is not {kind.form}",
                                         f"e.g. --set {key}={example}")


def _closest(value: str, kind: Kind) -> str | None:
    """The choice of a kind of a few words (``tf|torch|jax|shell``) closest to ``value``.

    >>> _closest("pytorch", KINDS["format"]), _closest("x", KINDS["count"])
    ('torch', None)
    """
    import difflib

    if not re.fullmatch(r"\w+(\|\w+)+", kind.pattern):
        return None
    close = difflib.get_close_matches(value.lower(), kind.pattern.split("|"), n=1, cutoff=0.5)
    return close[0] if close else None


_SPELLINGS = {spelling: p.name for p in SCHEMA for spelling in p.spellings}
_MEANT = {"gpus": "gpus_per_task", "gpu": "gpus_per_task", "cpus": "cpus_per_task", "ntasks_per_gpu": "gpus_per_task",
          "walltime": "time", "time_limit": "time", "queue": "partition", "name": "job_name", "args": "program_args",
          "arguments": "program_args", "cmd": "command", "script": "command", "mpi_args": "mpirun_args"}
"""Words users reach for that name no parameter, with the parameter they mean."""


def named(values: Mapping[str, str]) -> dict[str, str]:
    """``values`` by the schema's names: sbatch's spellings and dashes (``ntasks-per-node``,
    ``job-name``) become the parameters they mean; an unknown name is refused with the
    closest names.

    >>> named({"ntasks-per-node": "4", "nodes": "2"})
    {'tasks_per_node': '4', 'nodes': '2'}
    >>> named({"node": "4"})
    Traceback (most recent call last):
    ...
    slurm_resolver.template_schema.TemplateParameterError: unknown template parameter 'node'
    HINT: did you mean nodes or ps_nodes? `slurm-resolver templates` lists every parameter
    """
    result: dict[str, str] = {}
    for key, value in values.items():
        name = key if key in _BY_NAME else _SPELLINGS.get(key)
        if name is None:
            raise TemplateParameterError(f"unknown template parameter {key!r}", _guess(key, value))
        if name in result and result[name] != value:
            raise TemplateParameterError(f"template parameter {name} is given twice, as {name}={result[name]!r} "
                                         f"and {key}={value!r}", f"give {name} once")
        result[name] = value
    return result


def _guess(key: str, value: str) -> str:
    """The hint for an unknown parameter: the names it is close to, the one it means, or the program's arguments.

    >>> _guess("gpus", "2")
    'did you mean gpus_per_task? `slurm-resolver templates` lists every parameter'
    >>> _guess("epochs", "3").partition("; ")[2]
    "a program's own option goes in program_args: --set program_args='--epochs 3'"
    """
    import difflib
    import shlex

    word = key.replace("-", "_").lower()
    close = [_MEANT[word]] if word in _MEANT else \
        difflib.get_close_matches(word, [*_BY_NAME, *_SPELLINGS], n=3, cutoff=0.6)
    guesses = " or ".join(dict.fromkeys(_SPELLINGS.get(c, c) for c in close))
    if guesses:
        return f"did you mean {guesses}? `slurm-resolver templates` lists every parameter"
    option = f"--{key.replace('_', '-')}" + (f" {value}" if value else "")
    return ("`slurm-resolver templates` lists every parameter; a program's own option goes in program_args: "
            f"--set program_args={shlex.quote(option)}")
