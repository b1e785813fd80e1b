"""The small commands: ``expand``, ``collapse``, ``launchers``, ``variables`` and ``completion``."""

from __future__ import annotations

import argparse
import sys

__all__: list[str] = []  # internal: no public names (docs/reference.md)


def expand(args: argparse.Namespace) -> int:
    """``expand``: one host name a line, in Slurm's order."""
    from ..hostlists import expand as expand_hostlist

    for text in args.hostlist:
        print("\n".join(expand_hostlist(text, "hostlist")))
    return 0


def collapse(args: argparse.Namespace) -> int:
    """``collapse``: the host list of the names given (or read from standard input)."""
    from ..hostlists import collapse as collapse_names

    names = [n for arg in args.hosts for n in arg.replace(",", " ").split()]
    if not names:
        names = sys.stdin.read().split()
    print(collapse_names(names, sort=args.sort))
    return 0


def launchers(args: argparse.Namespace) -> int:
    """``launchers``: the launch-mode plugins, in detection order."""
    from ..launchers import LAUNCHERS

    for launcher in LAUNCHERS:
        print(f"{launcher.name:8}  {launcher.description}")
    return 0


def variables(args: argparse.Namespace) -> int:
    """``variables``: the environment variable reference (Markdown)."""
    from ..variables import reference_markdown

    print(reference_markdown(), end="")
    return 0


def completion(args: argparse.Namespace) -> int:
    """``completion``: the completion script for bash or zsh."""
    from .completion import script

    print(script(args.shell, args.parser), end="")  # the whole command line's parser (build_parser sets it)
    return 0
