"""Shell completion for ``slurm-resolver``: a script for bash or zsh, made from the argument parser.

Commands, their options, the values of options that have a fixed set (``--format``,
``--exchange``), template names (after ``render``, ``submit``, ``templates``) and template
parameters (after ``--set``, as ``name=``, with no space after it) complete; after an
option that takes a free value (``--jobs``, ``--timeout``) nothing is offered. The script
is static: print it once and install it (``docs/cli.md``); zsh loads it through its bash
compatibility.
"""

from __future__ import annotations

import argparse
import shlex

__all__: list[str] = []  # internal: no public names (docs/reference.md)


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # noqa: SLF001 - argparse keeps no public list
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            return dict(action.choices)
    return {}


def words(parser: argparse.ArgumentParser) -> dict[str, list[str]]:
    """What completes where: ``""`` holds the commands and global options, each command its options
    (and the choices of its positional argument), ``"COMMAND OPTION"`` the values of an option
    with a fixed set, ``"COMMAND OPTION="`` nothing for an option with a free value."""
    from ..template_schema import SCHEMA
    from ..templates import available

    table: dict[str, list[str]] = {"": [], "@templates": available(), "@parameters": [f"{p.name}=" for p in SCHEMA]}
    table[""] = [o for a in parser._actions for o in a.option_strings]  # noqa: SLF001
    for name, command in _commands(parser).items():
        table[""].append(name)
        actions = command._actions  # noqa: SLF001
        table[name] = [o for a in actions for o in a.option_strings]
        table[name] += [str(c) for a in actions if a.choices and not a.option_strings for c in a.choices]
        for action in actions:
            if not action.option_strings or action.nargs == 0 or action.dest == "set":
                continue
            for option in action.option_strings:
                table[f"{name} {option}" + ("" if action.choices else "=")] = [str(c) for c in action.choices or ()]
    return table


def script(shell: str, parser: argparse.ArgumentParser) -> str:
    """The completion script for ``shell`` (``bash`` or ``zsh``)."""
    if shell not in ("bash", "zsh"):
        raise ValueError(f"no completion for {shell!r}: bash or zsh")
    table = words(parser)
    commands = "\n".join(f"                {shlex.quote(name)}) options={shlex.quote(' '.join(options))} ;;"
                         for name, options in table.items() if name and not name.startswith("@") and " " not in name)
    values = "\n".join(f"        {shlex.quote(name.rstrip('='))}) options={shlex.quote(' '.join(options))} ;;"
                       for name, options in table.items() if " " in name)
    # bash leaves no space after name= through compopt; zsh's bash compatibility has no compopt, so
    # there the script is registered with -o nospace and every whole word carries its own space.
    if shell == "bash":
        finish = '    if [ "$prev" = "--set" ]; then compopt -o nospace 2>/dev/null; fi'
    else:
        finish = """    spaced=()
    for reply in "${COMPREPLY[@]}"; do
        case "$reply" in *=) spaced+=("$reply") ;; *) spaced+=("$reply ") ;; esac
    done
    COMPREPLY=("${spaced[@]}")"""
    body = f'''_slurm_resolver() {{
    local cur prev command options word i reply spaced
    cur="${{COMP_WORDS[COMP_CWORD]}}"
    prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    command=""
    for ((i = 1; i < COMP_CWORD; i++)); do
        word="${{COMP_WORDS[i]}}"
        case "$word" in -*) ;; *) command="$word"; break ;; esac
    done
    options=""
    case "$command $prev" in
        *" --set") options={shlex.quote(' '.join(table['@parameters']))} ;;
{values}
        *)
            case "$command" in
                "") options={shlex.quote(' '.join(table['']))} ;;
{commands}
            esac
            case "$command" in
                render|submit|templates)
                    if [ "$prev" = "$command" ]; then options="$options {' '.join(table['@templates'])}"; fi ;;
            esac ;;
    esac
    COMPREPLY=($(compgen -W "$options" -- "$cur"))
{finish}
}}
'''
    head = f"# slurm-resolver completion ({shell}); made by `slurm-resolver completion {shell}`\n"
    if shell == "bash":
        return head + body + "complete -F _slurm_resolver slurm-resolver\n"
    return head + "autoload -U +X bashcompinit && bashcompinit\n" + body + \
        "complete -o nospace -F _slurm_resolver slurm-resolver\n"
