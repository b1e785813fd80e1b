"""A training loop that survives time limits and preemption: checkpoint, requeue, resume.

    #SBATCH --signal=B:USR2@60 --requeue        (what every template asks for)
    srun python -m slurm_resolver.training.resumable --steps 200

Every task bootstraps and steps through a toy training loop (each step a short sleep and
an update of a running sum, the "model"). When Slurm's warning comes (see
[`slurm_resolver.preemption`][slurm_resolver.preemption]), the tasks agree at the next check to stop, rank 0 writes
the checkpoint (the step and the model) to the job's checkpoint directory, every task meets
in a barrier, and rank 0 requeues the job. Slurm then runs the job again
(``SLURM_RESTART_COUNT`` one higher), which resumes from the checkpoint and, once every
step is done, prints its final state.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence

from ..errors import SlurmResolverError
from .report import Reporter
from .task import start_task

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run this task's part of the job; returns its exit code."""
    parser = argparse.ArgumentParser(prog="python -m slurm_resolver.training.resumable",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", default=None)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--step-time", type=float, default=0.05, help="seconds each step takes")
    parser.add_argument("--check-every", type=int, default=5, help="steps between the checks for a warning")
    parser.add_argument("--signal", default="USR2", help="Slurm's warning signal")
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args(argv)
    from ..preemption import Preemption, checkpoint_dir, requeue, restart_count

    preemption = Preemption([args.signal])  # before anything else: the warning may come early
    b = start_task("resumable", args.jobs, args.timeout, auto_set_gpu=False)
    if b is None:
        return 1
    say = Reporter(b)
    saved = checkpoint_dir() / "state.json"
    state = json.loads(saved.read_text()) if saved.exists() else {"step": 0, "model": 0}
    restarts = restart_count()
    if b.rank == 0:
        say(f"run {restarts + 1}: {'resuming at step ' + str(state['step']) if state['step'] else 'starting'} "
            f"({args.steps} steps, checkpoints in {saved.parent})")
    step = state["step"]
    while step < args.steps:
        if step % args.check_every == 0 and step > state["step"] and preemption.should_stop(b):
            if b.rank == 0:
                saved.write_text(json.dumps({"step": step, "model": state["model"]}))
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
            f"after {restarts} requeue(s)")
    b.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
