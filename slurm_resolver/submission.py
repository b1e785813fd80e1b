"""Following a submitted job until it ends: its state, its output, its exit code.

Submission and job records come from `slurm_resolver.slurmctl`, the one seam to Slurm.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from .errors import ResolutionError, SlurmResolverError
from .slurmctl import job_records, submit

__all__ = ["submit", "wait", "TERMINAL"]

TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
            "BOOT_FAIL", "DEADLINE"}
"""Slurm's job states in which a job has ended: ``wait`` returns once every record is in one."""


def _exit_code(records: list[dict[str, str]]) -> int:
    worst = 0
    for record in records:
        code, _, signal = record.get("ExitCode", "0:0").partition(":")
        value = 128 + int(signal) if signal.isdigit() and int(signal) else int(code or 0)
        worst = max(worst, value)
    if worst == 0 and any(r.get("JobState") != "COMPLETED" for r in records):
        worst = 1
    return worst


class _Outputs:
    """The job's output files, followed as they grow: each path said once when first known, each new
    complete line written out as it arrives (an array: each element's file)."""

    def __init__(self, progress: TextIO) -> None:
        self.progress = progress
        self.read: dict[Path, int] = {}

    def learn(self, records: list[dict[str, str]]) -> None:
        for record in _in_order(records):
            path = record.get("StdOut", "")
            if path and Path(path) not in self.read:
                self.read[Path(path)] = 0
                print(f"slurm-resolver: output: {path}", file=self.progress, flush=True)

    def copy(self, whole: bool = False) -> None:
        """Write what the files gained since last time: complete lines (``whole``: everything)."""
        for path, offset in self.read.items():
            try:
                with path.open("rb") as f:
                    f.seek(offset)
                    data = f.read()
            except OSError:
                continue  # not created yet (the job pends), or on a file system not mounted here
            if not whole:
                data = data[:data.rfind(b"\n") + 1]
            if data:
                self.read[path] = offset + len(data)
                sys.stdout.write(data.decode(errors="replace"))
                sys.stdout.flush()

    def named(self) -> str:
        return ", ".join(map(str, self.read)) or "its output file"


def wait(job_id: str, timeout: float = 3600.0, progress: TextIO | None = None,
         records: Callable[[str], list[dict[str, str]]] = job_records, poll: float = 0.5, every: float = 15.0,
         failure: TextIO | None = None) -> int:
    """Follow a job until it ends: its output file's path first, its state, elapsed time and nodes (at
    each change, and every ``every`` seconds), its output as it is written, and one last line with
    the state, exit code, time it ran and output file (on ``failure``, default ``progress``, where the
    job did not complete: ``submit -q --wait`` still says why it failed and where its output is).

    Returns the job's exit code (128 + signal where it was killed).
    """
    progress = progress or sys.stderr
    outputs = _Outputs(progress)
    try:
        return _follow(job_id, timeout, progress, records, poll, every, failure or progress, outputs)
    except KeyboardInterrupt:  # Ctrl-C stops the following, not the job: say so, and where it goes on
        print(f"job {job_id} goes on: no longer followed (scancel {job_id} ends it); see {outputs.named()}",
              file=failure or progress, flush=True)
        raise


def _follow(job_id: str, timeout: float, progress: TextIO, records: Callable[[str], list[dict[str, str]]],
            poll: float, every: float, failure: TextIO, outputs: _Outputs) -> int:
    deadline = time.monotonic() + timeout
    shown: tuple[str, str] = ("", "")
    last, unknown = 0.0, False
    while True:
        try:
            found = records(job_id)
        except SlurmResolverError as exc:  # slurmctld restarting, or briefly unreachable: the job runs on
            if time.monotonic() > deadline:
                raise
            if not unknown:
                print(f"job {job_id}: its state is unknown for now ({exc.message}); still following",
                      file=progress, flush=True)
            unknown, shown = True, ("", "")  # said once; the state is shown again once known
            outputs.copy()
            time.sleep(4 * poll)  # less often than while it answers
            continue
        unknown = False
        if not found:
            raise ResolutionError(f"job {job_id} is no longer known to slurmctld",
                                  f"its record was purged (MinJobAge); look at {outputs.named()}")
        outputs.learn(found)
        first = found[0]
        state, nodes = _states(found), first.get("NodeList", "")
        ended = all(r.get("JobState") in TERMINAL for r in found)
        where = f", nodes {nodes}" if nodes and nodes != "(null)" else ""
        if not ended and ((state, nodes) != shown or time.monotonic() - last >= every):  # a change, or life
            last = time.monotonic()
            print(f"job {job_id}: {state}, {first.get('RunTime', '?')}{where}", file=progress, flush=True)
            shown = (state, nodes)
        outputs.copy()
        if ended:
            break
        if time.monotonic() > deadline:
            raise ResolutionError(f"job {job_id} did not end within {timeout:g} s (state {state})",
                                  f"follow it with squeue -j {job_id} and {outputs.named()}, or raise --timeout")
        time.sleep(poll)
    outputs.copy(whole=True)
    code = _exit_code(found)
    exit_text = f" (exit {code})" if code else ""
    print(f"job {job_id} {state}{exit_text} after {first.get('RunTime', '?')}: see {outputs.named()}",
          file=progress if state == "COMPLETED" and not code else failure, flush=True)
    return code


def _in_order(records: list[dict[str, str]]) -> list[dict[str, str]]:
    """Records in the order of their array element (scontrol lists the newest first)."""
    def element(record: dict[str, str]) -> int:
        task = record.get("ArrayTaskId", "0").partition("-")[0].partition(",")[0].lstrip("[")
        return int(task) if task.isdigit() else 0
    return sorted(records, key=element)


def _states(records: list[dict[str, str]]) -> str:
    """The job's state; for an array, how many elements are in each (``2 RUNNING, 1 PENDING``).

    >>> _states([{"JobState": "RUNNING", "ArrayTaskId": "0"}, {"JobState": "RUNNING", "ArrayTaskId": "1"}])
    'array: 2 RUNNING'
    """
    if not any("ArrayTaskId" in r for r in records):
        return records[0].get("JobState", "?")
    counts = Counter(r.get("JobState", "?") for r in records)
    return "array: " + ", ".join(f"{n} {state}" for state, n in counts.items())
