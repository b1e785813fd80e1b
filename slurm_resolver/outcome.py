"""What a supervised task's command came to: one small record, written where ``slurm-resolver run`` reads it.

``slurm-resolver bootstrap -- CMD`` writes an `Outcome` into the directory named by
``SLURM_RESOLVER_OUTCOMES`` (``run`` gives each attempt its own) when the command did not
simply succeed: a task whose command failed or was killed writes its own, and one task
that stopped its command because peers died (the lowest rank it knows alive) writes the
deaths it heard of. ``run`` reads them to tell a death (restart) from the program's own
failure (do not), on each `Fault`'s cause and status. Every record is bounded: a few lines of
text, at most `HEARD` deaths.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .faults import Cause, Fault

__all__ = ["Outcome", "Recording", "write", "read_all", "mark_bootstrapped", "bootstrapped_at",
           "bootstrapped_step", "mark_step", "HEARD"]

log = logging.getLogger("slurm_resolver")

HEARD = 16
"""The most deaths one record names (the first ones heard)."""

_TEXT = 400
_FILE = 64 * 1024
_BOOTSTRAPPED = "bootstrapped"
_STEP = "step"


_OLD_ENDINGS = {"failed": Cause.EXITED, "killed": Cause.EXITED, "stopped": Cause.LEFT}
"""What a record of an older version, which said how its command ended (``ending``) and no cause, says."""


@dataclass(frozen=True)
class Outcome:
    """What one task's command came to: its task's own `Fault`, and the deaths it heard of.

    Attributes:
        task: how messages name the task that writes it (``worker:3 (rank 3) on node2``).
        fault: how its command ended, typed: its rank and node; its cause (`Cause.EXITED`: a code, or a
            signal its task did not send, `Fault.killed`; `Cause.UNSTARTED`; `Cause.LEFT`: its task stopped
            it because a peer died); its status (the exit code, or minus the signal); its words, one line
            (``exited with code 1: ValueError: a bad batch``); ``at``: when it ended, or a death was heard
            (``time.time()``); ``oom``: the kernel's OOM killer ended it.
        heard: peers found dead while the command ran (at most `HEARD`), each with its cause.
    """

    task: str
    fault: Fault
    heard: tuple[Fault, ...] = ()

    def __post_init__(self) -> None:
        if self.fault.rank is None or any(d.rank is None for d in self.heard):
            raise ValueError("an outcome names the task of every fault (Fault.of)")

    @property
    def rank(self) -> int:
        """The task that writes it."""
        return self.fault.rank or 0  # never None: checked when made

    def as_json(self) -> str:
        """The record as one JSON line (text bounded, deaths bounded)."""
        own = self.fault
        return json.dumps({"rank": self.rank, "node": own.node[:_TEXT], "task": self.task[:_TEXT],
                           "cause": own.cause.value, "status": own.status, "reason": own.words[:_TEXT],
                           "oom": own.oom, "at": own.at,
                           "heard": [[d.rank, d.node[:_TEXT], d.words[:_TEXT], d.cause.value, d.status, d.at]
                                     for d in self.heard[:HEARD]]})

    @classmethod
    def from_json(cls, text: str) -> Outcome:
        """The record of `as_json()`, or of an older version (no causes: its ``ending`` says its own, and a
        death heard reads as `Cause.REPORTED`); ``ValueError`` for anything else."""
        data: Any = json.loads(text)
        try:
            cause = Cause(data["cause"]) if "cause" in data else _OLD_ENDINGS[data["ending"]]
            heard = tuple(Fault(Cause(rest[0]) if rest else Cause.REPORTED, str(w), int(rest[1]) if rest else 0,
                                int(r), str(n), float(rest[2]) if rest else 0.0)
                          for r, n, w, *rest in data["heard"][:HEARD])
            own = Fault(cause, str(data["reason"]), int(data["status"]), int(data["rank"]), str(data["node"]),
                        float(data["at"]), bool(data["oom"]))
            return cls(str(data["task"]), own, heard)
        except (KeyError, TypeError, IndexError, OverflowError) as exc:
            raise ValueError(f"not an outcome: {exc!r}") from None


def _write_file(path: Path, text: str) -> None:
    """Write ``text`` at ``path`` whole or not at all (a reader never sees half of it)."""
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_text(text)
    os.replace(partial, path)


def write(outcome: Outcome, directory: Path) -> None:
    """Record ``outcome`` in ``directory`` (``rank-<rank>.json``); a failure to write is logged, not raised:
    the task's own exit status still tells its launcher that it failed."""
    try:
        _write_file(directory / f"rank-{outcome.rank}.json", outcome.as_json())
    except OSError as exc:
        log.warning("slurm_resolver: cannot record this task's outcome in %s (%s)", directory, exc.strerror)


