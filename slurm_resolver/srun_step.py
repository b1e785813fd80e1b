"""One attempt's srun, run to its end: the signals ``run`` gets passed on, and the step ended by ``run``
where it cannot end by itself.

srun ends once every node's slurmstepd says that its tasks ended. A node that loses power (its slurmd,
its slurmstepd and its tasks gone at once) never says it: srun would wait for Slurm to mark the node DOWN
(``SlurmdTimeout``, 300 s by default), and after that the dead step would still hold the living nodes'
CPUs. `Watch` reads what the tasks record (`slurm_resolver.outcome`) while srun runs and says when the
step cannot end by itself; `launch()` then SIGKILLs srun and `end()` cancels the step.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .errors import ResolutionError
from .outcome import bootstrapped_step, read_all
from .supervise import FORWARDED

__all__: list[str] = []  # internal: no public names (docs/reference.md)

log = logging.getLogger("slurm_resolver")

Health = Callable[[Sequence[str], Collection[str]], Mapping[str, str]]
"""Why each of the nodes named that cannot run tasks cannot (`slurm_resolver.slurmctl.node_health`), the
second argument's nodes asked directly."""

POLL = 0.25
"""Seconds between two looks at what an attempt's tasks recorded while its srun runs (a file that another
node writes on a shared file system cannot be waited on)."""

ENDS_WITHIN = 10.0
"""Seconds after its tasks recorded a death within which an attempt's srun ends by itself (the living
tasks stop their commands within the bootstrap's grace, 5 s); later, ``run`` ends the step."""

_REREAD = 2.0
"""Seconds after which the watch reads the attempt's records again, changed or not."""


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
"""Asked while srun runs: why its step cannot end by itself, else None."""
Launch = Callable[[Sequence[str], Stuck], Ended]
"""Runs one attempt's srun (its command line) to its end (`launch()`; tests play attempts instead)."""


class Watch:
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
        self.lost: dict[str, str] = {}
        """The nodes found lost, with why (the next attempt's decision need not ask again)."""
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
            if self.since is None and (heard or any(o.fault.killed for o in outcomes.values())):
                self.since = time.monotonic()
            vanished = {node for rank, node in heard.items() if rank not in outcomes} - self.asked
            if vanished:
                self.asked |= vanished
                self.lost.update(self.health(sorted(vanished), vanished))
                if self.lost:
                    return "; ".join(f"{node}: {why}" for node, why in sorted(self.lost.items()))
        if self.since is not None and time.monotonic() - self.since > self.within:
            return f"srun did not end within {self.within:g} s of the death its tasks recorded"
        return None


def launch(argv: Sequence[str], stuck: Stuck) -> Ended:
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


def end(directory: Path, job: str | None) -> str:
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
