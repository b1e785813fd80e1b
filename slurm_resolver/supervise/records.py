"""What a supervised task writes for ``slurm-resolver run`` (``SLURM_RESOLVER_OUTCOMES`` set), where it asks:
what its command came to, the deaths it heard of, when the attempt was bootstrapped; and the tasks that never
answered the bootstrap."""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..cluster import Cluster
from ..environment import snapshot
from ..errors import UnansweredError
from ..faults import Cause, Fault
from ..outcome import Outcome, Recording, mark_bootstrapped, mark_step, write
from ..rpc.bootstrapped import Bootstrapped
from ..speakers import Speaker

__all__: list[str] = []  # internal: no public names (docs/reference.md)


class Recorder:
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

    def record(self, fault: Fault, heard: Sequence[Fault] = ()) -> None:
        """This task's command ended as ``fault`` (its task: this one), after the deaths ``heard``."""
        if self.directory is not None:
            write(Outcome(self.label, fault.of(self.b.rank, self.b.me.node), tuple(heard)), self.directory)


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
    now = time.time()
    heard = tuple(Fault(Cause.SILENT, f"{cluster.label(rank)} never answered in the bootstrap", 0, rank, node, now)
                  for rank, node in sorted(error.missing.items()) if node)
    if heard:
        mark_step(recording.directory, env.get("SLURM_STEP_ID", ""))
        write(Outcome(me.label, Fault(Cause.LEFT, error.message).of(me.rank, me.node, now), heard),
              recording.directory)
