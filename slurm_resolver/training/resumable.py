"""A training loop that survives time limits, preemption and lost tasks: checkpoint, requeue or restart, resume.

    #SBATCH --signal=B:USR2@60 --requeue        (what every template asks for)
    srun python -m slurm_resolver.training.resumable --steps 200
    slurm-resolver run --restarts 3 -- python -m slurm_resolver.training.resumable --steps 200

Every task bootstraps and steps through a toy training loop (each step a short sleep and
an update of a running sum, the "model"). When Slurm's warning comes (see
[`slurm_resolver.preemption`][slurm_resolver.preemption]), the tasks agree at the next check to stop, rank 0 writes
the checkpoint (the step and the model) to the job's checkpoint directory, every task meets
in a barrier, and rank 0 requeues the job. Slurm then runs the job again
(``SLURM_RESTART_COUNT`` one higher), which resumes from the checkpoint and, once every
step is done, prints its final state. Rank 0 also writes the checkpoint every
``--checkpoint-every`` steps, so that a step that ``slurm-resolver run`` launches again
after a task died (``SLURM_RESOLVER_ATTEMPT`` one higher) resumes near where it stopped.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from ..errors import SlurmResolverError
from .report import Reporter
from .task import start_task

__all__ = ["main"]


def _save(path: Path, step: int, model: int) -> None:
    """The checkpoint, whole or not at all (a task killed while writing leaves the previous one)."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps({"step": step, "model": model}))
    os.replace(partial, path)


def main(argv: Sequence[str] | None = None) -> int:
    """Run this task's part of the job; returns its exit code."""
    parser = argparse.ArgumentParser(prog="python -m slurm_resolver.training.resumable",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", default=None)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--step-time", type=float, default=0.05, help="seconds each step takes")
    parser.add_argument("--check-every", type=int, default=5, help="steps between the checks for a warning")
    parser.add_argument("--checkpoint-every", type=int, default=10, help="steps between checkpoints (0: only when "
                        "warned)")
    parser.add_argument("--signal", default="USR2", help="Slurm's warning signal")
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args(argv)
    from ..preemption import Preemption, attempt, checkpoint_dir, requeue, restart_count

    preemption = Preemption([args.signal])  # before anything else: the warning may come early
    try:
        saved = checkpoint_dir() / "state.json"
    except SlurmResolverError as exc:
        print(f"resumable: error: {exc.one_line()}", file=sys.stderr)
        return 1
    # Read before the bootstrap, which rank 0 passes only once every task has read it.
    state = json.loads(saved.read_text()) if saved.exists() else {"step": 0, "model": 0}
    b = start_task("resumable", args.jobs, args.timeout, own_gpus=False)
    if b is None:
        return 1
    say = Reporter(b)
    restarts, number = restart_count(), attempt()
    if b.rank == 0:
        say(f"run {restarts + 1}{f', attempt {number}' if number > 1 else ''}: "
            f"{'resuming at step ' + str(state['step']) if state['step'] else 'starting'} "
            f"({args.steps} steps, checkpoints in {saved.parent})")
    step = state["step"]
    while step < args.steps:
        if b.rank == 0 and args.checkpoint_every and step % args.checkpoint_every == 0 and step > state["step"]:
            _save(saved, step, state["model"])
        if step % args.check_every == 0 and step > state["step"] and preemption.should_stop(b):
            if b.rank == 0:
                _save(saved, step, state["model"])
                say(f"warned ({preemption.received or 'by another task'}): checkpoint at step {step}; requeueing")
            b.barrier("checkpointed", args.timeout)
            failed = ""
            if b.rank == 0:
                try:
                    requeue()  # Slurm ends this run and starts the job again
                except SlurmResolverError as exc:
                    failed = exc.one_line()
            if b.vote("requeue failed", bool(failed), args.timeout):  # every task ends the same way
                say(f"FAILED: the requeue failed{': ' + failed if failed else ''}; the checkpoint stays")
                b.stop()
                return 1
            b.stop()
            time.sleep(args.timeout)  # Slurm ends every task of this run
            return 0
        time.sleep(args.step_time)
        state["model"] += step  # the "training"
        step += 1
    b.barrier("done", args.timeout)
    if b.rank == 0:
        say(f"finished: {args.steps} steps, model {state['model']} (expected {args.steps * (args.steps - 1) // 2}), "
            f"after {restarts} requeue(s) and {number - 1} restart(s)")
    b.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
