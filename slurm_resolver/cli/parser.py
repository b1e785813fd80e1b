"""Every command and option of ``slurm-resolver``, with its default, its unit and examples.

A command is one ``command(...)`` block in a group below (the cluster's commands, the
templates', the small tools; the top-level help lists them by group) and one function that
takes the parsed arguments and returns the exit code; ``per_task=True`` marks commands that
run in every task of a launch (their errors name the task's rank). A new command is a block
in a group, or a group of its own called from ``build_parser``.
"""

from __future__ import annotations

import argparse
import math
import textwrap
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, cast

from ..template_schema import FORMATS
from .usage import Parser

if TYPE_CHECKING:  # pragma: no cover
    from ..rpc.tree import Verify

__all__: list[str] = []  # internal: no public names (docs/reference.md)

_TEMPLATES = "(the templates' names)"


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the examples' lines; writes the templates' names where an epilog asks for them (reading
    the templates only when help is asked for)."""

    def add_text(self, text: str | None) -> None:
        if text is not None and _TEMPLATES in text:
            from ..templates import available

            text = text.replace(_TEMPLATES, f"templates: {', '.join(available())}\n  slurm-resolver templates "
                                            "[NAME]   their purpose, parameters and defaults")
        super().add_text(text)


def _jobs(text: str) -> str:
    """``--jobs``: name=count pairs, or one name per het component (checked here; kept as typed)."""
    from ..errors import SlurmResolverError
    from ..parsing import parse_jobs

    try:
        parse_jobs(text, "--jobs")
        return text
    except SlurmResolverError:
        raise argparse.ArgumentTypeError(f"{text!r} is not name=count pairs such as ps=1,worker=3, or one name per "
                                         "het component such as ps,worker") from None


def _seconds(text: str) -> float:
    """A positive, finite number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"{text} is not a positive number of seconds")
    return value


_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def _duration(text: str) -> float:
    """Seconds, or a number with a unit: 90s, 10m, 2h, 1d."""
    unit = _UNITS.get(text[-1:].lower(), 0.0) if text else 0.0
    try:
        return _seconds(text[:-1] if unit else text) * (unit or 1.0)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration such as 90s, 10m or 2h") from None


def _port(text: str) -> int:
    """A TCP port, 1-65535."""
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port (1-65535)")
    return int(text)


def _global_options(parser: argparse.ArgumentParser, top: bool) -> None:
    """-v, -q and --debug, before or after the command (a command's copy leaves an unset one alone, and
    only the top-level help shows them)."""
    unset = argparse.SUPPRESS

    def shown(text: str) -> str:
        return text if top else argparse.SUPPRESS

    parser.add_argument("-v", "--verbose", action="store_true", default=False if top else unset,
                        help=shown("log on stderr how each value was found and what each task decided, each line "
                                   "prefixed with its task (rank N node:)"))
    parser.add_argument("-q", "--quiet", action="store_true", default=False if top else unset,
                        help=shown("say only errors on stderr (submit --wait: no progress lines)"))
    parser.add_argument("--debug", action="store_true", default=False if top else unset,
                        help=shown("as --verbose, with every library's log (gRPC's, asyncio's), and the traceback "
                                   "of an error"))


_FORMAT_HELP = ("the variables to export: tf (TF_CONFIG), torch (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, "
                "LOCAL_RANK...), jax (what a bare jax.distributed.initialize() reads), shell (SLURM_RESOLVER_*); "
                "default: %(default)s")
_AUTO_HELP = _FORMAT_HELP.replace("; default: %(default)s", "; default: auto, the framework the COMMAND's Python "
                                  "script imports (torch, lightning: torch; jax; tensorflow: tf), else shell")
_AUTO = ("auto", *FORMATS)
"""The choices of ``--format`` where a command is given: ``auto`` tells the framework from the command."""
_JOBS_HELP = ("the job layout: name=count pairs such as ps=1,worker=3 (filled in rank order, names sorted), or "
              "one name per het component such as ps,worker; default: every task a worker")
_PORT_HELP = ("the planned port of each node's first task; a task's port is this plus its local rank "
              "(default: SLURM_RESOLVER_PORT_BASE, else 8888)")
_ALL_RANKS = ("every task prints its whole answer; by default rank 0 prints it and every other task prints only "
              "its own problems, prefixed with its rank")


Command = Callable[..., argparse.ArgumentParser]
"""Adds one command: its name, the function that runs it, a summary, examples, and whether it runs per task."""


_GROUPS = {"cluster": "in a job (srun ... slurm-resolver COMMAND runs it in every task)",
           "templates": "submitting a job", "running": "a running job (from the login node)", "tools": "tools"}

