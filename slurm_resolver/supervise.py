"""``slurm-resolver bootstrap -- COMMAND``: run a task's command while the job watches for deaths.

The command runs as a child of the bootstrapped task, which keeps its server and its
heartbeat. When another task of the step dies, the command is stopped (SIGTERM, then
SIGKILL) and the task exits 1 with an error naming the dead task: a collective then never
waits for a peer that is gone. When the command fails, the task reports itself dead with
its exit code, so that the others stop too, unless a peer's death comes within
`NOTICE` seconds (the command failed because of it: a broken collective); when it
succeeds, the task leaves normally.
Signals sent to the task (Slurm's warning before the time limit, Ctrl-C) go to the command.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence

from .errors import ConfigurationError, ResolutionError
from .rpc.bootstrapped import Bootstrapped

__all__: list[str] = []  # internal: no public names (docs/reference.md)

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
"""Signals the task passes on to its command."""


NOTICE = 2.0
"""Seconds a task whose command failed waits for news of a peer's death (a dead peer's closed
connection is known within about a second) before it reports the failure as its own."""


def _exit_status(code: int) -> str:
    return f"signal {-code}" if code < 0 else f"code {code}"


def supervise(b: Bootstrapped, command: Sequence[str], grace: float = 5.0) -> int:
    """Run ``command`` until it ends or a peer dies; returns the task's exit code."""
    dead: list[tuple[int, str]] = []
    died = threading.Event()

    def on_failure(rank: int, why: str) -> None:
        dead.append((rank, why))
        died.set()

    b.on_failure(on_failure)
    sys.stdout.flush()
    try:
        child = subprocess.Popen(list(command))
    except OSError as exc:
        b.fail(f"{b.me.job}:{b.me.index} (rank {b.rank}) on {b.me.node}: cannot run {command[0]!r}: {exc.strerror}")
        b.stop()
        raise ConfigurationError(f"cannot run {command[0]!r}: {exc.strerror}", "check the command and PATH") from None
    previous = {s: signal.signal(s, lambda number, frame: child.send_signal(number)) for s in FORWARDED}
    try:
        while child.poll() is None and not died.wait(0.1):
            pass
        if child.poll() is None:  # a peer died: stop this task's command
            child.terminate()
            try:
                child.wait(grace)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
            b.stop()
            raise ResolutionError(f"bootstrap: {dead[0][1]}; stopped this task's command ({command[0]})",
                                  "look at that task's output for why it ended; the whole step ends with it")
        code = child.returncode
        if code != 0 and died.wait(NOTICE):  # it failed because a peer died (a broken collective): say so
            b.stop()
            raise ResolutionError(f"bootstrap: {dead[0][1]}; then this task's command ({command[0]}) exited with "
                                  f"{_exit_status(code)}",
                                  "look at that task's output for why it ended; the whole step ends with it")
        if code != 0:
            b.fail(f"{b.me.job}:{b.me.index} (rank {b.rank}) on {b.me.node}: its command exited with "
                   f"{_exit_status(code)}")
            os._exit(128 - code if code < 0 else code)  # no normal leaving: the others must stop
        b.stop()
        return 0
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
