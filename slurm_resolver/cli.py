"""The ``slurm-resolver`` command line.

Exit codes: 0 success, 1 a user or configuration error (one line with the hint; the
traceback only with ``--debug``), 2 a usage error (a bad template parameter included),
130 interrupted (Ctrl-C), and for ``submit --wait`` the job's own exit code.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .errors import SlurmResolverError
from .exchange import MODES

if TYPE_CHECKING:  # pragma: no cover
    from .cluster import Cluster
    from .rpc.bootstrapped import Bootstrapped

__all__ = ["main", "build_parser"]


def _gpus(ids: tuple[str, ...] | None, count: int) -> str:
    if ids is None:
        return f"{count} bound by Slurm"
    return ",".join(ids) or "-"


def _resolved(args: argparse.Namespace) -> Cluster:
    """The cluster of this task with the command's --jobs (and --port-base, --exchange), every
    rank placed (a layout only the step's tasks can tell is learned from them)."""
    from .parsing import parse_jobs
    from .resolution import resolve

    jobs = parse_jobs(args.jobs, "--jobs") if args.jobs else None
    cluster = resolve(jobs=jobs, port_base=getattr(args, "port_base", None), exchange=getattr(args, "exchange", None))
    if not cluster.placement.exact:
        from .rpc.learn import learn_layout

        cluster = learn_layout(cluster)
    return cluster


def _show(args: argparse.Namespace) -> int:

    if args.bootstrapped:
        from .environment import snapshot

        task = snapshot().get("SLURM_RESOLVER_TASK")
        if task is None:
            from .errors import ConfigurationError

            raise ConfigurationError("SLURM_RESOLVER_TASK is not set: this process was not started by "
                                     "`slurm-resolver bootstrap`", "run it as: slurm-resolver bootstrap -- COMMAND")
        print(task)
        return 0
    cluster = _resolved(args)
    if args.json:
        print(json.dumps(cluster.describe(), sort_keys=True))
        return 0
    me = cluster.me
    where = f"rank {cluster.rank} of {cluster.world_size}, {me.job}:{me.index} on {me.node} at {me.address}" \
        if me else f"not a task; {cluster.world_size} tasks"
    element = f" (array element {cluster.launch.array})" if cluster.launch.array else ""
    print(f"launcher {cluster.launcher}{element}: {where}")
    rows = [("rank", "job", "index", "node", "address", "gpus")]
    for rank in range(cluster.world_size):
        t = cluster.task(rank)
        rows.append((str(rank) + ("*" if rank == cluster.rank else ""), t.job, str(t.index), t.node,
                     t.address, _gpus(t.gpus, cluster.gpu_count(rank))))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    return 0


def _variables_for(b: Bootstrapped, fmt: str) -> dict[str, str]:
    from . import adapters

    variables = dict(adapters.FORMATS[fmt](b))
    if fmt != "shell":
        variables["SLURM_RESOLVER_TASK"] = adapters.shell_env(b)["SLURM_RESOLVER_TASK"]
    return variables


def _env(args: argparse.Namespace) -> int:
    from .adapters import shell
    from .rpc.bootstrapped import Bootstrapped

    print(shell(_variables_for(Bootstrapped.from_cluster(_resolved(args)), args.format)), end="")
    return 0


def _bootstrap(args: argparse.Namespace) -> int:
    import os

    from .adapters import apply
    from .parsing import parse_jobs
    from .resolution import resolve
    from .rpc.bootstrap import bootstrap

    jobs = parse_jobs(args.jobs, "--jobs") if args.jobs else None
    b = bootstrap(resolve(jobs=jobs), timeout=args.timeout)  # a layout to learn is learned in the bootstrap
    apply(_variables_for(b, args.format), overwrite=args.overwrite)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    from .mpi import finalize

    if not command:
        print(json.dumps(b.describe(), sort_keys=True))
        b.stop()
        finalize()
        return 0
    if not b.cluster.launch.mpi_launched and not args.exec:
        from .supervise import supervise

        return supervise(b, command)  # the step watches for deaths while the command runs
    sys.stdout.flush()
    b.stop()  # every task has verified the cluster; the command takes this task's place
    finalize()  # an MPI launcher expects MPI_Finalize from a process that initialised MPI
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        from .errors import ConfigurationError

        raise ConfigurationError(f"cannot run {command[0]!r}: {exc.strerror}", "check the command and PATH") from None
    return 0  # pragma: no cover


def _run(args: argparse.Namespace) -> int:
    from .restart import from_arguments

    return from_arguments(args)


def _check(args: argparse.Namespace) -> int:
    from .diagnostics import run_checks

    results = run_checks()
    for ok, name, detail, hint in results:
        label = "OK  " if ok else "WARN" if ok is None else "FAIL"
        print(f"{label}  {name}: {detail}" + ("" if ok or not hint else f"  (hint: {hint})"))
    return 0 if all(ok is not False for ok, *_ in results) else 1


def _submit(args: argparse.Namespace) -> int:
    from .submission import submit, wait
    from .templates import render

    text = render(args.template, _pairs(args.set))
    job_id = submit(text)
    if not args.wait:
        print(job_id, flush=True)  # alone on stdout, as sbatch --parsable: JOB=$(slurm-resolver submit ...)
        return 0
    print(f"slurm-resolver: submitted batch job {job_id}", file=sys.stderr, flush=True)
    return wait(job_id, timeout=args.timeout)


def _pairs(items: list[str] | None) -> dict[str, str]:
    from .template_schema import TemplateParameterError

    values = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise TemplateParameterError(f"--set {item!r} must be key=value", "e.g. --set nodes=4")
        values[key] = value
    return values


def _expand(args: argparse.Namespace) -> int:
    from .hostlists import expand

    for text in args.hostlist:
        print("\n".join(expand(text, "hostlist")))
    return 0


def _collapse(args: argparse.Namespace) -> int:
    from .hostlists import collapse

    names = [n for arg in args.hosts for n in arg.replace(",", " ").split()]
    if not names:
        names = sys.stdin.read().split()
    print(collapse(names))
    return 0


def _launchers(args: argparse.Namespace) -> int:
    from .launchers import LAUNCHERS

    for launcher in LAUNCHERS:
        print(f"{launcher.name:8}  {launcher.description}")
    return 0


def _variables(args: argparse.Namespace) -> int:
    from .variables import reference_markdown

    print(reference_markdown(), end="")
    return 0


def _render(args: argparse.Namespace) -> int:
    from .templates import render

    print(render(args.template, _pairs(args.set)), end="")
    return 0


def _templates(args: argparse.Namespace) -> int:
    print(templates_listing(args.name), end="")
    return 0


def templates_listing(only: str | None = None) -> str:
    """Every bundled template with its purpose and the defaults it changes, then every parameter."""
    from .template_schema import SCHEMA
    from .templates import available, describe

    names = [only] if only else available()  # describe() refuses a name that is not a template
    lines = ["templates (slurm-resolver render|submit NAME --set KEY=VALUE ...):"]
    for template in map(describe, names):
        lines.append(f"  {template.name:16} {template.purpose}")
        own = " ".join(f"{k}={v}" for k, v in template.defaults.items() if k not in ("job_name",))
        lines.append(f"  {'':16} defaults: {own}")
    lines.append("parameters (name, default, meaning):")
    for p in SCHEMA:
        default = "(this Python)" if p.name == "python" else (p.default or "-")
        lines.append(f"  {p.name:15} {default:22} {p.meaning}")
    return "\n".join(lines) + "\n"


_LISTING = "(the templates listing)"


class _ListingFormatter(argparse.RawDescriptionHelpFormatter):
    """Writes the templates listing where the epilog says so, when help is asked for."""

    def add_text(self, text: str | None) -> None:
        super().add_text(templates_listing() if text == _LISTING else text)


def _completion(args: argparse.Namespace) -> int:
    from .completion import script

    print(script(args.shell, build_parser()), end="")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``slurm-resolver``."""
    from . import __version__

    parser = argparse.ArgumentParser(prog="slurm-resolver", description="Resolve the cluster of a Slurm job.")
    parser.add_argument("--version", action="version", version=f"slurm-resolver {__version__}")
    parser.add_argument("--debug", action="store_true", help="log at DEBUG and show tracebacks")
    sub = parser.add_subparsers(dest="command", required=True)
    show = sub.add_parser("show", help="the calling task and the whole cluster")
    show.add_argument("--json", action="store_true", help="one JSON object for the calling task")
    show.add_argument("--jobs", help="ps=1,worker=3, or ps,worker (one job per het component)")
    show.add_argument("--port-base", type=int, help="first port on each node (default 8888)")
    show.add_argument("--exchange", choices=MODES, help="how the tasks learn a layout the environment does not tell")
    show.add_argument("--bootstrapped", action="store_true", help="the task as `bootstrap` exported it")
    show.set_defaults(func=_show)
    env = sub.add_parser("env", help="export lines of the framework's variables, for a shell script")
    env.add_argument("--format", choices=("tf", "torch", "jax", "shell"), default="shell")
    env.add_argument("--jobs", help="ps=1,worker=3")
    env.add_argument("--port-base", type=int)
    env.set_defaults(func=_env)
    boot = sub.add_parser("bootstrap",
                          help="bootstrap, export the adapter's variables, run COMMAND in this task's place")
    boot.add_argument("--format", choices=("tf", "torch", "jax", "shell"), default="shell")
    boot.add_argument("--jobs", help="ps=1,worker=3, or ps,worker for a heterogeneous job")
    boot.add_argument("--timeout", type=float, default=60.0)
    boot.add_argument("--overwrite", action="store_true", help="replace variables that are already set")
    boot.add_argument("--exec", action="store_true",
                      help="run COMMAND in this task's place, without watching for deaths (always under mpirun)")
    boot.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    boot.set_defaults(func=_bootstrap)
    rerun = sub.add_parser("run", help="in a job's script: launch COMMAND in every task (srun, bootstrap), and "
                           "launch it again in the same allocation when a task dies")
    rerun.add_argument("--restarts", type=int, default=3, help="the most restarts (default 3)")
    rerun.add_argument("--spare-nodes", type=int, default=0, help="the job's last nodes, kept for lost ones")
    rerun.add_argument("--min-nodes", type=int, help="the fewest nodes the program runs on (default: all)")
    rerun.add_argument("--srun-args", default="", help="more srun arguments, as shell words")
    rerun.add_argument("--jobs", help="ps=1,worker=3, for the bootstrap")
    rerun.add_argument("--format", choices=("tf", "torch", "jax", "shell"), default="shell")
    rerun.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    rerun.set_defaults(func=_run)
    check = sub.add_parser("check", help="diagnose this environment: one line per check, OK or FAIL with a hint")
    check.set_defaults(func=_check)
    listing, raw = _LISTING, _ListingFormatter  # the listing reads every template: only for --help
    submit = sub.add_parser("submit", help="render a template and submit it; --wait follows the job",
                            epilog=listing, formatter_class=raw)
    submit.add_argument("template")
    submit.add_argument("--set", action="append", metavar="KEY=VALUE", help="a template parameter")
    submit.add_argument("--wait", action="store_true", help="follow the job, show its output, exit with its code")
    submit.add_argument("--timeout", type=float, default=3600.0, help="seconds --wait follows the job")
    submit.set_defaults(func=_submit)
    exp = sub.add_parser("expand", help="expand host lists, like scontrol show hostnames")
    exp.add_argument("hostlist", nargs="+")
    exp.set_defaults(func=_expand)
    col = sub.add_parser("collapse", help="collapse host names into a host list")
    col.add_argument("hosts", nargs="*", help="names (or standard input)")
    col.set_defaults(func=_collapse)
    ren = sub.add_parser("render", help="print the sbatch text of a template", epilog=listing, formatter_class=raw)
    ren.add_argument("template")
    ren.add_argument("--set", action="append", metavar="KEY=VALUE", help="a template parameter")
    ren.set_defaults(func=_render)
    tem = sub.add_parser("templates", help="the bundled templates, their purpose and parameters")
    tem.add_argument("name", nargs="?", help="only this template")
    tem.set_defaults(func=_templates)
    com = sub.add_parser("completion", help="a shell completion script: eval \"$(slurm-resolver completion bash)\"")
    com.add_argument("shell", choices=("bash", "zsh"))
    com.set_defaults(func=_completion)
    sub.add_parser("launchers", help="the launch modes, in detection order").set_defaults(func=_launchers)
    sub.add_parser("variables", help="the environment variable reference").set_defaults(func=_variables)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.WARNING,
                        format="slurm-resolver: %(message)s")
    from .template_schema import TemplateParameterError

    try:
        return int(args.func(args))
    except TemplateParameterError as exc:  # a usage error, as argparse's own
        print(f"slurm-resolver: error: {exc.one_line()}", file=sys.stderr)
        return 2
    except SlurmResolverError as exc:
        if args.debug:
            raise
        print(f"slurm-resolver: error: {exc.one_line()}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("slurm-resolver: interrupted", file=sys.stderr)
        return 130  # 128 + SIGINT, as a shell reports a command that Ctrl-C stopped
    except BrokenPipeError:
        return 1
