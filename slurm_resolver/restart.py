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
watches what the tasks record (`_Watch`); once they name a dead task whose node's slurmd does not
answer, it ends the step itself (``scancel`` of the step, SIGKILL of srun) and runs the later
attempts with ``srun --overlap``, which Slurm lets start beside what is left of the dead step.
"""

from __future__ import annotations

import argparse
import logging
import re
import shlex
import shutil
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
from .outcome import Ending, Recording, bootstrapped_at, bootstrapped_step, read_all
from .preemption import checkpoint_dir
from .supervise import FORWARDED

__all__ = ["run", "srun_command", "shown", "Attempt", "Ended", "from_arguments"]

log = logging.getLogger("slurm_resolver")

Health = Callable[[Sequence[str], Collection[str]], Mapping[str, str]]

POLL = 0.25
"""Seconds between two looks at what an attempt's tasks recorded while its srun runs (a file that another
node writes on a shared file system cannot be waited on)."""

ENDS_WITHIN = 10.0
"""Seconds after its tasks recorded a death within which an attempt's srun ends by itself (the living
tasks stop their commands within the bootstrap's grace, 5 s); later, ``run`` ends the step."""

_REREAD = 2.0
"""Seconds after which the watch reads the attempt's records again, changed or not."""

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


@dataclass(frozen=True)
class Ended:
    """How an attempt's srun ended."""

    code: int
    """srun's exit code (minus the signal that ended it)."""
    passed: int | None = None
    """The last signal ``run`` passed on to it (a cancel, Slurm's warning before the end); None: none."""
    cut: str | None = None
    """Why ``run`` ended the step itself, where it did (its srun would have waited for Slurm)."""


Stuck = Callable[[], str | None]
Launch = Callable[[Sequence[str], Stuck], Ended]


def _say(text: str) -> None:
    print(f"slurm-resolver run: {text}", file=sys.stderr, flush=True)


