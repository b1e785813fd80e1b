"""The ``slurm-resolver`` command line: [main][slurm_resolver.cli.main] runs it.

Exit codes: 0 success; 1 a user or configuration error (one line with the hint; the
traceback only with ``--debug``), or a task whose own check failed; 2 a usage error (a bad
template parameter included); 130 interrupted (Ctrl-C); and for ``submit --wait`` the
job's own exit code.

The package is cut by role: ``parser`` declares every command and option; ``cluster``
runs the commands about the job's cluster (``show``, ``check``, ``env``, ``bootstrap``),
``per_job`` decides which task of a job prints what, ``template_commands`` runs
``templates``, ``render`` and ``submit``, ``tools`` the small commands, and ``completion``
writes the shell completion script.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

from ..errors import SlurmResolverError
from .parser import build_parser

__all__ = ["main", "build_parser"]


def _log_level(verbose: bool, quiet: bool, debug: bool) -> int:
    if debug or verbose:
        return logging.DEBUG
    return logging.ERROR if quiet else logging.WARNING


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (``sys.argv[1:]`` by default); returns the exit code."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=_log_level(args.verbose, args.quiet, args.debug), format="slurm-resolver: %(message)s")
    from ..template_schema import TemplateParameterError

    try:
        return int(args.func(args))
    except TemplateParameterError as exc:  # a usage error, as argparse's own
        print(f"slurm-resolver: error: {exc.one_line()}", file=sys.stderr)
        return 2
    except SlurmResolverError as exc:
        if args.debug:
            raise
        from .per_job import task_label

        who = task_label() if args.per_task else ""
        print(f"slurm-resolver: error: {who}{exc.one_line()}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("slurm-resolver: interrupted", file=sys.stderr)
        return 130  # 128 + SIGINT, as a shell reports a command that Ctrl-C stopped
    except BrokenPipeError:
        return 1
