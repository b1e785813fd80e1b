"""Usage errors: said once for a launch, with what was probably meant.

Every task of ``srun -n256 slurm-resolver show --josn`` is given the same words: rank 0
says the error, the others exit 2 without a word. A misspelt command, option or choice gets
the closest that exists (``did you mean show?``).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import NoReturn

__all__: list[str] = []  # internal: no public names (docs/reference.md)


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose usage errors say what was probably meant and are said once for a launch."""

    def error(self, message: str) -> NoReturn:
        from .per_job import task_rank

        if task_rank() not in (None, 0):
            self.exit(2)  # every task of the launch was given the same words: rank 0 says it for the job
        super().error(_did_you_mean(self, message))


def _did_you_mean(parser: argparse.ArgumentParser, message: str) -> str:
    """argparse's ``message`` with the closest choice or option, where one is close.

    >>> p = Parser(prog="x"); _ = p.add_argument("--json", action="store_true")
    >>> _did_you_mean(p, "unrecognized arguments: --josn")
    'unrecognized arguments: --josn (did you mean --json?)'
    >>> _did_you_mean(p, "argument COMMAND: invalid choice: 'shwo' (choose from 'show', 'env')")
    "argument COMMAND: invalid choice: 'shwo' (did you mean show?)"
    """
    import difflib
    import re

    choice = re.fullmatch(r"(argument .*: invalid choice: (.*?)) \(choose from (.*)\)", message, re.S)
    if choice:
        given, choices = choice[2].strip("'"), [c.strip().strip("'") for c in choice[3].split(",")]
        close = difflib.get_close_matches(given, choices, n=1, cutoff=0.5)
        if close:
            return f"{choice[1]} (did you mean {close[0]}?)"
        return f"{choice[1]} (choose from {', '.join(choices)})"
    if message.startswith("unrecognized arguments: "):
        first = message.removeprefix("unrecognized arguments: ").split()[0].partition("=")[0]
        close = difflib.get_close_matches(first, list(parser._option_string_actions), n=1, cutoff=0.6)  # noqa: SLF001
        return f"{message} (did you mean {close[0]}?)" if close else message
    return message


def parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """The arguments of ``argv``; a word the command does not know is refused by the command's own
    parser (its usage, its options' names)."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        args.command_parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args
