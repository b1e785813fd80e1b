"""Slurm's compressed lists, expanded in-process: host lists and task counts.

Host lists are read as Slurm reads them (``scontrol show hostnames``): hosts are separated by
commas and by whitespace (space, tab, newline) outside brackets, and empty items are skipped;
inside brackets a bound may be preceded by whitespace, which Slurm counts in its width
(``1.2.3.[089, 100-110]`` is ``1.2.3.089``, then ``1.2.3.0100`` to ``1.2.3.0110``). The expansion
itself is python-hostlist's, in Slurm's order (never sorted). [`collapse()`][slurm_resolver.hostlists.collapse]
is its inverse, in the given order as ``scontrol show hostlist``, or sorted as ``scontrol show hostlistsorted``
(``hostlist_order``). Task counts use Slurm's compressed form (``4,1(x2)`` is ``4, 1, 1``). Errors name
the variable the text came from and quote the part at fault.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .errors import EnvironmentVariableError

__all__ = ["expand", "collapse", "expand_counts", "collapse_counts", "DistinctHosts"]

_COUNT = re.compile(r"^([0-9]{1,9})(?:\(x([0-9]{1,9})\))?$")
_MAX_HOSTS = 1_000_000
_MOST_IN_RANGE = 100_000
"""python-hostlist's ``MAX_SIZE``: the most names one range of the fast path makes (beyond, python-hostlist says)."""
_RANGES = r"[0-9]+(?:-[0-9]+)?(?:,[0-9]+(?:-[0-9]+)?)*"
_ONE_BRACKET = re.compile(rf"([^,\[\]]*)\[({_RANGES})\]([^,\[\]]*)")
_SPACE = " \t\n"
"""What separates hosts besides a comma: Slurm's hostlist parser splits on comma, space, tab and newline."""
_BOUND = re.compile(r"[ \t\n\v\f\r]*([0-9]+)")
"""A bound as Slurm's ``strtoul`` reads it: whitespace before the digits is skipped (and counted in the width)."""
_BRACKET = re.compile(r"\[([^\[\]]*)\]")
_HOST = re.compile(r"(.*?)([0-9]+)")
"""A host name as Slurm splits one: a prefix and its numeric suffix (``r1n`` and ``01``)."""


class DistinctHosts(tuple[str, ...]):
    """Names [`expand()`][slurm_resolver.hostlists.expand] made from one bracket of increasing numbers
    (``node[1-4096]``): no two alike, known without hashing them (a plain tuple where that is not known)."""

    __slots__ = ()


def _expand_one_bracket(text: str) -> tuple[list[str], bool] | None:
    """``prefix[ranges]suffix``, the form of nearly every large job, expanded in C-level passes, and whether
    its numbers increase (then no two names are alike).

    Returns None for any other form (and for anything python-hostlist would refuse), which
    python-hostlist then expands: it stays the authority on the grammar, and a property
    test checks that both agree wherever this returns a list.
    """
    match = _ONE_BRACKET.fullmatch(text)
    if match is None:
        return None
    prefix, ranges, suffix = match.groups()
    hosts: list[str] = []
    increasing, before = True, -1
    parts = ranges.split(",")
    for part in parts:
        low, _, high = part.partition("-")
        first = int(low)
        increasing, before = increasing and first > before, first
        if not high:
            hosts.append(prefix + low + suffix)
            continue
        last = before = int(high)
        if last < first or last - first > _MOST_IN_RANGE or len(hosts) + last - first >= _MOST_IN_RANGE:
            return None
        # One format of the whole range, split on commas (names hold none): C-level passes only.
        number = f"%0{len(low)}d" if len(low) > 1 and low[0] == "0" else "%d"  # zero-padded to the low bound
        name = prefix.replace("%", "%%") + number + suffix.replace("%", "%%") + ","
        names = (name * (last - first + 1) % tuple(range(first, last + 1))).split(",")
        names.pop()  # the empty word after the last comma
        if len(parts) == 1:
            return names, increasing
        hosts += names
    return hosts, increasing


def _words(text: str) -> list[str]:
    """``text`` split as Slurm splits a host list: at commas and whitespace outside brackets, empty items skipped.

    >>> _words("alpha beta\\tgamma"), _words("node3, node4"), _words("1.2.3.[089, 100-110] x")
    (['alpha', 'beta', 'gamma'], ['node3', 'node4'], ['1.2.3.[089, 100-110]', 'x'])
    """
    words: list[str] = []
    word: list[str] = []
    depth = 0
    for char in text:
        if depth == 0 and (char == "," or char in _SPACE):
            if word:
                words.append("".join(word))
                word = []
            continue
        depth = depth + 1 if char == "[" else max(depth - 1, 0) if char == "]" else depth
        word.append(char)
    if word:
        words.append("".join(word))
    return words


def _range(part: str, word: str, text: str, variable: str) -> str:
    """One bound or range of a bracket as Slurm reads it, written without whitespace: the width is the low
    bound's length, whitespace included, and whitespace may come before a bound, or after the low one.

    >>> _range(" 100-110", "n[ 100-110]", "", ""), _range("1 - 3", "n[1 - 3]", "", "")
    ('0100-0110', '01-03')
    """
    low, dash, high = part.partition("-")
    first = _BOUND.match(low)
    last = _BOUND.fullmatch(high) if dash else first
    if first is None or last is None or low[first.end():].strip(_SPACE if dash else ""):
        raise EnvironmentVariableError(
            variable, text, f"a host list such as node[1-4]: Slurm reads no bound or range in {part!r} of {word!r} "
            "(whitespace may only come before a number)")
    width = len(low)
    lowest = f"{int(first.group(1)):0{width}d}"
    return f"{lowest}-{int(last.group(1)):0{width}d}" if dash else lowest


