"""The stacks of a job as text: a tree of call paths, each branch with its ranks, the rarest first.

Identical outer frames are shown once; where the ranks of a path split, each branch says which
ranks take it (``ranks 0-1022,1024-4095 (4,095 tasks)``, ``rank 1023 (node256)``), the branch
with the fewest ranks first: the odd ones out are the news. Tasks that did not answer come first.
"""

from __future__ import annotations

from collections.abc import Callable

from .capture import Frame
from .classes import Ranks, StackClass, Stacks

__all__ = ["Node", "tree", "render", "ranks_label"]


def ranks_label(ranks: Ranks, where: Callable[[int], str] | None = None) -> str:
    """``rank 1023 (node256)`` or ``ranks 0-1022,1024-4095 (4,095 tasks)``.

    >>> ranks_label(Ranks.of([7]), lambda rank: "node2"), ranks_label(Ranks.of(range(4096)))
    ('rank 7 (node2)', 'ranks 0-4095 (4,096 tasks)')
    """
    if len(ranks) == 1:
        rank = ranks.first
        return f"rank {rank}" + (f" ({where(rank)})" if where is not None else "")
    return f"ranks {ranks} ({len(ranks):,} tasks)"


class Node:
    """One frame of the tree of call paths, the ranks whose stack passes through it, and what follows (built
    in place by `add`: a plain class, made at no cost at import)."""

    __slots__ = ("frame", "ranks", "children", "ends")
    frame: Frame | None
    ranks: Ranks
    children: dict[Frame, Node]
    ends: list[StackClass]
    """The classes whose innermost frame this is (where their thread waits)."""

    def __init__(self, frame: Frame | None) -> None:
        self.frame, self.ranks, self.children, self.ends = frame, Ranks(), {}, []

    def add(self, stack: StackClass) -> None:
        """Add ``stack``'s path below this node."""
        node = self
        node.ranks = node.ranks | stack.ranks
        for frame in stack.frames:
            node = node.children.setdefault(frame, Node(frame))
            node.ranks = node.ranks | stack.ranks
        node.ends.append(stack)

    def branches(self) -> list[Node]:
        """The children, the fewest ranks first."""
        return sorted(self.children.values(), key=lambda n: (len(n.ranks), n.ranks.first))


def tree(classes: list[StackClass]) -> Node:
    """The tree of call paths of ``classes``."""
    root = Node(None)
    for stack in classes:
        root.add(stack)
    return root


def _lines(node: Node, prefix: str, where: Callable[[int], str] | None, parent: Ranks | None,
           out: list[str]) -> None:
    branches = node.branches()
    for index, child in enumerate(branches):
        last = index == len(branches) - 1
        split = parent is None or len(branches) > 1 or len(child.ranks) != len(parent)
        assert child.frame is not None
        label = f"{child.frame}" + (f"    {ranks_label(child.ranks, where)}" if split else "")
        out.append(f"{prefix}{'└─ ' if last else '├─ '}{label}")
        _lines(child, prefix + ("   " if last else "│  "), where, child.ranks, out)


def render(stacks: Stacks, where: Callable[[int], str] | None = None, title: str = "the job") -> str:
    """The tree of call paths of ``stacks`` as lines of text (``where``: a rank's node, for lone ranks)."""
    main = [c for c in stacks.classes if c.main]
    threads = [c for c in stacks.classes if not c.main]
    distinct = len({c.key for c in main})
    out = [f"stacks of {title}: {stacks.tasks:,} tasks, {stacks.answered:,} answered; "
           f"{distinct} distinct stack{'s' * (distinct != 1)} of the main thread"]
    if len(stacks.silent):
        out.append(f"did not answer (gone, or holding the GIL in C code): {ranks_label(stacks.silent, where)}")
    for name, group in (("main thread", main), ("other threads", threads)):
        if group:
            out.append(f"{name}:")
            _lines(tree(group), "", where, None, out)
    if len(stacks.others):
        out.append(f"and more distinct stacks of the main thread, left out: {ranks_label(stacks.others, where)}")
    if stacks.dropped:
        out.append(f"and {stacks.dropped:,} more distinct stacks of other threads, left out")
    return "\n".join(out)
