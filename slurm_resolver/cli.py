"""The ``slurm-resolver`` command line.

Exit codes: 0 success, 1 a user or configuration error (one line with the hint; the
traceback only with ``--debug``), 2 a usage error.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence

from .errors import SlurmResolverError

__all__ = ["main", "build_parser"]


def _gpus(ids: tuple[str, ...] | None, count: int) -> str:
    if ids is None:
        return f"{count} bound by Slurm"
    return ",".join(ids) or "-"


def _show(args: argparse.Namespace) -> int:
    from .parsing import parse_jobs
    from .resolvers.slurm import SlurmClusterResolver

    jobs = parse_jobs(args.jobs, "--jobs") if args.jobs else None
    cluster = SlurmClusterResolver(jobs=jobs, port_base=args.port_base, exchange=args.exchange,
                                   auto_set_gpu=False, check_port=False).cluster
    if args.json:
        print(json.dumps(cluster.describe(), sort_keys=True))
        return 0
    me = cluster.me
    where = f"rank {cluster.rank} of {cluster.world_size}, {me.job}:{me.index} on {me.node} at {me.address}" \
        if me else f"not a task; {cluster.world_size} tasks"
    print(f"launcher {cluster.launcher}: {where}")
    rows = [("rank", "job", "index", "node", "address", "gpus")]
    for rank in range(cluster.world_size):
        t = cluster.task(rank)
        rows.append((str(rank) + ("*" if rank == cluster.rank else ""), t.job, str(t.index), t.node,
                     t.address, _gpus(t.gpus, cluster.gpu_count(rank))))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    return 0


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
    from .errors import ConfigurationError
    from .templates import render

    values = {}
    for item in args.set or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigurationError(f"--set {item!r} must be key=value")
        values[key] = value
    print(render(args.template, values), end="")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``slurm-resolver``."""
    parser = argparse.ArgumentParser(prog="slurm-resolver", description="Resolve the cluster of a Slurm job.")
    parser.add_argument("--debug", action="store_true", help="log at DEBUG and show tracebacks")
    sub = parser.add_subparsers(dest="command", required=True)
    show = sub.add_parser("show", help="the calling task and the whole cluster")
    show.add_argument("--json", action="store_true", help="one JSON object for the calling task")
    show.add_argument("--jobs", help="ps=1,worker=3, or ps,worker (one job per het component)")
    show.add_argument("--port-base", type=int, help="first port on each node (default 8888)")
    show.add_argument("--exchange", choices=("auto", "mpi", "none"), help="placement exchange between ranks")
    show.set_defaults(func=_show)
    exp = sub.add_parser("expand", help="expand host lists, like scontrol show hostnames")
    exp.add_argument("hostlist", nargs="+")
    exp.set_defaults(func=_expand)
    col = sub.add_parser("collapse", help="collapse host names into a host list")
    col.add_argument("hosts", nargs="*", help="names (or standard input)")
    col.set_defaults(func=_collapse)
    ren = sub.add_parser("render", help="print the sbatch text of a template")
    ren.add_argument("template")
    ren.add_argument("--set", action="append", metavar="KEY=VALUE", help="a template parameter")
    ren.set_defaults(func=_render)
    sub.add_parser("launchers", help="the launch modes, in detection order").set_defaults(func=_launchers)
    sub.add_parser("variables", help="the environment variable reference").set_defaults(func=_variables)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.WARNING,
                        format="slurm-resolver: %(message)s")
    try:
        return int(args.func(args))
    except SlurmResolverError as exc:
        if args.debug:
            raise
        print(f"slurm-resolver: error: {exc.one_line()}", file=sys.stderr)
        return 1
    except (BrokenPipeError, KeyboardInterrupt):
        return 1
