"""What a task sees of the processes of its own node: alive, stopped, or gone, read from the kernel.

A task and its node's leader share a kernel, so neither needs the other's messages to know it lives:
a process that dies closes its connections at once, and one that is stopped (SIGSTOP, a debugger)
says so in ``/proc/<pid>/stat``. A process that holds the GIL in a long C call is running, whatever its
Python does. A process is named by its pid and its start time (clock ticks after boot), so that a pid
used again by another process, or one of another pid namespace (a container of its own), is never
taken for it: then nothing is known (`Seen.UNKNOWN`), and its connection alone tells its death.
"""

from __future__ import annotations

import enum
import functools
import os
from typing import NamedTuple

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)


class Seen(enum.Enum):
    """What the kernel says of a process."""

    RUNNING = "running"
    """Running or waiting (in a system call, a C library, a sleep): alive."""
    STOPPED = "stopped"
    """Stopped by a signal or a debugger: it answers nothing until it is continued."""
    GONE = "gone"
    """Ended (or a zombie its parent has not reaped)."""
    UNKNOWN = "unknown"
    """Not to be seen from here (another pid namespace, no ``/proc``): its connection alone tells."""


class Process(NamedTuple):
    """A process of this node: its pid and its start time in clock ticks after boot (the pair is the process)."""

    pid: int
    started: int

    @classmethod
    @functools.cache
    def own(cls) -> Process:
        """This process."""
        found = _stat(os.getpid())
        return cls(os.getpid(), int(found[19]) if found is not None else 0)


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command's name (the state first); None where it is not there."""
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
    except OSError:
        return None
    try:
        text = os.read(fd, 1024)
    except OSError:
        return None
    finally:
        os.close(fd)
    return text[text.rfind(b")") + 2:].decode("ascii", "replace").split()


def seen(process: Process) -> Seen:
    """What the kernel says of ``process`` now (this process itself: running).

    >>> seen(Process.own())
    <Seen.RUNNING: 'running'>
    """
    if process.pid == os.getpid():
        return Seen.RUNNING
    found = _stat(process.pid)
    if found is None:
        return Seen.GONE if os.path.isdir("/proc/self") else Seen.UNKNOWN
    if len(found) < 20 or found[19] != str(process.started):
        return Seen.UNKNOWN  # another process of this pid (or this pid in another namespace)
    state = found[0]
    if state in ("T", "t"):
        return Seen.STOPPED
    if state in ("Z", "X", "x"):
        return Seen.GONE
    return Seen.RUNNING
