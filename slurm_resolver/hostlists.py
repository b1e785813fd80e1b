"""Slurm's compressed lists, expanded in-process: host lists and task counts.

Host lists are expanded with python-hostlist, in Slurm's order (never sorted). Task
counts use Slurm's compressed form (``4,1(x2)`` is ``4, 1, 1``). Errors name the
variable the text came from.
"""

from __future__ import annotations

import re

import hostlist as _hostlist

from .errors import EnvironmentVariableError

__all__ = ["expand", "collapse", "expand_counts", "collapse_counts"]

_COUNT = re.compile(r"^([0-9]{1,9})(?:\(x([0-9]{1,9})\))?$")
_MAX_HOSTS = 1_000_000
_RANGES = r"[0-9]+(?:-[0-9]+)?(?:,[0-9]+(?:-[0-9]+)?)*"
_ONE_BRACKET = re.compile(rf"([^,\[\]]*)\[({_RANGES})\]([^,\[\]]*)")


def _expand_one_bracket(text: str) -> list[str] | None:
    """``prefix[ranges]suffix``, the form of nearly every large job, expanded in C-level passes.

    Returns None for any other form (and for anything python-hostlist would refuse), which
    python-hostlist then expands: it stays the authority on the grammar, and a property
    test checks that both agree wherever this returns a list.
    """
    match = _ONE_BRACKET.fullmatch(text)
    if match is None:
        return None
    prefix, ranges, suffix = match.groups()
    hosts: list[str] = []
    for part in ranges.split(","):
        low, _, high = part.partition("-")
        if not high:
            hosts.append(prefix + low + suffix)
            continue
        first, last = int(low), int(high)
        if last < first or last - first > _hostlist.MAX_SIZE or len(hosts) + last - first >= _hostlist.MAX_SIZE:
            return None
        # One format of the whole range, split on commas (names hold none): C-level passes only.
        number = f"%0{len(low)}d" if len(low) > 1 and low[0] == "0" else "%d"  # zero-padded to the low bound
        name = prefix.replace("%", "%%") + number + suffix.replace("%", "%%") + ","
        hosts.extend((name * (last - first + 1) % tuple(range(first, last + 1)))[:-1].split(","))
    return hosts


def expand(text: str, variable: str = "hostlist") -> tuple[str, ...]:
    """Expand a Slurm host list, keeping Slurm's order.

    >>> expand("node[9-10],gpu[01-02]")
    ('node9', 'node10', 'gpu01', 'gpu02')
    >>> expand("r[1-2]n[01-02]")
    ('r1n01', 'r1n02', 'r2n01', 'r2n02')
    >>> expand("node[1-3]-ib")
    ('node1-ib', 'node2-ib', 'node3-ib')
    """
    if not text or not text.strip():
        raise EnvironmentVariableError(variable, text, "a host list such as node[1-4]")
    try:
        hosts = _expand_one_bracket(text.strip()) or _hostlist.expand_hostlist(text.strip(), allow_duplicates=True)
    except (_hostlist.BadHostlist, ValueError, TypeError, RecursionError, OverflowError) as exc:
        raise EnvironmentVariableError(
            variable, text, f"a host list such as node[1-4],gpu[01-02] ({exc})"
        ) from None
    if not hosts or len(hosts) > _MAX_HOSTS or "" in hosts:
        raise EnvironmentVariableError(variable, text, f"between 1 and {_MAX_HOSTS} host names")
    return tuple(hosts)


def collapse(hosts: list[str] | tuple[str, ...]) -> str:
    """Collapse host names into a host list (sorted, as ``scontrol show hostlist`` does).

    >>> collapse(["node10", "node9", "node11"])
    'node[9-11]'
    """
    return str(_hostlist.collect_hostlist(list(hosts)))


def expand_counts(text: str, variable: str = "SLURM_TASKS_PER_NODE") -> tuple[int, ...]:
    """Expand Slurm's compressed counts.

    >>> expand_counts("4,1(x2)")
    (4, 1, 1)
    """
    counts: list[int] = []
    for part in (text or "").split(","):
        match = _COUNT.match(part.strip())
        repeat = int(match.group(2) or 1) if match else 0
        if not match or repeat < 1 or repeat > _MAX_HOSTS or len(counts) + repeat > _MAX_HOSTS:
            raise EnvironmentVariableError(
                variable, text, "counts in Slurm's compressed form, such as 4,1(x2)"
            )
        counts.extend([int(match.group(1))] * repeat)
    return tuple(counts)


def collapse_counts(counts: list[int] | tuple[int, ...]) -> str:
    """Compress counts as Slurm does; the inverse of [`expand_counts()`][slurm_resolver.hostlists.expand_counts].

    >>> collapse_counts([4, 1, 1])
    '4,1(x2)'
    """
    parts: list[str] = []
    i = 0
    while i < len(counts):
        j = i
        while j + 1 < len(counts) and counts[j + 1] == counts[i]:
            j += 1
        run = j - i + 1
        parts.append(f"{counts[i]}(x{run})" if run > 1 else str(counts[i]))
        i = j + 1
    return ",".join(parts)
