"""The ``slurm-resolver`` command line: [main][slurm_resolver.cli.main] runs it.

Exit codes: 0 success; 1 a user or configuration error (one line with the hint; the
traceback only with ``--debug``), or a task whose own check failed; 2 a usage error (a bad
template parameter included); 130 interrupted (Ctrl-C); and for ``submit --wait`` the
job's own exit code.

An error that every task of a launch raises alike (``--jobs`` that do not fit the step, a
bootstrap's verdict) is said once for the job, by the task its `Speaker` names; the
others exit 1 without a word. ``-v`` logs slurm_resolver's own decisions, each line
beginning with the task (``rank 3 node2:``); ``--debug`` adds every library's (gRPC's,
asyncio's) and the traceback of an error.

The package is cut by role: ``parser`` declares every command and option, ``usage``
says a usage error once, with what was meant; ``cluster``
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
from ..speakers import Speaker
from .parser import build_parser, command_named
from .usage import parse

__all__ = ["main", "build_parser"]


class _Lines(logging.Formatter):
    """``slurm-resolver: rank 3 node2: message``: who says it first, and the package's name once."""

    def __init__(self, who: str) -> None:
        super().__init__()
        self.who = who

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record).removeprefix("slurm_resolver: ")
        return f"slurm-resolver: {self.who}{text}"


def _logging(verbose: bool, quiet: bool, debug: bool) -> None:
    """slurm_resolver's log at DEBUG with ``-v``; every other library's stays at WARNING unless ``--debug``."""
    from .per_job import task_label

    handler = logging.StreamHandler()
    handler.setFormatter(_Lines(task_label(with_node=True)))
    quiet_level = logging.ERROR if quiet else logging.WARNING
    logging.basicConfig(level=logging.DEBUG if debug else quiet_level, handlers=[handler])
    logging.getLogger("slurm_resolver").setLevel(logging.DEBUG if debug or verbose else quiet_level)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (``sys.argv[1:]`` by default); returns the exit code."""
    words = sys.argv[1:] if argv is None else argv
    args = parse(build_parser(command_named(words)), words)
    from ..template_schema import TemplateParameterError

    try:
        _logging(args.verbose, args.quiet, args.debug)
        return int(args.func(args))
    except TemplateParameterError as exc:  # a usage error, as argparse's own
        print(f"slurm-resolver: error: {exc.one_line()}", file=sys.stderr)
        return 2
    except SlurmResolverError as exc:
        if args.debug:
            raise
        from .per_job import task_label, task_rank

        if args.per_task and not exc.said_by(task_rank()):
            return 1  # every task raised it alike: another task says it for the job
        who = task_label() if args.per_task and exc.speaker is Speaker.TASK else ""  # else: the job's error
        print(f"slurm-resolver: error: {who}{exc.one_line()}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("slurm-resolver: interrupted", file=sys.stderr)
        return 130  # 128 + SIGINT, as a shell reports a command that Ctrl-C stopped
    except BrokenPipeError:
        return 1
