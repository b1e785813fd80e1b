"""Shell completion for ``slurm-resolver``: a script for bash or zsh, made from the argument parser.

Commands, their options, template names (after ``render``, ``submit``, ``templates``) and
template parameters (after ``--set``, as ``name=``) complete. The script is static: print it
once and install it (``docs/cli.md``); zsh loads it through its bash compatibility.
"""

from __future__ import annotations

import argparse
import shlex

__all__ = ["script", "words"]


def words(parser: argparse.ArgumentParser) -> dict[str, list[str]]:
    """What completes where: ``""`` holds the commands and global options, each command its options."""
    from .template_schema import SCHEMA
    from .templates import available

    table: dict[str, list[str]] = {"": [], "@templates": available(), "@parameters": [f"{p.name}=" for p in SCHEMA]}
    for action in parser._actions:  # noqa: SLF001 - argparse keeps no public list
        table[""].extend(action.option_strings)
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            for name, command in action.choices.items():
                table[""].append(name)
                table[name] = [o for a in command._actions for o in a.option_strings]  # noqa: SLF001
                table[name] += [c for a in command._actions if a.choices and not a.option_strings  # noqa: SLF001
                                for c in a.choices]
    return table


def script(shell: str, parser: argparse.ArgumentParser) -> str:
    """The completion script for ``shell`` (``bash`` or ``zsh``)."""
    table = words(parser)
    cases = "\n".join(f"        {shlex.quote(name)}) options={shlex.quote(' '.join(options))} ;;"
                      for name, options in table.items() if name and not name.startswith("@"))
    bash = f'''# slurm-resolver completion ({shell}); made by `slurm-resolver completion {shell}`
_slurm_resolver() {{
    local cur prev command options word i
    cur="${{COMP_WORDS[COMP_CWORD]}}"
    prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    command=""
    for ((i = 1; i < COMP_CWORD; i++)); do
        word="${{COMP_WORDS[i]}}"
        case "$word" in -*) ;; *) command="$word"; break ;; esac
    done
    if [ "$prev" = "--set" ]; then
        COMPREPLY=($(compgen -W {shlex.quote(' '.join(table['@parameters']))} -- "$cur"))
        compopt -o nospace 2>/dev/null
        return
    fi
    case "$command" in
        "") options={shlex.quote(' '.join(table['']))} ;;
{cases}
    esac
    case "$command" in
        render|submit|templates)
            if [ "$prev" = "$command" ]; then options="$options {' '.join(table['@templates'])}"; fi ;;
    esac
    COMPREPLY=($(compgen -W "$options" -- "$cur"))
}}
complete -F _slurm_resolver slurm-resolver
'''
    if shell == "bash":
        return bash
    if shell == "zsh":
        return "autoload -U +X bashcompinit && bashcompinit\n" + bash.replace(
            "compopt -o nospace 2>/dev/null", "true")
    raise ValueError(f"no completion for {shell!r}: bash or zsh")
