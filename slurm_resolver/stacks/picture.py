"""The stacks of a job drawn (SVG): the tree of call paths as boxes, each edge labelled with the
number of tasks that take it, the branches off the commonest path coloured (the odd ones out)."""

from __future__ import annotations

from collections.abc import Callable

from .classes import Stacks
from .render import Node, ranks_label, tree

__all__ = ["svg"]

_ROW, _INDENT, _CHAR = 30, 28, 7.2  # pixels: a box's row, a level's indent, a character's width
_COMMON, _ODD, _SILENT = "#d8e2ef", "#f6c48e", "#f2a0a0"


def _rows(node: Node, depth: int, common: bool, out: list[tuple[Node, int, bool]]) -> None:
    branches = node.branches()
    most = max(branches, key=lambda n: len(n.ranks), default=None)
    for child in reversed(branches):  # the commonest path first, the rarest at the bottom
        keep = common and child is most
        out.append((child, depth, keep))
        _rows(child, depth + 1, keep, out)


def svg(stacks: Stacks, where: Callable[[int], str] | None = None, title: str = "the job") -> str:
    """An SVG picture of the main threads' tree of call paths of ``stacks``."""
    from xml.sax.saxutils import escape  # here: it loads urllib, http and email, which a task's start never needs

    rows: list[tuple[Node, int, bool]] = []
    _rows(tree([c for c in stacks.classes if c.main]), 0, True, rows)
    lines = [f"{title}: {stacks.tasks:,} tasks, main threads"]
    if len(stacks.silent):
        lines.append(f"did not answer: {ranks_label(stacks.silent, where)}")
    top = 20 + 18 * len(lines)
    width = 40 + max([len(x) * _CHAR for x in lines] +
                     [depth * _INDENT + (len(str(n.frame)) + len(ranks_label(n.ranks, where)) + 6) * _CHAR
                      for n, depth, _ in rows])
    height = top + _ROW * len(rows) + 20
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height}" '
           f'font-family="monospace" font-size="12">', '<rect width="100%" height="100%" fill="white"/>']
    out += [f'<text x="10" y="{20 + 18 * i}" fill="{"#a00" if i else "#000"}">{escape(line)}</text>'
            for i, line in enumerate(lines)]
    position: dict[int, tuple[float, float]] = {}
    parents: list[tuple[int, int]] = []  # (depth, row) of the nearest box of each depth above
    for row, (node, depth, common) in enumerate(rows):
        x, y = 10 + depth * _INDENT, top + row * _ROW
        text = f"{node.frame}"
        label = ranks_label(node.ranks, where)
        box = (len(text) + 2) * _CHAR
        while parents and parents[-1][0] >= depth:
            parents.pop()
        if parents:
            px, py = position[parents[-1][1]]
            out.append(f'<path d="M{px + 8},{py + 22} V{y + 11} H{x}" fill="none" stroke="#666"/>')
            out.append(f'<text x="{px + 12}" y="{y + 8}" fill="#555" font-size="10">{len(node.ranks):,}</text>')
        fill = _COMMON if common else _ODD
        out.append(f'<rect x="{x}" y="{y}" width="{box:.0f}" height="22" rx="4" fill="{fill}" stroke="#446"/>')
        out.append(f'<text x="{x + _CHAR}" y="{y + 15}">{escape(text)}</text>')
        out.append(f'<text x="{x + box + 8:.0f}" y="{y + 15}" fill="{"#333" if common else "#a40"}">'
                   f'{escape(label)}</text>')
        position[row] = (x, y)
        parents.append((depth, row))
    out.append("</svg>")
    return "\n".join(out) + "\n"
