"""An asyncio event loop on a thread of its own, for a task's server and its calls.

The bootstrap's protocol is written as coroutines, so that one process can run one task
(a real job: this loop, beside the caller's thread) or thousands (the scale simulation:
one loop for all). Blocking callers hand coroutines to this loop and wait for them.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["LoopThread"]

T = TypeVar("T")


class LoopThread:
    """An event loop running on a daemon thread until :meth:`close`."""

    def __init__(self, name: str = "slurm-resolver") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the loop and return its result (or raise its exception)."""
        if threading.current_thread() is self._thread:
            raise RuntimeError("LoopThread.run() called from its own loop: await the coroutine instead")
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def close(self) -> None:
        """Stop the loop and its thread (what runs on it is abandoned)."""
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self.loop.close()
