"""Pure parsers for single launcher values; errors name the variable, its value and the fix."""

from __future__ import annotations

from collections.abc import Mapping

from .errors import EnvironmentVariableError

__all__: list[str] = []  # internal: no public names (docs/reference.md)


def require(env: Mapping[str, str], name: str, hint: str | None = None) -> str:
    """The value of ``name``; a missing variable is an error that names it."""
    value = env.get(name)
    if value is None:
        raise EnvironmentVariableError(name, None, "a value set by the launcher", hint)
    return value


def read_int(env: Mapping[str, str], name: str, minimum: int = 0, hint: str | None = None) -> int:
    """``name`` as an integer no smaller than ``minimum``.

    >>> read_int({"SLURM_PROCID": "3"}, "SLURM_PROCID")
    3
    """
    value = require(env, name, hint)
    text = value.strip()
    if not (text.isascii() and text.isdigit()) or len(text) > 12 or int(text) < minimum:
        raise EnvironmentVariableError(name, value, f"a whole number >= {minimum}", hint)
    return int(text)


def optional_int(env: Mapping[str, str], name: str, minimum: int = 0) -> int | None:
    """``name`` as an integer, or None when it is not set."""
    return None if env.get(name) is None else read_int(env, name, minimum)


def parse_jobs(text: str, variable: str = "--jobs") -> dict[str, int] | list[str]:
    """Parse ``ps=1,worker=3`` into counts, or ``ps,worker`` into one job per het component.

    >>> parse_jobs("ps=1,worker=3")
    {'ps': 1, 'worker': 3}
    >>> parse_jobs("ps,worker")
    ['ps', 'worker']
    """
    parts = [p.strip() for p in text.split(",") if p.strip()]
    expected = "name=count pairs such as ps=1,worker=3, or names per het component such as ps,worker"
    if not parts:
        raise EnvironmentVariableError(variable, text, expected)
    if all("=" not in p for p in parts):
        return parts
    jobs: dict[str, int] = {}
    for part in parts:
        name, _, count = part.partition("=")
        if not name.strip() or not (count.strip().isascii() and count.strip().isdigit()) or name.strip() in jobs:
            raise EnvironmentVariableError(variable, text, expected)
        jobs[name.strip()] = int(count)
    return jobs
