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
        """Stop the loop and its thread, silently: what still runs on it is cancelled (a watch reading a
        stream ends its generator itself), then the generators left are closed (no "Task was destroyed
        but it is pending", no "aclose(): asynchronous generator is already running" at exit)."""
        if self.loop.is_closed():
            return
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(_wind_down(), self.loop).result(3.0)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self.loop.close()


async def _wind_down() -> None:
    """Cancel every other task of the running loop and wait (briefly) for them to end, then close the
    asynchronous generators left; what cannot close now is dropped without a word."""
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, _context: None)  # the loop is going: nothing left to report
    others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in others:
        task.cancel()
    if others:
        await asyncio.wait(others, timeout=1.0)
    await loop.shutdown_asyncgens()
