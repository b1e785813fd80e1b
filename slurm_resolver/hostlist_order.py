"""The order of ``scontrol show hostlistsorted`` (Slurm 22.05), for ``collapse(names, sort=True)``.

Slurm's order is no order of names: hostlist.c groups the names into ranges as they are given
(``n9,n10`` is one range ``n[9-10]``), sorts the ranges with a comparison of prefixes (``strnatcmp``),
then of numbers where their zero-padding agrees and of widths where it does not, by glibc's merge
sort, then splits ranges that overlap and joins neighbours. Each step is reproduced here, one
function each, so that ``n09,n9`` is written ``n[9,09]`` and ``n9,n10,n08`` ``n[9-10,08]``, as
Slurm writes them (``tests/test_hostlists.py`` holds a table of Slurm's answers and asks the test
cluster's ``scontrol`` again). Internal: ``hostlists.collapse`` is the way in.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__: list[str] = []  # internal: hostlists.collapse(names, sort=True) is the way in

_HOST = re.compile(r"(.*?)([0-9]+)")
"""A host name as Slurm splits one: a prefix and its numeric suffix (``r1n`` and ``01``)."""
_C_SPACE = b" \t\n\v\f\r"
"""What C's ``isspace`` takes: ``strnatcmp`` skips it."""
_DIGITS = re.compile(rb"[0-9]+")


def _natcmp(left: str, right: str) -> int:
    """Slurm's ``strnatcmp`` (hostlist.c compares prefixes with it): digit runs compared as numbers, or digit by
    digit where either starts with ``0``; whitespace skipped; bytes as C's signed ``char``.

    >>> _natcmp("b2x", "b10x"), _natcmp("a01x", "a1x"), _natcmp("n", "n")
    (-1, -1, 0)
    """
    a, b = left.encode(errors="surrogateescape"), right.encode(errors="surrogateescape")
    i = j = 0
    while True:
        while i < len(a) and a[i] in _C_SPACE:
            i += 1
        while j < len(b) and b[j] in _C_SPACE:
            j += 1
        x, y = a[i] if i < len(a) else 0, b[j] if j < len(b) else 0
        if 48 <= x <= 57 and 48 <= y <= 57:
            p, q = _DIGITS.match(a, i).group(), _DIGITS.match(b, j).group()  # type: ignore[union-attr]
            if p != q:  # digit by digit where either starts with 0, else the longer run is the larger number
                lower = p < q if x == 48 or y == 48 else (len(p), p) < (len(q), q)
                return -1 if lower else 1
            i, j = i + len(p), j + len(q)
            continue
        if not x and not y:
            return 0
        x, y = x - 256 if x > 127 else x, y - 256 if y > 127 else y
        if x != y:
            return -1 if x < y else 1
        i, j = i + 1, j + 1


class _Range:
    """One of Slurm's ``hostrange_t``: ``prefix`` and the numbers ``low`` to ``high`` written ``width`` wide, or
    one name without a number (``single``); changed in place as Slurm changes its own."""

    __slots__ = ("prefix", "low", "high", "width", "single")

    def __init__(self, prefix: str, low: int, high: int, width: int, single: int = 0) -> None:
        self.prefix, self.low, self.high, self.width, self.single = prefix, low, high, width, single


def _padding(number: int, width: int) -> int:
    """The zeros Slurm writes before ``number`` at ``width``."""
    return max(width - len(str(number)), 0)


def _widths_agree(h: _Range, g: _Range) -> bool:
    """Slurm's ``_width_equiv`` of two ranges' low numbers: whether one width writes both as they were written
    (each keeps its zeros); where it does, the width of one is set to the other's, as Slurm does."""
    if h.width == g.width:
        return True
    keeps_h = _padding(h.low, h.width) == _padding(h.low, g.width)
    if not keeps_h and _padding(g.low, g.width) != _padding(g.low, h.width):
        return False
    if keeps_h:
        h.width = g.width
    else:
        g.width = h.width
    return True


