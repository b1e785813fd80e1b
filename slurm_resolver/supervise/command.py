"""The command a task supervises: started in a session and process group of its own, its standard error passed
through (its last lines kept, to name its error), its end (a code, a signal, the kernel's OOM killer), why it
could not start, and rendezvous ports of its own."""

from __future__ import annotations

import errno
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence

from ..errors import ConfigurationError
from ..faults import Cause, Fault

__all__: list[str] = []  # internal: no public names (docs/reference.md)

_TAIL = 4096
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b(:.*)?$")


def _exit_status(code: int) -> str:
    if code >= 0:
        return f"code {code}"
    try:
        return f"signal {-code} ({signal.Signals(-code).name})"
    except ValueError:
        return f"signal {-code}"


def last_error(text: str, limit: int = 300) -> str:
    """The line of a command's standard error that names its error: a Python exception's
    last line where there is one, else the last line.

    >>> last_error("Traceback (most recent call last):\\n  File 'x'\\nValueError: a bad batch\\nE1123 grpc: bye\\n")
    'ValueError: a bad batch'
    >>> last_error("train.sh: line 3: no-such: command not found\\n\\n")
    'train.sh: line 3: no-such: command not found'
    """
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    named = [line for line in lines if _EXCEPTION.match(line)]
    found = (named or lines or [""])[-1]
    return found if len(found) <= limit else found[: limit - 3] + "..."


def ended_as(code: int, error: str = "", oom: bool = False) -> Fault:
    """How a command that ended with ``code`` (minus a signal) failed: `Cause.EXITED` with that status, and the
    reason the task gives (of no task yet: `Fault.of`).

    >>> ended_as(1, "ValueError: a bad batch").words
    'exited with code 1: ValueError: a bad batch'
    >>> fault = ended_as(-9, oom=True); fault.killed, fault.words
    (True, "exited with signal 9 (SIGKILL), by the kernel's OOM killer")
    """
    reason = f"exited with {_exit_status(code)}" + (f": {error}" if error else "")
    return Fault(Cause.EXITED, reason + (", by the kernel's OOM killer" if oom else ""), code, oom=oom)


def command_rendezvous_ports(key: str) -> str:
    """Rendezvous ports for a command that bootstraps itself inside launch ``key``, apart from the task's.

    >>> from slurm_resolver.rpc.network.ports import rendezvous_ports
    >>> set(map(int, command_rendezvous_ports("12.0").split(","))) & set(rendezvous_ports("12.0"))
    set()
    """
    from ..rpc.network.ports import rendezvous_ports

    taken = set(rendezvous_ports(key))
    return ",".join(str(p) for p in rendezvous_ports(f"{key}/command", 24) if p not in taken)


def _counter(path: str, name: str) -> int | None:
    """The value of ``name`` in a kernel file of ``name value`` lines; None where unknown."""
    try:
        with open(path, encoding="ascii") as f:
            return next((int(line.split()[1]) for line in f if line.startswith(f"{name} ")), None)
    except (OSError, ValueError, IndexError):
        return None


def oom_kills(proc: str = "/proc", cgroups: str = "/sys/fs/cgroup") -> int | None:
    """OOM kills that may have ended this process's command: those of its own cgroup (cgroup v2's
    ``memory.events``, where Slurm's task/cgroup limits a job's memory), else the node's count
    (``oom_kill`` of /proc/vmstat, which another job's kill also raises); None where unknown."""
    try:
        with open(f"{proc}/self/cgroup", encoding="utf-8") as f:
            path = next((line.strip()[3:] for line in f if line.startswith("0::")), None)
    except OSError:
        path = None
    own = None if path is None else _counter(f"{cgroups}{path.rstrip('/')}/memory.events", "oom_kill")
    return own if own is not None else _counter(f"{proc}/vmstat", "oom_kill")


def cannot_run(command: Sequence[str], exc: OSError, env: Mapping[str, str]) -> ConfigurationError:
    """Why ``command`` could not start with environment ``env``, and the fix: where the kernel
    refuses the arguments and environment as too large (E2BIG), the one string past its limit on a
    single string (a TF_CONFIG that lists thousands of tasks), or their total."""
    if exc.errno != errno.E2BIG:
        return ConfigurationError(f"cannot run {command[0]!r}: {exc.strerror}", "check the command and PATH")
    one = 32 * os.sysconf("SC_PAGE_SIZE")  # Linux's MAX_ARG_STRLEN: one argument or NAME=value
    strings = [(f"variable {n}", len(n) + len(v) + 2) for n, v in env.items()] + \
        [(f"argument {i}", len(a) + 1) for i, a in enumerate(command)]
    what, size = max(strings, key=lambda item: item[1])
    if size > one:
        hint = ("TF_CONFIG lists every task: with this many tasks, build TensorFlow's resolver in the program "
                "(resolver.to_tensorflow(), or slurm_resolver.adapters.tensorflow_resolver(b)) instead of "
                "--format tf") if what == "variable TF_CONFIG" else f"shorten {what} (or unset it)"
        return ConfigurationError(f"cannot run {command[0]!r}: {what} holds {size:,} bytes, more than the kernel "
                                  f"takes in one string ({one:,})", hint)
    total = sum(size for _, size in strings)
    return ConfigurationError(f"cannot run {command[0]!r}: its arguments and environment ({total:,} bytes) are more "
                              f"than the kernel takes ({os.sysconf('SC_ARG_MAX'):,}; a quarter of the stack limit)",
                              "unset large variables before the command, or raise the stack limit (ulimit -s)")


class Child:
    """The command in a session and process group of its own: its end (a thread waits for it, then
    sets ``news``), and the tail of its standard error (copied through to the task's)."""

    def __init__(self, command: Sequence[str], news: threading.Event, env: Mapping[str, str]) -> None:
        self.process = subprocess.Popen(list(command), start_new_session=True, stderr=subprocess.PIPE, env=env)
        self.exited = threading.Event()
        self.code = 0
        self.at = 0.0
        self._news = news
        self._tail = b""
        threading.Thread(target=self._reap, name="command", daemon=True).start()
        self._reader = threading.Thread(target=self._copy_stderr, name="command-stderr", daemon=True)
        self._reader.start()

    def _reap(self) -> None:
        self.code = self.process.wait()
        self.at = time.time()
        self.exited.set()
        self._news.set()

    def _copy_stderr(self) -> None:
        assert self.process.stderr is not None
        source = self.process.stderr.fileno()
        while chunk := os.read(source, 65536):
            self._tail = (self._tail + chunk)[-_TAIL:]
            try:
                while chunk:
                    chunk = chunk[os.write(2, chunk):]
            except OSError:  # the task's own stderr is gone: keep draining, so the command never blocks
                pass

    def signal(self, number: int) -> None:
        """Send ``number`` to the command's process group (nothing where it is gone)."""
        try:
            os.killpg(self.process.pid, number)
        except (ProcessLookupError, PermissionError):
            pass

    def stop(self, grace: float) -> None:
        """SIGTERM to the group, SIGKILL to what is left of it once the command ended or after ``grace``."""
        self.signal(signal.SIGTERM)
        self.exited.wait(grace)
        self.signal(signal.SIGKILL)
        self.exited.wait()

    def error(self) -> str:
        """The line of its standard error that names its error (see `last_error()`)."""
        self._reader.join(0.5)  # the last bytes it wrote before it ended
        return last_error(self._tail.decode(errors="replace"))
