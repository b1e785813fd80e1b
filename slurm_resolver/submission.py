"""Submitting and following jobs: pyslurm when installed, else Slurm's command line.

The command line (``sbatch --parsable``, ``scontrol show job -o``) is the tested path;
pyslurm (which needs Slurm 25.11) is used for submission when importable.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from .errors import ConfigurationError, ResolutionError

__all__ = ["submit", "job_records", "wait", "TERMINAL"]

TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
            "BOOT_FAIL", "DEADLINE"}


def _command(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise ConfigurationError(f"{name} is not on PATH", "run on a Slurm login node, or install Slurm's client")
    return path


def _with_pyslurm(text: str) -> str | None:
    try:
        import pyslurm
    except ImportError:
        return None
    try:
        return str(pyslurm.JobSubmitDescription(script=text).submit())
    except Exception:  # noqa: BLE001 - any pyslurm failure falls back to sbatch
        return None


def submit(text: str) -> str:
    """Submit an sbatch script; returns the job id."""
    found = _with_pyslurm(text)
    if found is not None:
        return found
    out = subprocess.run([_command("sbatch"), "--parsable"], input=text, capture_output=True, text=True,
                         timeout=120, check=False)
    if out.returncode != 0:
        raise ConfigurationError(f"sbatch refused the job: {out.stderr.strip() or out.stdout.strip()}",
                                 "check the parameters with `slurm-resolver render`")
    return out.stdout.strip().split(";")[0]


def job_records(job_id: str) -> list[dict[str, str]]:
    """``scontrol show job -o`` as one dict per record (one per het component); [] once purged."""
    out = subprocess.run([_command("scontrol"), "show", "job", "-o", job_id], capture_output=True, text=True,
                         timeout=30, check=False)
    if out.returncode != 0:
        return []
    return [dict(part.split("=", 1) for part in line.split() if "=" in part)
            for line in out.stdout.splitlines() if line.strip()]


def _exit_code(records: list[dict[str, str]]) -> int:
    worst = 0
    for record in records:
        code, _, signal = record.get("ExitCode", "0:0").partition(":")
        value = 128 + int(signal) if signal.isdigit() and int(signal) else int(code or 0)
        worst = max(worst, value)
    if worst == 0 and any(r.get("JobState") != "COMPLETED" for r in records):
        worst = 1
    return worst


def wait(job_id: str, timeout: float = 3600.0, progress: TextIO | None = None,
         records: Callable[[str], list[dict[str, str]]] = job_records, poll: float = 0.5) -> int:
    """Follow a job until it ends, showing state, elapsed time and nodes; print its output.

    Returns the job's exit code (128 + signal where it was killed).
    """
    progress = progress or sys.stderr
    deadline = time.monotonic() + timeout
    shown = ""
    while True:
        found = records(job_id)
        if not found:
            raise ResolutionError(f"job {job_id} is no longer known to slurmctld",
                                  "its record was purged (MinJobAge); look at its output file")
        first = found[0]
        state = first.get("JobState", "?")
        line = f"job {job_id}: {state}, {first.get('RunTime', '?')}, nodes {first.get('NodeList', '-')}"
        if line != shown:
            print(line, file=progress, flush=True)
            shown = line
        if all(r.get("JobState") in TERMINAL for r in found):
            break
        if time.monotonic() > deadline:
            raise ResolutionError(f"job {job_id} did not end within {timeout:g} s (state {state})",
                                  f"follow it with squeue -j {job_id}, or raise --timeout")
        time.sleep(poll)
    output = Path(first.get("StdOut", ""))
    if output.is_file():
        sys.stdout.write(output.read_text())
        sys.stdout.flush()
    return _exit_code(found)