_GROUP_OF = {"show": "cluster", "env": "cluster", "bootstrap": "cluster", "run": "cluster", "check": "cluster",
             "submit": "templates", "render": "templates", "templates": "templates", "stacks": "running",
             "expand": "tools", "collapse": "tools", "completion": "tools", "launchers": "tools", "variables": "tools"}
"""Each command's group (``tests/cli/test_parser.py`` holds it to the commands the groups declare)."""

_FLAGS = {"-v", "--verbose", "-q", "--quiet", "--debug"}
"""The options that may come before the command (none takes a value)."""


def command_named(argv: Sequence[str]) -> str | None:
    """The command ``argv`` runs, where its own parser alone can read the command line: every task of
    ``srun slurm-resolver bootstrap -- ...`` then declares one command's options, not every command's.
    None where the whole parser is needed (help, a misspelt command, ``completion``).

    >>> command_named(["-v", "bootstrap", "--", "python", "train.py"]), command_named(["shwo"])
    ('bootstrap', None)
    """
    word = next((w for w in argv if w not in _FLAGS), None)
    return word if word in _GROUP_OF and word != "completion" else None


class _Unbuilt:
    """A command of a parser built for another command: what it declares is not kept."""

    def add_argument(self, *args: object, **kwargs: object) -> None:
        """Declares nothing."""


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The argument parser of ``slurm-resolver``; with ``only`` (a command, see `command_named`), a parser
    of that command alone."""
    from .. import __version__

    parser = Parser(
        prog="slurm-resolver", formatter_class=_Formatter, usage="%(prog)s [-h] [--version] [-v] [-q] [--debug] "
                                                                 "COMMAND ...",
        description="Resolve the cluster of a Slurm job: every task, its node, address and GPUs.",
        epilog="examples:\n"
               "  srun -N2 -n4 slurm-resolver show       the job's tasks, printed once (by rank 0)\n"
               "  srun -N2 -n4 slurm-resolver check      diagnose the job's environment\n"
               "  slurm-resolver submit data_parallel --set nodes=2 --wait\n"
               "  slurm-resolver COMMAND --help          a command's options and examples\n"
               "  (-v, -q and --debug also work after the command)")
    parser.add_argument("--version", action="version", version=f"slurm-resolver {__version__}")
    _global_options(parser, top=True)
    parser.set_defaults(parser=parser)  # for the completion script, which describes every command
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=Parser,
                                prog="slurm-resolver", help=argparse.SUPPRESS)
    listed: dict[str, list[str]] = {group: [] for group in _GROUPS}

    def adder(group: str) -> Command:
        def command(name: str, func: Callable[[argparse.Namespace], int], summary: str, examples: str = "",
                    per_task: bool = False) -> argparse.ArgumentParser:
            if only is not None and name != only:
                return cast(argparse.ArgumentParser, _Unbuilt())
            epilog = f"examples:\n{examples}" if examples else None
            p = sub.add_parser(name, description=summary, epilog=epilog, formatter_class=_Formatter)
            _global_options(p, top=False)
            p.set_defaults(func=func, per_task=per_task, command_parser=p)
            listed[group].append(textwrap.fill(summary, 100, initial_indent=f"  {name:12} ",
                                               subsequent_indent=" " * 15))
            return p
        return command

    for group, commands in (("cluster", _cluster_commands), ("templates", _template_commands),
                            ("running", _running_commands), ("tools", _tools)):
        if only is None or _GROUP_OF[only] == group:
            commands(adder(group))
    if only is not None:
        return parser
    parser.description = "\n\n".join([str(parser.description), *(f"{_GROUPS[g]}:\n" + "\n".join(lines)
                                                                   for g, lines in listed.items())])
    return parser


def _cluster_commands(command: Command) -> None:
    """``show``, ``env``, ``bootstrap`` and ``check``: they run in every task of a launch."""
    from ..exchange import MODES
    from . import cluster

    show = command("show", cluster.show, "the calling task and the whole cluster: a table, or JSON",
                   "  srun -N2 -n4 slurm-resolver show              rank 0's table, once for the job\n"
                   "  srun -N2 -n4 slurm-resolver show --all-ranks  every task's table\n"
                   "  slurm-resolver show --json --jobs ps=1,worker=3", per_task=True)
    show.add_argument("--json", action="store_true", help="one JSON object: the task and the cluster")
    show.add_argument("--jobs", type=_jobs, help=_JOBS_HELP)
    show.add_argument("--port-base", type=_port, metavar="PORT", help=_PORT_HELP)
    show.add_argument("--exchange", choices=MODES,
                      help="how tasks learn a layout their environment does not tell (default: auto)")
    show.add_argument("--bootstrapped", action="store_true",
                      help="the task as `slurm-resolver bootstrap` exported it (SLURM_RESOLVER_TASK)")
    show.add_argument("--all-ranks", action="store_true", help=_ALL_RANKS)

    env = command("env", cluster.env, "export lines of a framework's variables, for a shell script",
                  "  eval \"$(slurm-resolver env --format torch)\"   in every task of srun", per_task=True)
    env.add_argument("--format", choices=FORMATS, default="shell", help=_FORMAT_HELP)
    env.add_argument("--jobs", type=_jobs, help=_JOBS_HELP)
    env.add_argument("--port-base", type=_port, metavar="PORT", help=_PORT_HELP)

    boot = command("bootstrap", cluster.bootstrap,
                   "bootstrap (real servers, one verified cluster), export the variables, run COMMAND",
                   "  srun -N2 -n4 slurm-resolver bootstrap -- python train.py   (train.py imports torch: "
                   "MASTER_ADDR...)\n"
                   "  srun -N2 -n4 slurm-resolver bootstrap --format torch -- python train.py\n"
                   "  srun -N2 -n4 slurm-resolver bootstrap      the verified cluster, printed by rank 0",
                   per_task=True)
    boot.add_argument("--format", choices=_AUTO, default="auto", help=_AUTO_HELP)
    boot.add_argument("--jobs", type=_jobs, help=_JOBS_HELP)
    _bootstrap_options(boot)
    boot.add_argument("--overwrite", action="store_true", help="replace variables that are already set")
    boot.add_argument("--exec", action="store_true",
                      help="run COMMAND in this task's place, without watching for deaths (always under mpirun)")
    boot.add_argument("--all-ranks", action="store_true", help="without COMMAND: " + _ALL_RANKS)
    boot.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")

    run = command("run", cluster.run,
                  "in a job's script: launch COMMAND in every task (srun, bootstrap), and again in the same "
                  "allocation when a task dies",
                  "  slurm-resolver run --restarts 3 -- python train.py\n"
                  "  slurm-resolver run --spare-nodes 1 --restarts 2 -- python train.py   (#SBATCH --no-kill)")
    run.add_argument("--restarts", type=_count, default=3, metavar="N",
                     help="the most restarts after a death (default: %(default)s)")
    run.add_argument("--spare-nodes", type=_count, default=0, metavar="K",
                     help="the job's last K nodes, kept for a lost node (default: %(default)s)")
    run.add_argument("--min-nodes", type=_count, metavar="M",
                     help="the fewest nodes the program can run on (default: all the nodes it started on)")
    run.add_argument("--srun-args", default="", metavar="TEXT", help="more srun arguments, as shell words")
    run.add_argument("--jobs", type=_jobs, help=_JOBS_HELP)
    run.add_argument("--format", choices=_AUTO, default="auto", help=_AUTO_HELP)
    run.add_argument("--hang-after", type=_duration, metavar="DURATION",
                     help="a hang: no task's progress mark (b.progress(), slurm_resolver.progress()) advanced for "
                          "DURATION (90s, 10m, 2h), or some tasks' stood still while others' advanced; every "
                          "task's stacks are then printed once, and the step restarts (default: never)")
    run.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")

    check = command("check", cluster.check,
                    "diagnose this environment: one line a check, OK, WARN (no failure) or FAIL with a hint",
                    "  srun -N2 -n2 slurm-resolver check          rank 0's checks; others print only failures\n"
                    "  srun -N2 -n2 slurm-resolver check --json   the same as JSON, for scripts", per_task=True)
    check.add_argument("--json", action="store_true", help="one JSON object: every check with its level")
    check.add_argument("--all-ranks", action="store_true", help=_ALL_RANKS)


def _count(text: str) -> int:
    """A whole number, 0 or more."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number (0 or more)")
    return int(text)


