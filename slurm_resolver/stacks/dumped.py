"""Stacks as Python's faulthandler writes them, read back as `ThreadStack`s.

faulthandler dumps every thread's stack from a signal handler in C, so that a process whose thread
holds the GIL in C code (a regular expression, an extension's loop) still says where it is: the way
a task reads the stacks of its command (`slurm_resolver.stacks.command`). The text::

    Thread 0x00007f913fb8a6c0 (most recent call first):
      File "/tmp/job.py", line 5 in worker
      ...

    Current thread 0x00007f91409ccb80 (most recent call first):
      File "/usr/lib/python3.11/re/__init__.py", line 166 in match

Frames come innermost first, at most 100 a thread (then ``...``); a thread with none says
``<no Python frame>``. What cannot be read is left out, never guessed.
"""

from __future__ import annotations

import re

from .capture import MOST_FRAMES, Frame, ThreadStack

__all__ = ["read_dump"]

_THREAD = r"^(?:Current thread|Thread) (0x[0-9a-f]+) \(most recent call first\):$"  # compiled where a dump is read
_FRAME = r'^  File "(.*)", line (\d+) in (.+)$'


def read_dump(text: str, main: int | None = None, most: int = MOST_FRAMES) -> tuple[ThreadStack, ...]:
    """The threads of one dump, the main thread first (``main``: its ident, where known; the thread
    the dump calls current otherwise), each outermost frame first and at most ``most`` of them.

    >>> read_dump('Current thread 0x0a (most recent call first):\\n  File "a.py", line 3 in f\\n'
    ...           '  File "a.py", line 9 in <module>\\n')[0].frames
    (Frame(file='a.py', line=9, function='<module>'), Frame(file='a.py', line=3, function='f'))
    """
    threads: list[tuple[int, bool, list[Frame], int]] = []
    for line in text.splitlines():
        head = re.match(_THREAD, line)
        if head is not None:
            threads.append((int(head.group(1), 16), line.startswith("Current"), [], 0))
            continue
        frame = re.match(_FRAME, line)
        if frame is not None and threads:
            threads[-1][2].append(Frame(frame.group(1), int(frame.group(2)), frame.group(3)))
        elif line.strip() == "..." and threads:  # deeper than faulthandler writes
            ident, current, frames, _ = threads[-1]
            threads[-1] = (ident, current, frames, 1)
    if main is None or all(ident != main for ident, *_ in threads):
        main = next((ident for ident, current, *_ in threads if current), None)
    stacks = []
    for ident, _, frames, deeper in threads:
        inner_first = frames[:most]
        skipped = len(frames) - len(inner_first) + deeper
        name = "main" if ident == main else f"thread {ident:#x}"
        stacks.append(ThreadStack(name, tuple(reversed(inner_first)), skipped))
    return tuple(sorted(stacks, key=lambda s: s.thread != "main"))