def _prefix_cmp(h: _Range, g: _Range) -> int:
    """Slurm's order of two ranges' prefixes; a name without a number before the same prefix with one."""
    return _natcmp(h.prefix, g.prefix) or g.single - h.single


def _range_cmp(h: _Range, g: _Range) -> int:
    """Slurm's ``hostrange_cmp``: by prefix, then by low number where the widths agree, else by width. (Slurm
    takes the numbers' difference as a C ``int``: numbers 2**31 apart compare the wrong way there, and
    ``n0,n3000000000`` loses ``n0``; here they compare as numbers, so every name is read back.)"""
    order = _prefix_cmp(h, g)
    if order:
        return order
    if not _widths_agree(h, g):
        return h.width - g.width
    return (h.low > g.low) - (h.low < g.low)


def _merge_sort(ranges: list[_Range]) -> list[_Range]:
    """glibc's ``qsort`` (a top-down merge sort, the left half first on ties) with ``_range_cmp``: Slurm's
    comparison is no order of names (it depends on how the names were grouped), so the sort's own sequence
    of comparisons decides."""
    if len(ranges) <= 1:
        return ranges
    left, right = _merge_sort(ranges[:len(ranges) // 2]), _merge_sort(ranges[len(ranges) // 2:])
    merged: list[_Range] = []
    i = j = 0
    while i < len(left) and j < len(right):
        if _range_cmp(left[i], right[j]) <= 0:
            merged.append(left[i])
            i += 1
        else:
            merged.append(right[j])
            j += 1
    return merged + left[i:] + right[j:]


def _split_overlaps(ranges: list[_Range]) -> None:
    """Slurm's ``hostlist_coalesce``: two neighbours that overlap become the part of each outside the other and
    single hosts for the part in both; then the list is scanned again from the end."""
    i = len(ranges) - 1
    while i > 0:
        before, after = ranges[i - 1], ranges[i]
        if before.single or after.single or before.high <= after.low or _prefix_cmp(before, after) \
                or not _widths_agree(before, after):
            i -= 1
            continue
        low, high, j = after.low, min(before.high, after.high), i
        after.high = max(after.high, before.high)
        before.high, after.low = low, high
        if before.high < before.low:
            del ranges[i]
        for number in range(low, high + 1):
            for wanted in (number > before.high, number < after.low):
                if wanted:
                    ranges.insert(j, _Range(before.prefix, number, number, before.width))
                    j += 1
        i = len(ranges) - 1


def _join_neighbours(ranges: list[_Range]) -> None:
    """Slurm's ``hostlist_collapse``: from the end, a range that goes on where the one before stops joins it."""
    for i in range(len(ranges) - 1, 0, -1):
        before, after = ranges[i - 1], ranges[i]
        if before.high == after.low - 1 and not _prefix_cmp(before, after) and _widths_agree(before, after):
            before.high = after.high
            del ranges[i]


def slurm_sorted(hosts: Sequence[str]) -> list[tuple[str, int, int, int] | str]:
    """``hosts`` as ``scontrol show hostlistsorted`` orders them (Slurm 22.05's ``hostlist_sort``): the names
    grouped into ranges as given, the ranges sorted, overlaps split and neighbours joined."""
    ranges: list[_Range] = []
    for host in hosts:
        match = _HOST.fullmatch(host)
        new = _Range(match.group(1), int(match.group(2)), int(match.group(2)), len(match.group(2))) if match \
            else _Range(host, 0, 0, 0, single=1)
        tail = ranges[-1] if ranges else None
        if tail and tail.high == new.low - 1 and not _prefix_cmp(tail, new) and _widths_agree(tail, new):
            tail.high = new.high
        else:
            ranges.append(new)
    ranges = _merge_sort(ranges)
    _split_overlaps(ranges)
    _join_neighbours(ranges)
    return [r.prefix if r.single else (r.prefix, r.low, r.high, r.width) for r in ranges]
