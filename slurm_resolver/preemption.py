"""Time limits, preemption and requeue: Slurm warns, the training loop checkpoints, the job comes back.

Templates ask Slurm for a warning signal before the end (``--signal=B:USR2@60``: USR2 by
default, since NCCL may catch USR1) and for ``--requeue``; the batch script passes the
signal to every task. In the task:

    preemption = Preemption()                  # installs a handler that only sets a flag
    for step in range(start, steps):
        ...
        if step % 10 == 0 and preemption.should_stop(b):   # every task agrees on the same step
            save(checkpoint_dir() / "state")
            b.barrier("saved")
            if b.rank == 0:
                requeue()                      # the job comes back; SLURM_RESTART_COUNT says so
            break

Nothing is done inside the signal handler: checkpointing there is how jobs lose their
checkpoints (Lightning #21406). Requeue names the array element, not the whole array
(Lightning #15022).
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .environment import snapshot
from .errors import ConfigurationError

__all__ = ["Preemption", "requeue", "requeue_id", "restart_count", "attempt", "checkpoint_dir", "DEFAULT_SIGNAL"]

DEFAULT_SIGNAL = "USR2"
"""The signal of Slurm's warning in the templates (``--signal=B:USR2@60``): USR2, as NCCL may catch USR1."""


def _signal(name: str | int) -> signal.Signals:
    try:
        return signal.Signals(name) if isinstance(name, int) else signal.Signals[
            name if name.startswith("SIG") else f"SIG{name}"]
    except (KeyError, ValueError):
        raise ConfigurationError(f"{name!r} is not a signal", "e.g. USR2, USR1, TERM") from None


class Preemption:
    """A flag that Slurm's warning signal sets; the training loop reads it between steps.

    Args:
        signals: the signals that warn (default ``SIGUSR2``); the handler only sets the flag.
            Make it in the main thread (Python runs signal handlers there).
    """

    def __init__(self, signals: Iterable[str | int] = (DEFAULT_SIGNAL,)) -> None:
        self._requested = False  # a plain flag: a handler must take no lock
        self.received: str | None = None
        self.at: float | None = None
        if threading.current_thread() is not threading.main_thread():
            raise ConfigurationError("Preemption() must be made in the main thread", "Python handles signals there")
        for number in map(_signal, signals):
            signal.signal(number, self._handle)

    def _handle(self, number: int, frame: Any) -> None:
        self.received = signal.Signals(number).name
        self.at = time.monotonic()
        self._requested = True

    @property
    def requested(self) -> bool:
        """Whether this task got the warning."""
        return self._requested

    def should_stop(self, b: Any = None, timeout: float = 60.0) -> bool:
        """Whether to checkpoint and stop now. With a bootstrapped cluster ``b``, every task
        answers the same (any task warned: all stop), so that all stop at the same step;
        every task must then call it at the same steps."""
        if b is None:
            return self.requested
        return bool(b.vote("preemption", self.requested, timeout))


def requeue_id(environ: Mapping[str, str] | None = None) -> str:
    """The id that requeues this job: ``<array job>_<task>`` for an array element, else the job id."""
    from .layout import array_element

    env = snapshot(environ)
    element = array_element(env)
    if element is not None:
        return element
    job = env.get("SLURM_JOB_ID")
    if not job:
        raise ConfigurationError("SLURM_JOB_ID is not set: this process is not in a Slurm job",
                                 "requeue from inside the job")
    return job


def requeue(environ: Mapping[str, str] | None = None) -> str:
    """Requeue this job (one task does it, rank 0 by custom): Slurm ends it and runs it again,
    with ``SLURM_RESTART_COUNT`` one higher. Returns the id it requeued."""
    from .slurmctl import requeue as ask_slurm

    job = requeue_id(environ)
    ask_slurm(job)
    return job


def restart_count(environ: Mapping[str, str] | None = None) -> int:
    """How many times this job was requeued (``SLURM_RESTART_COUNT``; 0 on its first run)."""
    from .parsing import optional_int

    return optional_int(snapshot(environ), "SLURM_RESTART_COUNT") or 0


def attempt(environ: Mapping[str, str] | None = None) -> int:
    """Which attempt of ``slurm-resolver run`` this step is (``SLURM_RESOLVER_ATTEMPT``: 1 for the first,
    one more after each restart in the job's allocation; 1 outside ``run``)."""
    from .parsing import optional_int

    return optional_int(snapshot(environ), "SLURM_RESOLVER_ATTEMPT", 1) or 1


def checkpoint_dir(base: str | Path | None = None, environ: Mapping[str, str] | None = None) -> Path:
    """A directory that stays the same across the job's requeues (one per array element):
    ``<base>/checkpoints-<job id>``; ``base`` defaults to the directory the job was submitted from."""
    env = snapshot(environ)
    root = Path(base) if base is not None else Path(env.get("SLURM_SUBMIT_DIR") or ".")
    path = root / f"checkpoints-{requeue_id(env)}"
    path.mkdir(parents=True, exist_ok=True)
    return path
