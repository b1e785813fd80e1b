"""A task's Python stacks, each thread's, as code paths: file, line and function, never a value.

Taken by whichever thread asks (the task's server thread, which answers while the main thread is
blocked in C: a long ``time.sleep``, a socket read, a collective that released the GIL); a thread
that holds the GIL in C code the whole time cannot be asked at all, and the task is then silent.
"""

from __future__ import annotations

import sys
import threading
from types import FrameType
from typing import NamedTuple

__all__ = ["Frame", "ThreadStack", "capture", "MOST_FRAMES", "OURS"]

MOST_FRAMES = 32
"""Frames kept of one thread's stack, the innermost (where it waits); deeper ones are counted."""
OURS = "slurm-resolver"
"""The prefix of the names of slurm_resolver's own threads (its event loop, its connection checks):
not the job's code, and left out."""
LIBRARIES = ("(_poll_wrapper)",)
"""The ends of the names of libraries' threads that run no Python of the job (grpc.aio's completion
queue poller, one in every task): left out with ours."""


class Frame(NamedTuple):
    """One frame of a stack: where the code is, not what it holds."""

    file: str
    line: int
    function: str

    def __str__(self) -> str:
        return f"{self.function} ({self.file}:{self.line})"


class ThreadStack(NamedTuple):
    """One thread's stack, outermost frame first; ``skipped``: outer frames left out (`MOST_FRAMES`)."""

    thread: str
    frames: tuple[Frame, ...]
    skipped: int = 0


def _frames(frame: FrameType | None, most: int) -> tuple[tuple[Frame, ...], int]:
    found: list[Frame] = []
    depth = 0
    while frame is not None:
        if len(found) < most:
            code = frame.f_code
            found.append(Frame(code.co_filename, frame.f_lineno or 0, getattr(code, "co_qualname", code.co_name)))
        depth += 1
        frame = frame.f_back
    found.reverse()
    return tuple(found), depth - len(found)


def capture(most: int = MOST_FRAMES, ours: bool = False) -> tuple[ThreadStack, ...]:
    """Every Python thread's stack of this process, the main thread first, then by name (the asking
    thread itself, and slurm_resolver's and gRPC's own threads unless ``ours``, left out)."""
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    main = threading.main_thread().ident
    me = threading.get_ident()
    stacks = []
    for ident, frame in sys._current_frames().items():
        name = names.get(ident, f"thread {ident}")
        if ident == me or (not ours and (name.startswith(OURS) or name.endswith(LIBRARIES))):
            continue
        frames, skipped = _frames(frame, most)
        stacks.append(ThreadStack("main" if ident == main else name, frames, skipped))
    return tuple(sorted(stacks, key=lambda s: (s.thread != "main", s.thread)))
