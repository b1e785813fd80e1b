"""The fallback: one process, no launcher; a cluster of one worker on this host."""

from __future__ import annotations

from collections.abc import Mapping

from .base import Launch, Launcher

__all__ = ["SingleProcess"]


class SingleProcess(Launcher):
    """A process started by hand: rank 0 of 1."""

    name = "single"
    description = "no launcher variables: one process on this host"

    @classmethod
    def detect(cls, env: Mapping[str, str]) -> bool:
        return True

    @classmethod
    def resolve(cls, env: Mapping[str, str]) -> Launch:
        return Launch(launcher=cls.name, world_size=1, rank=0, nodes=("localhost",), counts=(1,), node="localhost",
                      local_rank=0, standalone=True)
