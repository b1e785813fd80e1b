"""A command line that names its command builds that command's parser alone, and reads as the whole parser reads it."""

from __future__ import annotations

import argparse

import pytest

from slurm_resolver.cli.parser import _GROUP_OF, build_parser, command_named
from slurm_resolver.cli.usage import parse

LINES = [  # one line a command, its options given
    ["show", "--json", "--jobs", "ps=1,worker=3", "--port-base", "9000", "--exchange", "none"],
    ["-v", "env", "--format", "torch", "--jobs", "worker=4"],
    ["bootstrap", "--format", "torch", "--timeout", "30", "--verify", "once", "--", "python", "train.py", "-x"],
    ["--debug", "run", "--restarts", "2", "--spare-nodes", "1", "--hang-after", "10m", "--", "python", "t.py"],
    ["check", "--json", "--all-ranks", "-q"],
    ["submit", "ps_worker", "--set", "nodes=4", "--wait", "--timeout", "60"],
    ["render", "ps_worker", "--set", "nodes=2"],
    ["templates", "ps_worker", "--json"],
    ["stacks", "1234.0", "--timeout", "2", "--svg", "x.svg", "--ports", "30001,30002"],
    ["expand", "n[1-2]", "m3"],
    ["collapse", "--sort", "n09", "n9"],
    ["launchers"],
    ["variables"],
]


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001
    return dict(sub.choices)


def test_every_command_has_its_group_and_a_line_here() -> None:
    full = build_parser()
    assert set(_commands(full)) == set(_GROUP_OF)
    assert {command_named(line) for line in LINES} | {"completion"} == set(_GROUP_OF)
    for group in {*_GROUP_OF.values()}:  # each group's commands, as the top-level help lists them
        for name in (n for n, g in _GROUP_OF.items() if g == group):
            assert f"  {name} " in str(full.description)


@pytest.mark.parametrize("line", LINES, ids=lambda line: command_named(line) or "?")
def test_a_commands_parser_alone_reads_its_line_as_the_whole_parser(line: list[str]) -> None:
    only = command_named(line)
    narrow = build_parser(only)
    assert set(_commands(narrow)) == {only}

    def read(parser: argparse.ArgumentParser) -> dict[str, object]:
        args = vars(parse(parser, line))
        return {k: v for k, v in args.items() if k not in ("parser", "command_parser")}

    assert read(narrow) == read(build_parser())


@pytest.mark.parametrize("line", [[], ["-h"], ["--version"], ["shwo"], ["completion", "bash"], ["-v", "-q"]])
def test_help_a_misspelt_command_and_completion_get_the_whole_parser(line: list[str]) -> None:
    assert command_named(line) is None