def _verify(text: str) -> Verify:
    """--verify's word or count, read by the one reader of ``verify=``."""
    from ..errors import ConfigurationError
    from ..rpc.tree import Verify

    try:
        return Verify.parse(text, "--verify")
    except ConfigurationError as exc:
        raise argparse.ArgumentTypeError(f"{exc.message}: {exc.hint}") from None


def _ports(text: str) -> tuple[int, ...]:
    """Comma-separated TCP ports."""
    return tuple(_port(p) for p in text.split(","))


def _port_or_any(text: str) -> int:
    """A TCP port, or 0 for any free one."""
    return 0 if text == "0" else _port(text)


def _bootstrap_options(parser: argparse.ArgumentParser) -> None:
    """Every option of the bootstrap (``BootstrapOptions``), with the help, default and unit it documents."""
    if isinstance(parser, _Unbuilt):
        return
    from ..rpc.options import FIELDS
    from ..rpc.tree import VERIFY_WORDS

    kinds: dict[str, dict[str, object]] = {
        "timeout": {"type": _seconds, "metavar": "SECONDS"}, "port": {"type": _port_or_any, "metavar": "PORT"},
        "verify": {"type": _verify, "metavar": "|".join((*VERIFY_WORDS, "K"))},
        "rendezvous": {"type": _ports, "metavar": "PORTS"},
        "fanout": {"type": _count, "metavar": "K"}, "heartbeat": {"type": float, "metavar": "SECONDS"},
        "patience": {"type": _seconds, "metavar": "SECONDS"}, "hang_after": {"type": _duration, "metavar": "DURATION"}}
    for field in FIELDS:
        shape = kinds.get(field.name) or {"choices": field.metadata.get("choices")}
        parser.add_argument(f"--{field.name.replace('_', '-')}", help=field.metadata["help"], **shape)  # type: ignore[arg-type]


