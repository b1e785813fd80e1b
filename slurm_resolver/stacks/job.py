"""A job's stacks as a user holds them: the merged classes, and where each rank runs."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ..values import Value, fill
from .classes import Ranks, StackClass, Stacks

__all__ = ["JobStacks"]


class JobStacks(Value):
    """Every task's stacks at one moment, merged (``print()`` shows the tree of call paths, the rarest
    first; `svg()` draws it).

    Attributes:
        stacks: the classes of identical stacks with their ranks, and the tasks that did not answer.
        nodes: the node of each rank named (those of the rare classes, at least).
        title: what the stacks are of (the job, or a step).
    """

    __slots__ = ("stacks", "nodes", "title")

    stacks: Stacks
    nodes: Mapping[int, str]
    title: str

    def __init__(self, stacks: Stacks, nodes: Mapping[int, str] | None = None, title: str = "the job") -> None:
        fill(self, stacks, {} if nodes is None else nodes, title)

    def where(self, rank: int) -> str:
        """The node of ``rank``, as far as known."""
        return self.nodes.get(rank, "?")

    @property
    def classes(self) -> tuple[StackClass, ...]:
        """The distinct stacks, rarest first."""
        return self.stacks.classes

    @property
    def silent(self) -> Ranks:
        """The tasks that did not answer."""
        return self.stacks.silent

    def odd(self) -> list[StackClass]:
        """The classes of the main thread held by fewer tasks than the commonest one (the news)."""
        main = [c for c in self.stacks.classes if c.main]
        if len(main) < 2:
            return []
        most = max(len(c.ranks) for c in main)
        return [c for c in main if len(c.ranks) < most]

    def svg(self) -> str:
        """The tree drawn as SVG."""
        from .picture import svg  # drawn where asked: not in every task's start

        return svg(self.stacks, self.where, self.title)

    def __str__(self) -> str:
        from .render import render  # written where asked: not in every task's start

        return render(self.stacks, self.where, self.title)


def nodes_of(stacks: Stacks, node_of: Callable[[int], str], most: int = 8) -> dict[int, str]:
    """The node of every rank a user reads alone: those of classes of at most ``most`` ranks, and the
    silent ones (at most ``most`` of each)."""
    ranks = [r for c in stacks.classes if len(c.ranks) <= most for r in c.ranks]
    ranks += list(stacks.silent)[:most]
    return {rank: node_of(rank) for rank in ranks}
