"""``slurm-resolver run -- COMMAND``: the job's step, launched again in its own allocation when a task dies.

    #SBATCH --nodes=3 --ntasks-per-node=2 --no-kill       # two nodes, and one spare
    slurm-resolver run --restarts 3 --spare-nodes 1 -- python train.py

Each attempt is one step, ``srun ... slurm-resolver bootstrap -- COMMAND``: its tasks watch
each other, and a task that dies ends the step within seconds, naming it. Each task records
what its command came to (`slurm_resolver.outcome`); ``run`` reads that and Slurm's
view of the nodes, and decides (`slurm_resolver.attempts`): the same nodes again, a
spare node in place of a bad one, fewer nodes, or the end, with every attempt's reason. No
attempt goes back to the queue. The tasks find ``SLURM_RESOLVER_ATTEMPT`` (1, 2, ...) beside
``SLURM_RESTART_COUNT``, and resume from ``checkpoint_dir()``.

A node that loses power says nothing: srun would wait for Slurm to mark it DOWN (``SlurmdTimeout``),
and the dead step would still hold the living nodes' CPUs after that. While srun runs, ``run``
watches what the tasks record (`slurm_resolver.srun_step`); once they name a dead task whose node's
slurmd does not answer, it ends the step itself (SIGKILL of srun, ``scancel`` of the step) and runs
the later attempts with ``srun --overlap``, which Slurm lets start beside what is left of the dead step.
"""

from __future__ import annotations

import argparse
import re
import shlex
import shutil
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .attempts import Kind, NextAttempt, RestartPolicy, Shape, Verdict, decide, verdict
from .environment import export, snapshot
from .errors import ResolutionError
from .hostlists import collapse
from .outcome import Recording, bootstrapped_at, read_all
from .preemption import checkpoint_dir
from .srun_step import Health, Launch, Watch
from .srun_step import end as end_step
from .srun_step import launch as launch_step

__all__ = ["run", "srun_command", "shown", "Attempt", "from_arguments"]

_PLAIN = re.compile(r"[^\w@%+=:,./-]", re.ASCII)


def shown(argv: Sequence[str]) -> str:
    """A command line as a person reads it: plain words bare, others in single quotes, or in double
    quotes where that needs no escape (a shell reads every form back as the same words).

    >>> print(shown(["python", "-c", "raise ValueError('bad learning rate')", "a b", 'say "$HOME"']))
    python -c "raise ValueError('bad learning rate')" 'a b' 'say "$HOME"'
    """
    def word(text: str) -> str:
        if text and not _PLAIN.search(text):
            return text
        if "'" in text and not any(c in text for c in '"\\$`!'):
            return f'"{text}"'
        return shlex.quote(text)

    return " ".join(map(word, argv))


def srun_command(nodes: Sequence[str], shape: Shape, srun_args: Sequence[str], bootstrap_args: Sequence[str],
                 command: Sequence[str], python: str = sys.executable) -> list[str]:
    """The srun command line of an attempt on ``nodes`` (the whole allocation's layout where its nodes'
    task counts differ).

    >>> srun_command(("n1", "n3"), Shape(("n1", "n2", "n3"), (2, 2, 2)), ["-l"], ["--format", "torch"],
    ...              ["python", "t.py"], "py")  # doctest: +NORMALIZE_WHITESPACE
    ['srun', '--nodes=2', '--ntasks=4', '--ntasks-per-node=2', '--nodelist=n[1,3]', '-l',
     'py', '-m', 'slurm_resolver', 'bootstrap', '--format', 'torch', '--', 'python', 't.py']
    """
    per = shape.per_node
    layout = [] if per is None else [f"--nodes={len(nodes)}", f"--ntasks={per * len(nodes)}",
                                     f"--ntasks-per-node={per}", f"--nodelist={collapse(list(nodes))}"]
    return ["srun", *layout, *srun_args, python, "-m", "slurm_resolver", "bootstrap", *bootstrap_args, "--",
            *command]


@dataclass(frozen=True)
class Attempt:
    """One attempt as the output lists it."""

    number: int
    nodes: tuple[str, ...]
    seconds: float
    ended: Verdict | None = None
    """How it failed; None where it completed."""
    restart: float | None = None
    """Seconds from the previous attempt's failure to this one's tasks bootstrapped."""

    def line(self) -> str:
        """``attempt 2 on node[1,3] (14.2 s, restarted in 4.1 s): ...``"""
        took = f"{self.seconds:.1f} s" + (f", restarted in {self.restart:.1f} s" if self.restart is not None else "")
        return f"attempt {self.number} on {collapse(list(self.nodes))} ({took}): " + \
            (self.ended.reason if self.ended else "completed")


def _say(text: str) -> None:
    print(f"slurm-resolver run: {text}", file=sys.stderr, flush=True)


def _fresh(directory: Path) -> Path:
    """The attempt's directory for outcomes, without those of an earlier run of the job (a requeue)."""
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.iterdir():
        stale.unlink(missing_ok=True)
    return directory


def _clean(base: Path) -> None:
    """Remove the attempts' records, and the checkpoint directory where nothing else is in it (a program
    that never checkpoints)."""
    shutil.rmtree(base, ignore_errors=True)
    try:
        base.parent.rmdir()
    except OSError:
        pass


