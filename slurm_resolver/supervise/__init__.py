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
an error (`slurm_resolver.supervise.command`). A peer's death is said once for the job, by the
lowest rank each task knows alive (the others end without a word: their error's `Speaker` is
``ABOVE``), decided on each failure's cause (`slurm_resolver.speakers`). Under
``slurm-resolver run`` (``SLURM_RESOLVER_OUTCOMES`` set) the task records what its command
came to (`slurm_resolver.supervise.records`) and says nothing of it (``run`` says it once for the job),
and rank 0 records when the attempt was bootstrapped (and its step id) and says how long after
the previous attempt's failure. A command that bootstraps itself (``slurm_resolver.bootstrap()``
in it) gets rendezvous ports of its own (``SLURM_RESOLVER_RENDEZVOUS_PORTS``, where it is not
set), away from this task's.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace

from ..environment import for_child, snapshot
from ..errors import ConfigurationError, ResolutionError
from ..faults import Cause, Fault
from ..outcome import Recording
from ..rpc.bootstrapped import Bootstrapped
from ..speakers import Speaker, for_deaths, for_unstarted
from .command import Child, cannot_run, command_rendezvous_ports, ended_as
from .command import oom_kills as _oom_kills
from .records import Recorder

__all__: list[str] = []  # internal: no public names (docs/reference.md)

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
"""Signals the task passes on to its command's process group."""

NOTICE = 2.0
"""Seconds a task whose command failed waits for news of a peer's death (a dead peer's closed
connection is known within about a second) before it reports the failure as its own."""

_HINT = "look at that task's output for why it ended; the whole step ends with it"


def supervise(b: Bootstrapped, command: Sequence[str], grace: float = 5.0,
              environ: Mapping[str, str] | None = None) -> int:
    """Run ``command`` until it ends or a peer dies; returns the task's exit code."""
    env = snapshot(environ)
    recording = Recording.of(env)
    recorder = Recorder(b, recording)
    news, heard = threading.Event(), threading.Event()
    dead: list[Fault] = []  # in the order heard; each names its task and node, and when it was heard of
    faults: dict[int, Fault] = {}

    def on_fault(rank: int, fault: Fault) -> None:
        faults[rank] = fault
        dead.append(fault)
        heard.set()
        news.set()

    b.on_fault(on_fault)
    recorder.bootstrapped(recording, env.get("SLURM_STEP_ID", ""))
    own = for_child({"SLURM_RESOLVER_RENDEZVOUS_PORTS": command_rendezvous_ports(b.job_key)})
    own.update(b.watch_command())  # its progress marks and stacks come through this task's file
    sys.stdout.flush()
    oom_before = _oom_kills()

    def end(error: ResolutionError | ConfigurationError, code: int = 1) -> int:
        """The task's end where its command did not succeed: under ``run``, which records and says it once
        for the job, an exit code alone; else ``error``, raised."""
        if recording is None:
            raise error
        return code

    # The handlers first: a signal that comes while the command starts (Slurm's warning, Ctrl-C) is held, then
    # passed on; without them, its default action (SIGUSR1's: terminate) would end this task, not the command.
    started: list[Child] = []
    held: list[int] = []

    def forward(number: int, frame: object) -> None:
        if started:
            started[0].signal(number)
        else:
            held.append(number)

    previous = {s: signal.signal(s, forward) for s in FORWARDED}
    try:
        try:
            child = Child(command, news, own)
        except OSError as exc:
            error = cannot_run(command, exc, own)
            recorder.record(Fault(Cause.UNSTARTED, error.message, 127, at=time.time()))
            b.fail(f"{recorder.label}: {error.message}", Cause.UNSTARTED, 127)
            error.speaker = for_unstarted(b.rank, faults, news, time.monotonic() + NOTICE)  # the same command, alike
            b.stop()
            return end(error, 127)
        started.append(child)
        for number in held:
            child.signal(number)
        while not child.exited.is_set() and not heard.is_set():
            news.wait()
        if not child.exited.is_set():  # a peer died: stop this task's command, children included
            child.stop(grace)
            speaker = for_deaths(b.rank, b.world_size, faults)
            if speaker is Speaker.TASK:
                recorder.record(Fault(Cause.LEFT, f"stopped: {dead[0].words}", child.code, at=dead[0].at), dead)
            b.stop()
            return end(ResolutionError(f"bootstrap: {dead[0].words}; stopped this task's command ({command[0]})",
                                       _HINT, speaker=speaker))
        code = child.code
        if code == 0:
            b.stop()
            return 0
        oom = code == -signal.SIGKILL and (oom_before or 0) < (_oom_kills() or 0)
        ended = replace(ended_as(code, "" if code < 0 else child.error(), oom), at=child.at)
        # It failed because a peer died (a broken collective): say so. Nothing a peer does ends a command
        # with SIGKILL, so that one blames itself at once.
        if heard.wait(0 if code == -signal.SIGKILL else NOTICE):
            recorder.record(ended, dead)
            b.stop()
            alike = dead[0].signature == ended.signature  # it exited as the dead peer's did
            then = f"so did this task's command ({command[0]})" if alike \
                else f"then this task's command ({command[0]}) {ended.words}"
            return end(ResolutionError(f"bootstrap: {dead[0].words}; {then}", _HINT,
                                       speaker=for_deaths(b.rank, b.world_size, faults)))
        recorder.record(ended)
        b.fail(f"{recorder.label}: its command {ended.words}", Cause.EXITED, code)
        os._exit(128 - code if code < 0 else code)  # no normal leaving: the others must stop
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