def _as_slurm_reads(text: str, variable: str) -> str:
    """``text``, a host list with whitespace in it, written as the comma-separated list Slurm reads in it."""
    def bracket(match: re.Match[str]) -> str:
        inner = match.group(1)
        if not any(char in inner for char in _SPACE):
            return match.group(0)
        return "[" + ",".join(_range(part, match.string, text, variable) for part in inner.split(",")) + "]"

    return ",".join(_BRACKET.sub(bracket, word) for word in _words(text))


def expand(text: str, variable: str = "hostlist") -> tuple[str, ...]:
    """Expand a Slurm host list, keeping Slurm's order; whitespace separates hosts as a comma does.

    >>> expand("node[9-10],gpu[01-02]")
    ('node9', 'node10', 'gpu01', 'gpu02')
    >>> expand("r[1-2]n[01-02]")
    ('r1n01', 'r1n02', 'r2n01', 'r2n02')
    >>> expand("node[1-3]-ib")
    ('node1-ib', 'node2-ib', 'node3-ib')
    >>> expand("alpha beta, gamma")
    ('alpha', 'beta', 'gamma')
    """
    if not text or not text.strip():
        raise EnvironmentVariableError(variable, text, "a host list such as node[1-4]")
    given = text.strip()
    if any(char in given for char in _SPACE):
        given = _as_slurm_reads(given, variable)
    fast = _expand_one_bracket(given)  # one name or more, none empty
    if fast is not None:
        hosts, distinct = fast
    else:
        import hostlist as _hostlist  # here: the fast path takes nearly every job's list

        try:
            hosts, distinct = _hostlist.expand_hostlist(given, allow_duplicates=True), False
        except (_hostlist.BadHostlist, ValueError, TypeError, RecursionError, OverflowError) as exc:
            raise EnvironmentVariableError(
                variable, text, f"a host list such as node[1-4],gpu[01-02] ({exc})"
            ) from None
    if not hosts or len(hosts) > _MAX_HOSTS or (fast is None and "" in hosts):
        raise EnvironmentVariableError(variable, text, f"between 1 and {_MAX_HOSTS} host names")
    return DistinctHosts(hosts) if distinct else tuple(hosts)


def _runs(hosts: Sequence[str]) -> list[tuple[str, int, int, int] | str]:
    """``hosts`` as runs ``(prefix, low, high, width)`` of consecutive numbers written alike, each host without
    a numeric suffix a run of its own (its name)."""
    runs: list[tuple[str, int, int, int] | str] = []
    for host in hosts:
        match = _HOST.fullmatch(host)
        if match is None:
            runs.append(host)
            continue
        prefix, digits = match.groups()
        number = int(digits)
        last = runs[-1] if runs else None
        if isinstance(last, tuple) and last[0] == prefix and number == last[2] + 1 \
                and f"{number:0{last[3]}d}" == digits:
            runs[-1] = (prefix, last[1], number, last[3])
        else:
            runs.append((prefix, number, number, len(digits)))
    return runs


def collapse(hosts: Sequence[str], sort: bool = False) -> str:
    """Collapse host names into a host list in their order, as ``scontrol show hostlist`` does: the inverse of
    [`expand()`][slurm_resolver.hostlists.expand] (duplicates kept). ``sort``: in the order of ``scontrol show
    hostlistsorted`` (Slurm 22.05), which sorts the ranges the names make as given, so a number written with
    zeros comes after the plain numbers of fewer digits (``n[9,09]``, ``n[10,009]``).

    >>> collapse(["node10", "node9", "node11"]), collapse(["node10", "node9", "node11"], sort=True)
    ('node[10,9,11]', 'node[9-11]')
    >>> collapse(["b1", "a1", "a2", "b2"]), collapse(["gpu08", "gpu09", "gpu10"])
    ('b1,a[1-2],b2', 'gpu[08-10]')
    >>> collapse(["n09", "n9"], sort=True), collapse(["n009", "n10"], sort=True)
    ('n[9,09]', 'n[10,009]')
    """
    if sort:
        from .hostlist_order import slurm_sorted  # here: a task never sorts

    groups: list[tuple[str, list[str]]] = []  # consecutive runs of one prefix share a bracket
    for run in slurm_sorted(hosts) if sort else _runs(hosts):
        if isinstance(run, str):
            groups.append((run, []))
            continue
        prefix, low, high, width = run
        text = f"{low:0{width}d}" + (f"-{high:0{width}d}" if high > low else "")
        if groups and groups[-1][1] and groups[-1][0] == prefix:
            groups[-1][1].append(text)
        else:
            groups.append((prefix, [text]))
    return ",".join(prefix if not parts else f"{prefix}{parts[0]}" if len(parts) == 1 and "-" not in parts[0]
                    else f"{prefix}[{','.join(parts)}]" for prefix, parts in groups)


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
