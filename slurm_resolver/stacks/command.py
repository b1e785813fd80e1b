"""A task's command seen from its task (``slurm-resolver bootstrap -- COMMAND``): its progress and stacks.

The task makes one small file for its command and names it in the command's environment
(`PROGRESS_FILE`); both map it. The command writes its progress mark there (`Marker.mark`: a store
into shared memory, no system call), and the first time, registers Python's faulthandler on
`DUMP_SIGNAL` with a file beside it and writes its pid and main thread there. The task reads the mark
at each heartbeat (`Watched.mark`) and, asked for stacks, signals the command and reads its dump
(`Watched.stacks`): a command whose thread holds the GIL in C code answers too. A command that never
marked is said to be so, never signalled (the signal's default would end it).
"""

from __future__ import annotations

import faulthandler
import mmap
import os
import signal
import struct
import threading
import time
from collections.abc import Mapping
from typing import BinaryIO

from .capture import Frame, ThreadStack
from .dumped import read_dump

__all__ = ["PROGRESS_FILE", "DUMP_SIGNAL", "DUMPS", "Marker", "Watched", "marker", "not_marked", "progress"]

PROGRESS_FILE = "SLURM_RESOLVER_PROGRESS_FILE"
"""The variable naming the file a task made for its command."""
DUMP_SIGNAL = signal.SIGRTMIN + 7
"""The signal a task sends its command for its stacks (a real-time one: no program expects it)."""

DUMPS = ".stacks"
"""The suffix of the file beside it that the command's faulthandler writes its stacks to."""
_LAYOUT = struct.Struct("=qQqQ")  # mark, marks written, pid registered, its main thread's ident
_MARK, _COUNT, _PID, _MAIN = 0, 8, 16, 24


class Marker:
    """The command's side: marks progress into its task's file."""

    def __init__(self, path: str) -> None:
        with open(path, "r+b") as file:
            self._map = mmap.mmap(file.fileno(), _LAYOUT.size)
        self.path = path
        self._dump: BinaryIO | None = None
        self._count = 0
        self.mark_value = 0

    def mark(self, step: int | None = None) -> None:
        """Progress: ``step`` (a number that grows), or the last mark plus one."""
        value = self.mark_value + 1 if step is None else int(step)
        if self._dump is None:
            self._register()
        self.mark_value = value
        self._count += 1
        struct.pack_into("=q", self._map, _MARK, value)
        struct.pack_into("=Q", self._map, _COUNT, self._count)

    def _register(self) -> None:
        self._dump = open(self.path + DUMPS, "ab", buffering=0)  # noqa: SIM115 (held for the process's life)
        faulthandler.register(DUMP_SIGNAL, file=self._dump, all_threads=True, chain=False)
        struct.pack_into("=qQ", self._map, _PID, os.getpid(), threading.main_thread().ident or 0)


_markers: dict[str, Marker] = {}


def progress(step: int | None = None) -> None:
    """Mark this process's progress for the task that runs it (``slurm-resolver bootstrap -- COMMAND``):
    ``step`` (a number that grows, such as the training step), else one more than the last mark. Cheap
    (a store into shared memory); nothing where no task runs this process. A process that bootstrapped
    itself marks with ``b.progress()``, which does this too."""
    from ..environment import snapshot

    found = marker(snapshot())
    if found is not None:
        found.mark(step)


def marker(env: Mapping[str, str]) -> Marker | None:
    """This process's marker where its task made it a file (``env``: the process's environment),
    else None."""
    path = env.get(PROGRESS_FILE)
    if not path:
        return None
    found = _markers.get(path)
    if found is None:
        found = _markers[path] = Marker(path)
    return found


class Watched:
    """The task's side: the file it makes for its command, the command's marks and stacks.

    Args:
        directory: where the file is made (the node's memory file system where there is one).
    """

    def __init__(self, directory: str | None = None) -> None:
        import tempfile  # here: with shutil, bz2, lzma and random, which a task without a command never needs

        where = directory or ("/dev/shm" if os.access("/dev/shm", os.W_OK) else None)
        handle, self.path = tempfile.mkstemp(prefix="slurm-resolver-progress-", dir=where)
        os.write(handle, bytes(_LAYOUT.size))
        self._map = mmap.mmap(handle, _LAYOUT.size)
        os.close(handle)
        self.dump_path = self.path + DUMPS
        open(self.dump_path, "wb").close()

    def environ(self) -> dict[str, str]:
        """What the command's environment gets."""
        return {PROGRESS_FILE: self.path}

    def mark(self) -> int | None:
        """The command's last mark, None before its first."""
        mark, count, _, _ = _LAYOUT.unpack_from(self._map)
        return mark if count else None

    def stacks(self, wait: float = 1.0) -> tuple[ThreadStack, ...] | None:
        """The command's stacks now, dumped by the command itself; None where it never marked
        (its stacks cannot be asked for) or is gone."""
        _, count, pid, main = _LAYOUT.unpack_from(self._map)
        if not count or not pid:
            return None
        try:
            start = os.path.getsize(self.dump_path)
            os.kill(pid, DUMP_SIGNAL)
        except OSError:
            return None
        text, size, deadline = b"", start, time.monotonic() + wait
        while time.monotonic() < deadline:
            time.sleep(0.02)
            now = os.path.getsize(self.dump_path)
            if now > start and now == size:
                break  # written, and nothing more for a moment
            size = now
        with open(self.dump_path, "rb") as file:
            file.seek(start)
            text = file.read(1 << 20)
        return read_dump(text.decode(errors="replace"), main) or None

    def close(self) -> None:
        """Remove the files."""
        self._map.close()
        for path in (self.path, self.dump_path):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass


def not_marked(pid: int | None) -> tuple[ThreadStack, ...]:
    """A stand-in class for a command whose stacks cannot be asked for."""
    what = f"its command (pid {pid})" if pid else "its command"
    return (ThreadStack("main", (Frame("<slurm-resolver>", 0, f"{what} never marked progress: "
                                                              "its stacks are not known"),)),)