class _Watch:
    """Whether an attempt's step can still end by itself: asked every `POLL` seconds while its srun runs;
    returns why not (the step is then ended), else None.

    srun ends once every node's slurmstepd says that its tasks ended. A node that lost power (its slurmd,
    its slurmstepd and its tasks gone at once) never says it: srun would wait for Slurm to mark the node
    DOWN. Once the tasks recorded a death (`slurm_resolver.outcome`), the nodes of the tasks that vanished
    are asked (``health``: Slurm's view, and whether their slurmd answers); a node that does not answer,
    or an srun still running `ENDS_WITHIN` seconds after the first recorded death, ends the step.
    """

    def __init__(self, directory: Path, health: Health, within: float | None = None) -> None:
        self.directory = directory
        self.health = health
        self.within = ENDS_WITHIN if within is None else within
        self.since: float | None = None
        self.asked: set[str] = set()
        self.changed: tuple[int | None, int] = (None, -1)

    def __call__(self) -> str | None:
        try:
            mtime: int | None = self.directory.stat().st_mtime_ns
        except OSError:
            mtime = None
        changed = (mtime, int(time.monotonic() // _REREAD))  # read again where it changed, and now and then:
        if changed != self.changed:  # a file system's clock may not tell two writes in a row apart
            self.changed = changed
            outcomes = read_all(self.directory)
            heard = {d.rank: d.node for o in outcomes.values() for d in o.heard}
            if self.since is None and (heard or any(o.ending is Ending.KILLED for o in outcomes.values())):
                self.since = time.monotonic()
            vanished = {node for rank, node in heard.items() if rank not in outcomes} - self.asked
            if vanished:
                self.asked |= vanished
                lost = self.health(sorted(vanished), vanished)
                if lost:
                    return "; ".join(f"{node}: {why}" for node, why in sorted(lost.items()))
        if self.since is not None and time.monotonic() - self.since > self.within:
            return f"srun did not end within {self.within:g} s of the death its tasks recorded"
        return None


def _step(argv: Sequence[str], stuck: Stuck) -> Ended:
    """Run one srun to its end, passing on the signals ``run`` gets (Slurm's warning, a cancel, Ctrl-C),
    and SIGKILL it once ``stuck()`` says why its step cannot end by itself."""
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
    cut: str | None = None
    try:
        while True:
            try:
                code = process.wait(POLL)
                break
            except subprocess.TimeoutExpired:
                cut = stuck()
                if cut is not None:
                    process.kill()
                    code = process.wait()
                    break
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    return Ended(code, passed[-1] if passed else None, cut)


def _end_step(directory: Path, job: str | None) -> str:
    """After its srun was killed: cancel the attempt's step, so that Slurm ends what is left of it on every
    node that answers (its id is rank 0's record). Returns the step, as Slurm names it."""
    from .slurmctl import cancel_step

    step = bootstrapped_step(directory)
    if not job or not step:
        log.warning("slurm-resolver run: cannot cancel the attempt's step: rank 0 recorded no step id")
        return "its step"
    failed = cancel_step(f"{job}.{step}")
    if failed:
        log.warning("slurm-resolver run: scancel %s.%s: %s", job, step, failed)
    return f"step {job}.{step}"


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


def _asked(shape: Shape, nodes: tuple[str, ...], ended: Verdict, left_behind: set[str]
           ) -> tuple[list[str], set[str]]:
    """The nodes whose health decides the next attempt, and those whose slurmd is probed: the nodes of
    tasks that vanished (all of the attempt's where nobody said why) and the spares."""
    spares = [n for n in shape.nodes if n not in nodes and n not in left_behind]
    gone = {loss.node for loss in ended.losses if loss.gone}
    probed = set(nodes) if ended.kind is Kind.UNEXPLAINED else gone
    return [*nodes, *spares], probed | set(spares)


def _summary(attempts: Sequence[Attempt], decision: Decision) -> str:
    if len(attempts) == 1:
        return f"{attempts[0].line()}; {decision.why}"
    return f"the step failed {len(attempts)} times: " + "; ".join(a.line() for a in attempts) + \
        f"; {decision.why}"


def run(command: Sequence[str], policy: Policy | None = None, srun_args: Sequence[str] = (),
        bootstrap_args: Sequence[str] = (), environ: Mapping[str, str] | None = None,
        health: Health | None = None, launch: Launch = _step, verbose: bool = False) -> int:
    """Run ``command`` in every task of the job's step, restarting the step as ``policy`` allows;
    returns 0 once an attempt completes, else raises an error that lists every attempt. One line says
    each attempt's end (``verbose``: its srun command line too)."""
    if not command:
        raise ResolutionError("slurm-resolver run needs a command", "slurm-resolver run -- python train.py")
    from .slurmctl import node_health

    ask: Health = health or node_health
    policy = policy or Policy()
    env = snapshot(environ)
    shape = Shape.of(env)
    nodes = policy.first_nodes(shape)
    base = checkpoint_dir(environ=env) / "attempts"
    try:
        return _attempts(command, policy, shape, nodes, srun_args, bootstrap_args, env, ask, launch, verbose, base)
    finally:
        _clean(base)


def _attempts(command: Sequence[str], policy: Policy, shape: Shape, nodes: tuple[str, ...],
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
        ended = launch(argv, _Watch(directory, ask))
        seconds, up, ended_at = time.monotonic() - start, bootstrapped_at(directory), time.time()
        if ended.cut is not None:
            step = _end_step(directory, env.get("SLURM_JOB_ID"))
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
            decision = Decision(None, f"not restarted: run passed on {signal.Signals(ended.passed).name} (the job "
                                      "is ending or warned of its end)")
        else:
            unhealthy = {} if result.kind is Kind.EVERYWHERE else ask(*_asked(shape, nodes, result, left_behind))
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
    bootstrap = [*(["--jobs", args.jobs] if args.jobs else []), "--format", args.format]
    policy = Policy(args.restarts, args.spare_nodes, args.min_nodes)
    verbose = bool(getattr(args, "verbose", False) or getattr(args, "debug", False))
    return run(command, policy, shlex.split(args.srun_args), bootstrap, verbose=verbose)
