"""An asyncio event loop on a thread of its own, for a task's server and its calls.

The bootstrap's protocol is written as coroutines, so that one process can run one task
(a real job: this loop, beside the caller's thread) or thousands (the scale simulation:
one loop for all). Blocking callers hand coroutines to this loop and wait for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)

T = TypeVar("T")


class LoopThread:
    """An event loop running on a daemon thread until `close()`."""

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
        """Stop the loop and its thread: the calls' streams still open are closed first (no
        "Task was destroyed but it is pending" at exit); what else runs on it is abandoned."""
        if self.loop.is_closed():
            return
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(self.loop.shutdown_asyncgens(), self.loop).result(2.0)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self.loop.close()
