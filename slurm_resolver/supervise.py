"""``slurm-resolver bootstrap -- COMMAND``: run a task's command while the job watches for deaths.

The command runs as a child of the bootstrapped task, in a session and process group of
its own; the task keeps its server and its heartbeat. When another task of the step dies,
the command's whole group is stopped (SIGTERM, then SIGKILL once the command has ended or
after the grace), so that no child of a shell script is left running, and the task exits
1 with an error naming the dead task: a collective then never waits for a peer that is
gone. When the command fails, the task reports itself dead with its exit code, so that the
others stop too, unless a peer's death comes within `NOTICE` seconds (the command
failed because of it: a broken collective; a command killed with SIGKILL is reported at
once); when it succeeds, the task leaves normally.
Signals sent to the task (Slurm's warning before the time limit, Ctrl-C) go to the
command's group. Nothing polls: a thread waits for the command and the failure detection
calls back, and either sets the one event the task waits on.

The command's standard error passes through the task, which keeps its last lines to name
an error. A peer's death is said once for the job, by the lowest rank each task knows alive
(the others end without a word: their error's `Speaker` is ``ABOVE``). Under
``slurm-resolver run`` (``SLURM_RESOLVER_OUTCOMES`` set) the task records what its command
came to (`slurm_resolver.outcome`) and says nothing of it (``run`` says it once for the job),
and rank 0 records when the attempt was bootstrapped (and its step id) and says how long after
the previous attempt's failure. A command that bootstraps itself (``slurm_resolver.bootstrap()``
in it) gets rendezvous ports of its own (``SLURM_RESOLVER_RENDEZVOUS_PORTS``, where it is not
set), away from this task's.
"""

from __future__ import annotations

import errno
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from .cluster import Cluster
from .environment import for_child, snapshot
from .errors import ConfigurationError, ResolutionError, Speaker, UnansweredError
from .outcome import Death, Ending, Outcome, Recording, mark_bootstrapped, mark_step, write
from .rpc.bootstrapped import Bootstrapped

__all__: list[str] = []  # internal: no public names (docs/reference.md)

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
"""Signals the task passes on to its command's process group."""

NOTICE = 2.0
"""Seconds a task whose command failed waits for news of a peer's death (a dead peer's closed
connection is known within about a second) before it reports the failure as its own."""

_TAIL = 4096
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b(:.*)?$")
_HINT = "look at that task's output for why it ended; the whole step ends with it"


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


def ended_as(code: int, error: str = "", oom: bool = False) -> tuple[Ending, str]:
    """How a command that ended with ``code`` (minus a signal) ended, and the reason the task gives.

    >>> ended_as(1, "ValueError: a bad batch")
    (<Ending.FAILED: 'failed'>, 'exited with code 1: ValueError: a bad batch')
    >>> ended_as(-9, oom=True)
    (<Ending.KILLED: 'killed'>, "exited with signal 9 (SIGKILL), by the kernel's OOM killer")
    """
    reason = f"exited with {_exit_status(code)}" + (f": {error}" if error else "")
    return (Ending.KILLED if code < 0 else Ending.FAILED), reason + (", by the kernel's OOM killer" if oom else "")


def command_rendezvous_ports(key: str) -> str:
    """Rendezvous ports for a command that bootstraps itself inside launch ``key``, apart from the task's.

    >>> from slurm_resolver.rpc.network.ports import rendezvous_ports
    >>> set(map(int, command_rendezvous_ports("12.0").split(","))) & set(rendezvous_ports("12.0"))
    set()
    """
    from .rpc.network.ports import rendezvous_ports

    taken = set(rendezvous_ports(key))
    return ",".join(str(p) for p in rendezvous_ports(f"{key}/command", 24) if p not in taken)


def _counter(path: str, name: str) -> int | None:
    """The value of ``name`` in a kernel file of ``name value`` lines; None where unknown."""
    try:
        with open(path, encoding="ascii") as f:
            return next((int(line.split()[1]) for line in f if line.startswith(f"{name} ")), None)
    except (OSError, ValueError, IndexError):
        return None


def _oom_kills(proc: str = "/proc", cgroups: str = "/sys/fs/cgroup") -> int | None:
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


class _Child:
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


class _Recorder:
    """What this task writes for ``slurm-resolver run``, where it asks (else nothing)."""

    def __init__(self, b: Bootstrapped, recording: Recording | None) -> None:
        self.b = b
        self.directory: Path | None = recording.directory if recording else None
        self.label = b.me.label

    def bootstrapped(self, recording: Recording | None, step: str) -> None:
        """Rank 0: when the attempt (step ``step``) was bootstrapped, and how long after the previous one failed."""
        if recording is None or self.b.rank != 0:
            return
        now = time.time()
        mark_bootstrapped(recording.directory, now, step)
        if recording.failed_at is not None:
            print(f"slurm-resolver: attempt {recording.attempt}: every task bootstrapped "
                  f"{now - recording.failed_at:.1f} s after attempt {recording.attempt - 1} failed",
                  file=sys.stderr, flush=True)

    def record(self, ending: Ending, status: int, reason: str, heard: Sequence[Death], at: float,
               oom: bool = False) -> None:
        if self.directory is not None:
            me = self.b.me
            write(Outcome(self.b.rank, me.node, self.label, ending, status, reason, oom, tuple(heard), at),
                  self.directory)

    def reports_deaths(self, dead: Sequence[Death]) -> bool:
        """Whether this task writes (and says) the deaths it heard of: the lowest rank it knows alive does."""
        known = {d.rank for d in dead}
        lowest = next(r for r in range(self.b.world_size + 1) if r not in known)
        return lowest == self.b.rank