def _asked(shape: Shape, nodes: tuple[str, ...], ended: Verdict, left_behind: set[str], known: set[str]
           ) -> tuple[list[str], set[str]]:
    """The nodes whose health decides the next attempt, and those whose slurmd is probed: the nodes of
    tasks that vanished (all of the attempt's where nobody said why) and the spares, but those ``known``
    lost already (a node that lost power: each probe of it waits for the probe's timeout)."""
    spares = [n for n in shape.nodes if n not in nodes and n not in left_behind]
    probed = set(nodes) if ended.kind is Kind.UNEXPLAINED else ended.gone
    return [n for n in [*nodes, *spares] if n not in known], (probed | set(spares)) - known


def _summary(attempts: Sequence[Attempt], decision: NextAttempt) -> str:
    if len(attempts) == 1:
        return f"{attempts[0].line()}; {decision.why}"
    return f"the step failed {len(attempts)} times: " + "; ".join(a.line() for a in attempts) + \
        f"; {decision.why}"


def run(command: Sequence[str], policy: RestartPolicy | None = None, srun_args: Sequence[str] = (),
        bootstrap_args: Sequence[str] = (), environ: Mapping[str, str] | None = None,
        health: Health | None = None, launch: Launch = launch_step, verbose: bool = False) -> int:
    """Run ``command`` in every task of the job's step, restarting the step as ``policy`` allows;
    returns 0 once an attempt completes, else raises an error that lists every attempt. One line says
    each attempt's end (``verbose``: its srun command line too)."""
    if not command:
        raise ResolutionError("slurm-resolver run needs a command", "slurm-resolver run -- python train.py")
    from .slurmctl import node_health

    ask: Health = health or node_health
    policy = policy or RestartPolicy()
    env = snapshot(environ)
    shape = Shape.of(env)
    nodes = policy.first_nodes(shape)
    base = checkpoint_dir(environ=env) / "attempts"
    try:
        return _attempts(command, policy, shape, nodes, srun_args, bootstrap_args, env, ask, launch, verbose, base)
    finally:
        _clean(base)


def _attempts(command: Sequence[str], policy: RestartPolicy, shape: Shape, nodes: tuple[str, ...],
              srun_args: Sequence[str], bootstrap_args: Sequence[str], env: Mapping[str, str], ask: Health,
              launch: Launch, verbose: bool, base: Path) -> int:
    attempts: list[Attempt] = []
    left_behind: set[str] = set()
    failed_at: float | None = None
    before: Verdict | None = None
    overlap: list[str] = []  # once a step was ended by run: what is left of it must not keep the next waiting
    for number in range(1, policy.restarts + 2):
        directory = _fresh(base / str(number))
        export(Recording(directory, number, failed_at).variables(), overwrite=True)
        argv = srun_command(nodes, shape, [*overlap, *srun_args], bootstrap_args, command)
        if verbose:
            _say(f"attempt {number} on {collapse(list(nodes))}: {shown(argv)}")
        start = time.monotonic()
        watch = Watch(directory, ask)
        ended = launch(argv, watch)
        seconds, up, ended_at = time.monotonic() - start, bootstrapped_at(directory), time.time()
        if ended.cut is not None:
            step = end_step(directory, env.get("SLURM_JOB_ID"))
            overlap = ["--overlap"]
            if verbose:
                _say(f"attempt {number}: ended {step} ({ended.cut})")
        restart = up - failed_at if up is not None and failed_at is not None else None
        if ended.code == 0 and ended.cut is None:
            attempts.append(Attempt(number, nodes, seconds, None, restart))
            _say(f"completed: attempt {number} on {collapse(list(nodes))} ({seconds:.1f} s"
                 + (f", restarted in {restart:.1f} s" if restart is not None else "")
                 + (f"), after {number - 1} restart(s)" if number > 1 else ")"))
            return 0
        world = (shape.per_node or 0) * len(nodes) or sum(shape.counts)
        result = verdict(read_all(directory), world, ended.code)
        attempts.append(Attempt(number, nodes, seconds, result, restart))
        if ended.passed is not None:
            decision = NextAttempt(None, f"not restarted: run passed on {signal.Signals(ended.passed).name} (the job "
                                      "is ending or warned of its end)")
        else:
            unhealthy = {} if result.kind is Kind.EVERYWHERE else \
                {**watch.lost, **ask(*_asked(shape, nodes, result, left_behind, set(watch.lost)))}
            decision = decide(policy, shape, nodes, number, result, unhealthy, left_behind, before)
        if decision.nodes is None:
            raise ResolutionError(_summary(attempts, decision), "each attempt's output is above" if number > 1
                                  else "the tasks' output is above")
        _say(f"{attempts[-1].line()}; {decision.why}")
        left_behind |= set(nodes) - set(decision.nodes)
        nodes, failed_at, before = decision.nodes, result.at or ended_at, result
    raise AssertionError("unreachable: the last attempt decides")  # pragma: no cover


def from_arguments(args: argparse.Namespace) -> int:
    """``slurm-resolver run`` with its parsed arguments (see the command line)."""
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    bootstrap = [*(["--jobs", args.jobs] if args.jobs else []), "--format", args.format,
                 *(["--hang-after", f"{args.hang_after:g}"] if getattr(args, "hang_after", None) else [])]
    policy = RestartPolicy(args.restarts, args.spare_nodes, args.min_nodes)
    verbose = bool(getattr(args, "verbose", False) or getattr(args, "debug", False))
    return run(command, policy, shlex.split(args.srun_args), bootstrap, verbose=verbose)
