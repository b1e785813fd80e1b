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
"""

from __future__ import annotations

import argparse
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .attempts import Decision, Kind, Policy, Shape, Verdict, decide, verdict
from .environment import export, snapshot
from .errors import ResolutionError
from .hostlists import collapse
from .outcome import Recording, bootstrapped_at, read_all
from .preemption import checkpoint_dir
from .supervise import FORWARDED

__all__ = ["run", "srun_command", "Attempt", "from_arguments"]

Health = Callable[[Sequence[str], Collection[str]], Mapping[str, str]]


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


def _step(argv: Sequence[str]) -> tuple[int, int | None]:
    """Run one srun to its end, passing on the signals ``run`` gets (Slurm's warning, a cancel,
    Ctrl-C); returns its exit code and the last signal passed on (None: none)."""
    sys.stdout.flush()
    passed: list[int] = []
    try:
        process = subprocess.Popen(list(argv))
    except OSError as exc:
        raise ResolutionError(f"cannot run {argv[0]}: {exc.strerror}", "run inside a Slurm job, with srun on PATH"
                              ) from None

    def pass_on(number: int, frame: object) -> None:
        passed.append(number)
        process.send_signal(number)

    previous = {s: signal.signal(s, pass_on) for s in FORWARDED}
    try:
        code = process.wait()
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    return code, passed[-1] if passed else None


def _fresh(directory: Path) -> Path:
    """The attempt's directory for outcomes, without those of an earlier run of the job (a requeue)."""
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.iterdir():
        stale.unlink(missing_ok=True)
    return directory


def _asked(shape: Shape, nodes: tuple[str, ...], ended: Verdict, left_behind: set[str]
           ) -> tuple[list[str], set[str]]:
    """The nodes whose health decides the next attempt, and those whose slurmd is probed: the nodes of
    tasks that vanished (all of the attempt's where nobody said why) and the spares."""
    spares = [n for n in shape.nodes if n not in nodes and n not in left_behind]
    gone = {loss.node for loss in ended.losses if loss.gone}
    probed = set(nodes) if ended.kind is Kind.UNEXPLAINED else gone
    return [*nodes, *spares], probed | set(spares)


def _summary(attempts: Sequence[Attempt], decision: Decision) -> str:
    return f"the step failed {len(attempts)} time(s): " + "; ".join(a.line() for a in attempts) + \
        f"; {decision.why}"


def run(command: Sequence[str], policy: Policy | None = None, srun_args: Sequence[str] = (),
        bootstrap_args: Sequence[str] = (), environ: Mapping[str, str] | None = None,
        health: Health | None = None, launch: Callable[[Sequence[str]], tuple[int, int | None]] = _step) -> int:
    """Run ``command`` in every task of the job's step, restarting the step as ``policy`` allows;
    returns 0 once an attempt completes, else raises an error that lists every attempt."""
    if not command:
        raise ResolutionError("slurm-resolver run needs a command", "slurm-resolver run -- python train.py")
    from .slurmctl import node_health

    ask: Health = health or node_health
    policy = policy or Policy()
    env = snapshot(environ)
    shape = Shape.of(env)
    nodes = policy.first_nodes(shape)
    base = checkpoint_dir(environ=env) / "attempts"
    attempts: list[Attempt] = []
    left_behind: set[str] = set()
    failed_at: float | None = None
    before: Verdict | None = None
    for number in range(1, policy.restarts + 2):
        directory = _fresh(base / str(number))
        export(Recording(directory, number, failed_at).variables(), overwrite=True)
        argv = srun_command(nodes, shape, srun_args, bootstrap_args, command)
        _say(f"attempt {number} on {collapse(list(nodes))}: {shlex.join(argv)}")
        start = time.monotonic()
        code, passed = launch(argv)
        seconds, up, ended_at = time.monotonic() - start, bootstrapped_at(directory), time.time()
        restart = up - failed_at if up is not None and failed_at is not None else None
        if code == 0:
            attempts.append(Attempt(number, nodes, seconds, None, restart))
            if number > 1:
                _say("completed after " + "; ".join(a.line() for a in attempts))
            return 0
        world = (shape.per_node or 0) * len(nodes) or sum(shape.counts)
        ended = verdict(read_all(directory), world, code)
        attempts.append(Attempt(number, nodes, seconds, ended, restart))
        if passed is not None:
            decision = Decision(None, f"not restarted: run passed on {signal.Signals(passed).name} (the job is "
                                      "ending or warned of its end)")
        else:
            unhealthy = {} if ended.kind is Kind.EVERYWHERE else ask(*_asked(shape, nodes, ended, left_behind))
            decision = decide(policy, shape, nodes, number, ended, unhealthy, left_behind, before)
        _say(f"{attempts[-1].line()}; {decision.why}")
        if decision.nodes is None:
            raise ResolutionError(_summary(attempts, decision),
                                  f"each attempt's output is above; the checkpoints stay in {base.parent}")
        left_behind |= set(nodes) - set(decision.nodes)
        nodes, failed_at, before = decision.nodes, ended.at or ended_at, ended
    raise AssertionError("unreachable: the last attempt decides")  # pragma: no cover


def from_arguments(args: argparse.Namespace) -> int:
    """``slurm-resolver run`` with its parsed arguments (see the command line)."""
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    bootstrap = [*(["--jobs", args.jobs] if args.jobs else []), "--format", args.format]
    policy = Policy(args.restarts, args.spare_nodes, args.min_nodes)
    return run(command, policy, shlex.split(args.srun_args), bootstrap)