def record_unanswered(cluster: Cluster, error: UnansweredError, environ: Mapping[str, str] | None = None) -> None:
    """Under ``run``: this task's bootstrap failed because the tasks in ``error.missing`` never answered.
    The task that found it (the root, whose round waited for them; the others only heard it) records them
    as deaths heard, so that ``run`` asks their nodes and ends the step where one is lost, as after a death
    (else srun would wait for the lost node's slurmstepd until Slurm marks the node DOWN)."""
    env = snapshot(environ)
    recording = Recording.of(env)
    me = cluster.me
    if recording is None or me is None or error.speaker is not Speaker.TASK or me.rank in error.missing:
        return
    heard = tuple(Death(rank, node, f"{cluster.label(rank)} never answered in the bootstrap")
                  for rank, node in sorted(error.missing.items()) if node)
    if heard:
        mark_step(recording.directory, env.get("SLURM_STEP_ID", ""))
        write(Outcome(me.rank, me.node, me.label, Ending.STOPPED, 0, error.message, heard=heard, at=time.time()),
              recording.directory)


def _failed_alike_below(rank: int, message: str, dead: Sequence[Death], news: threading.Event, until: float) -> bool:
    """Whether a lower rank than ``rank`` is heard of, by ``until``, to have failed with ``message`` too
    (every task runs the same command: where it cannot start, the lowest such rank says it for the job)."""
    while True:
        if any(d.rank < rank and message in d.why for d in dead):
            return True
        left = until - time.monotonic()
        if rank == 0 or left <= 0:
            return False
        news.wait(left)
        news.clear()


def supervise(b: Bootstrapped, command: Sequence[str], grace: float = 5.0,
              environ: Mapping[str, str] | None = None) -> int:
    """Run ``command`` until it ends or a peer dies; returns the task's exit code."""
    env = snapshot(environ)
    recording = Recording.of(env)
    recorder = _Recorder(b, recording)
    news, heard = threading.Event(), threading.Event()
    dead: list[Death] = []
    heard_at: list[float] = []

    def on_failure(rank: int, why: str) -> None:
        heard_at.append(time.time())
        dead.append(Death(rank, b.task(rank).node, why))
        heard.set()
        news.set()

    b.on_failure(on_failure)
    recorder.bootstrapped(recording, env.get("SLURM_STEP_ID", ""))
    own = for_child({"SLURM_RESOLVER_RENDEZVOUS_PORTS": command_rendezvous_ports(b.job_key)})
    own.update(b.watch_command())  # its progress marks and stacks come through this task's file
    sys.stdout.flush()
    oom_before = _oom_kills()

    def speaker(dead: Sequence[Death]) -> Speaker:
        """Who says a death for the job: the lowest rank this task knows alive (every surviving task
        raises it; the others end without a word)."""
        return Speaker.TASK if recorder.reports_deaths(dead) else Speaker.ABOVE

    def end(error: ResolutionError | ConfigurationError, code: int = 1) -> int:
        """The task's end where its command did not succeed: under ``run``, which records and says it once
        for the job, an exit code alone; else ``error``, raised."""
        if recording is None:
            raise error
        return code

    try:
        child = _Child(command, news, own)
    except OSError as exc:
        error = cannot_run(command, exc, own)
        recorder.record(Ending.FAILED, 127, error.message, (), time.time())
        b.fail(f"{recorder.label}: {error.message}")
        if _failed_alike_below(b.rank, error.message, dead, news, time.monotonic() + NOTICE):
            error.speaker = Speaker.ABOVE  # a lower rank says it for the job (the same command, alike)
        b.stop()
        return end(error, 127)
    previous = {s: signal.signal(s, lambda number, frame: child.signal(number)) for s in FORWARDED}
    try:
        while not child.exited.is_set() and not heard.is_set():
            news.wait()
        if not child.exited.is_set():  # a peer died: stop this task's command, children included
            child.stop(grace)
            if recorder.reports_deaths(dead):
                recorder.record(Ending.STOPPED, child.code, f"stopped: {dead[0].why}", list(dead), heard_at[0])
            b.stop()
            return end(ResolutionError(f"bootstrap: {dead[0].why}; stopped this task's command ({command[0]})",
                                       _HINT, speaker=speaker(dead)))
        code = child.code
        if code == 0:
            b.stop()
            return 0
        oom = code == -signal.SIGKILL and (oom_before or 0) < (_oom_kills() or 0)
        ending, reason = ended_as(code, "" if code < 0 else child.error(), oom)
        # It failed because a peer died (a broken collective): say so. Nothing a peer does ends a command
        # with SIGKILL, so that one blames itself at once.
        if heard.wait(0 if code == -signal.SIGKILL else NOTICE):
            recorder.record(ending, code, reason, list(dead), child.at, oom)
            b.stop()
            then = f"so did this task's command ({command[0]})" if dead[0].why.endswith(f"its command {reason}") \
                else f"then this task's command ({command[0]}) {reason}"
            return end(ResolutionError(f"bootstrap: {dead[0].why}; {then}", _HINT, speaker=speaker(dead)))
        recorder.record(ending, code, reason, (), child.at, oom)
        b.fail(f"{recorder.label}: its command {reason}")
        os._exit(128 - code if code < 0 else code)  # no normal leaving: the others must stop
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
