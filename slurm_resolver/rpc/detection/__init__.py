"""Failure detection: after the bootstrap, who died, who left, and who tells whom.

It owns the heartbeat's messages (`beats`), what both sides share (`deaths`), a leader's side of
Watch (`watch`, with `WatchHandler`, its server side), a task's side (`heartbeat`), one task's
failure detection put together (`detector`, which judges hangs on the progress marks the beats
carry, and hands a hang to diagnosis), and the crash hook (`crashes`: an uncaught exception as the
task's failure). It knows nothing of the rounds.
"""

from __future__ import annotations

__all__: list[str] = []
