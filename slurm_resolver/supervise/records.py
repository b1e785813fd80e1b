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
from ..errors import Speaker, UnansweredError
from ..outcome import Death, Ending, Outcome, Recording, mark_bootstrapped, mark_step, write
from ..rpc.bootstrapped import Bootstrapped

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

    def record(self, ending: Ending, status: int, reason: str, heard: Sequence[Death], at: float,
               oom: bool = False) -> None:
        if self.directory is not None:
            me = self.b.me
            write(Outcome(self.b.rank, me.node, self.label, ending, status, reason, oom, tuple(heard), at),
                  self.directory)


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
