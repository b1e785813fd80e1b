"""What a task of a training job says: one flushed line, prefixed with who says it."""

from __future__ import annotations

import sys
import time

from ..rpc.bootstrapped import Bootstrapped

__all__: list[str] = []  # internal: no public names (docs/reference.md)


class Reporter:
    """Prints ``[chief:0 rank 0 node1 +3.2s] message`` lines for one task."""

    def __init__(self, b: Bootstrapped) -> None:
        me = b.me
        self.prefix = f"[{me.job}:{me.index} rank {me.rank} {me.node}"
        self.start = time.monotonic()

    def __call__(self, message: str) -> None:
        print(f"{self.prefix} +{time.monotonic() - self.start:.1f}s] {message}", file=sys.stdout, flush=True)