def _template_commands(command: Command) -> None:
    """``submit``, ``render`` and ``templates``."""
    from . import template_commands

    submit = command("submit", template_commands.submit, "render a template and submit it; --wait follows the job",
                     "  JOB=$(slurm-resolver submit ps_worker --set nodes=4)\n"
                     "  slurm-resolver submit data_parallel --set nodes=2 --set command='python train.py' --wait\n\n"
                     + _TEMPLATES)
    submit.add_argument("template", help="a template's name (slurm-resolver templates lists them)")
    submit.add_argument("--set", action="append", metavar="KEY=VALUE",
                        help="a template parameter (repeat it; sbatch's spellings such as ntasks-per-node work)")
    submit.add_argument("--wait", action="store_true", help="follow the job, show its output, exit with its code")
    submit.add_argument("--timeout", type=_seconds, default=3600.0, metavar="SECONDS",
                        help="how long --wait follows the job before giving up (default: %(default)g s)")

    render = command("render", template_commands.render, "print the sbatch text of a template",
                     "  slurm-resolver render ps_worker --set nodes=4 --set tasks_per_node=4 > job.sbatch\n\n"
                     + _TEMPLATES)
    render.add_argument("template", help="a template's name (slurm-resolver templates lists them)")
    render.add_argument("--set", action="append", metavar="KEY=VALUE",
                        help="a template parameter (repeat it; sbatch's spellings such as ntasks-per-node work)")

    templates = command("templates", template_commands.templates,
                        "the bundled templates: their purpose, defaults and parameters",
                        "  slurm-resolver templates ps_worker   ps_worker's parameters with its own defaults")
    templates.add_argument("name", nargs="?", help="only this template, with its own defaults")
    templates.add_argument("--json", action="store_true", help="the same as one JSON object, for scripts")


def _running_commands(command: Command) -> None:
    """``stacks``."""
    from . import diagnosis

    stacks = command("stacks", diagnosis.stacks,
                     "every task's Python stacks of a running step, merged: where a hung job is",
                     "  slurm-resolver stacks 1234          the job's one running step\n"
                     "  slurm-resolver stacks 1234.0 --svg stacks.svg\n"
                     "  srun --overlap --jobid 1234 -n1 slurm-resolver stacks 1234.0   (from inside the allocation)")
    stacks.add_argument("step", metavar="JOBID[.STEP]", help="the job, and its step where it runs several")
    stacks.add_argument("--timeout", type=_seconds, default=5.0, metavar="SECONDS",
                        help="how long the tasks have to answer; those that do not are named silent "
                             "(default: %(default)g s)")
    stacks.add_argument("--svg", metavar="FILE", help="also draw the merged tree of call paths as SVG into FILE")
    stacks.add_argument("--ports", type=_ports, metavar="PORTS",
                        help="the step's rendezvous ports, where the job sets SLURM_RESOLVER_RENDEZVOUS_PORTS "
                             "(default: the launch's own, as its tasks derive them)")


def _tools(command: Command) -> None:
    """The small commands."""
    from . import tools

    expand = command("expand", tools.expand, "expand host lists, like scontrol show hostnames",
                     "  slurm-resolver expand 'node[01-03],gpu[1-2]'")
    expand.add_argument("hostlist", nargs="+")
    collapse = command("collapse", tools.collapse, "collapse host names into a host list, like scontrol show hostlist",
                       "  slurm-resolver collapse node1 node2 node3     node[1-3]")
    collapse.add_argument("hosts", nargs="*", help="names, separated by spaces or commas (default: standard input)")
    collapse.add_argument("--sort", action="store_true",
                          help="sorted first, in the order of scontrol show hostlistsorted (Slurm 22.05's)")
    completion = command("completion", tools.completion, "a shell completion script",
                         "  eval \"$(slurm-resolver completion bash)\"")
    completion.add_argument("shell", choices=("bash", "zsh"))
    command("launchers", tools.launchers, "the launch modes, in detection order")
    command("variables", tools.variables, "the environment variable reference")