def read_all(directory: Path) -> dict[int, Outcome]:
    """Every outcome recorded in ``directory``, by rank (a malformed or oversized record is skipped)."""
    found: dict[int, Outcome] = {}
    for path in sorted(directory.glob("rank-*.json")) if directory.is_dir() else ():
        try:
            if path.stat().st_size > _FILE:
                raise ValueError("larger than any outcome")
            outcome = Outcome.from_json(path.read_text())
        except (OSError, ValueError) as exc:
            log.warning("slurm_resolver: skipping %s: %s", path, exc)
            continue
        found[outcome.rank] = outcome
    return found


def mark_bootstrapped(directory: Path, at: float, step: str = "") -> None:
    """Record when every task of the attempt was bootstrapped, and its step's id (``SLURM_STEP_ID``: what
    ``run`` cancels where the step cannot end by itself); rank 0 does it."""
    try:
        _write_file(directory / _BOOTSTRAPPED, f"{at:.3f} {step if step.isdigit() else ''}".rstrip() + "\n")
    except OSError as exc:
        log.warning("slurm_resolver: cannot record the bootstrap's time in %s (%s)", directory, exc.strerror)


def _mark(directory: Path) -> list[str]:
    try:
        return (directory / _BOOTSTRAPPED).read_text(encoding="ascii")[:64].split()
    except (OSError, UnicodeDecodeError):
        return []


def bootstrapped_at(directory: Path) -> float | None:
    """When every task of the attempt was bootstrapped; None where nobody recorded it."""
    try:
        return float(_mark(directory)[0])
    except (IndexError, ValueError):
        return None


def mark_step(directory: Path, step: str) -> None:
    """Record the attempt's step id where its bootstrap failed (no task was bootstrapped to record it):
    what ``run`` cancels where the step cannot end by itself."""
    if step.isdigit():
        try:
            _write_file(directory / _STEP, step + "\n")
        except OSError as exc:
            log.warning("slurm_resolver: cannot record the step's id in %s (%s)", directory, exc.strerror)


def bootstrapped_step(directory: Path) -> str | None:
    """The attempt's step id (``SLURM_STEP_ID``), as rank 0 recorded it (`mark_bootstrapped()`, else
    `mark_step()`); None where nobody did."""
    words = _mark(directory)
    if len(words) > 1 and words[1].isdigit():
        return words[1]
    try:
        step = (directory / _STEP).read_text(encoding="ascii")[:32].strip()
    except (OSError, UnicodeDecodeError):
        return None
    return step if step.isdigit() else None


@dataclass(frozen=True)
class Recording:
    """Where ``run`` asks an attempt's tasks to record their outcomes, and which attempt it is.

    It travels in the tasks' environment (`variables()` writes it, `of()` reads it back):
    ``SLURM_RESOLVER_OUTCOMES``, ``SLURM_RESOLVER_ATTEMPT`` (1 for the first) and, from the
    second attempt on, ``SLURM_RESOLVER_FAILED_AT`` (when the attempt before failed).

    >>> Recording.of(Recording(Path("/x/2"), 2, 1700000000.5).variables())
    Recording(directory=PosixPath('/x/2'), attempt=2, failed_at=1700000000.5)
    """

    directory: Path
    attempt: int = 1
    failed_at: float | None = None

    def variables(self) -> dict[str, str]:
        """The variables that carry it."""
        return {"SLURM_RESOLVER_OUTCOMES": str(self.directory), "SLURM_RESOLVER_ATTEMPT": str(self.attempt),
                "SLURM_RESOLVER_FAILED_AT": "" if self.failed_at is None else f"{self.failed_at:.3f}"}

    @classmethod
    def of(cls, env: Mapping[str, str]) -> Recording | None:
        """The recording that ``env`` asks for; None outside ``run``."""
        from .errors import EnvironmentVariableError
        from .parsing import read_int

        directory = env.get("SLURM_RESOLVER_OUTCOMES")
        if not directory:
            return None
        attempt = read_int(env, "SLURM_RESOLVER_ATTEMPT", 1) if env.get("SLURM_RESOLVER_ATTEMPT") else 1
        text = env.get("SLURM_RESOLVER_FAILED_AT") or ""
        try:
            failed_at = float(text) if text else None
        except ValueError:
            raise EnvironmentVariableError("SLURM_RESOLVER_FAILED_AT", text, "seconds since the epoch, or empty",
                                           "it is slurm-resolver run's own: leave it to run") from None
        return cls(Path(directory), attempt, failed_at)
