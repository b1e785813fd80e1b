"""The one seam to Slurm's controller: pyslurm where it is installed, else Slurm's command line.

Every call to ``scontrol`` or ``sbatch`` and every use of pyslurm goes through this module.
pyslurm (which needs Slurm 25.11) is tried first for what it can do; any failure of it
falls back to the command line, which is the tested path. Nothing here runs on the
start-up path of a task, except `node_addresses()` where a node name does not resolve (the address
rule is `slurm_resolver.addresses`'s, for every caller).
"""

from __future__ import annotations

import logging
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .errors import AddressError, ConfigurationError, ResolutionError
from .hostlists import collapse

__all__: list[str] = []  # internal: no public names (docs/reference.md)

log = logging.getLogger("slurm_resolver")


def pyslurm() -> Any | None:
    """The pyslurm module, or None where it is not installed."""
    try:
        import pyslurm as module
    except ImportError:
        return None
    return module


def command(name: str) -> str:
    """The path of Slurm's command ``name``; an error says how to get it."""
    path = shutil.which(name)
    if path is None:
        raise ConfigurationError(f"{name} is not on PATH", "run on a Slurm login node, or install Slurm's client")
    return path


def run(args: Sequence[str], timeout: float, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run a Slurm command (``args[0]`` is looked up on PATH) and return its result.

    A command that does not answer within ``timeout`` is an error naming it.
    """
    try:
        return subprocess.run([command(args[0]), *args[1:]], input=stdin, capture_output=True, text=True,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise ConfigurationError(f"{' '.join(args[:3])} did not answer within {timeout:g} s",
                                 "check that slurmctld is reachable (scontrol ping)") from None


_FIELD_START = re.compile(r"\s+(?=[A-Za-z][\w.:/\[\]-]*=)")


def parse_records(text: str) -> list[dict[str, str]]:
    """``scontrol show ... -o`` output as one dict per line.

    A value runs to the next ``Key=``, spaces included (``Reason=Not responding``,
    ``OS=Linux 6.1.0 #1 SMP``); words before the first key are dropped.

    >>> parse_records("NodeName=node1 NodeAddr=10.0.0.1 Reason=Not responding\\n")
    [{'NodeName': 'node1', 'NodeAddr': '10.0.0.1', 'Reason': 'Not responding'}]
    """
    return [dict(part.split("=", 1) for part in _FIELD_START.split(line.strip()) if "=" in part)
            for line in text.splitlines() if line.strip()]


def _addresses_from_pyslurm(names: Sequence[str]) -> dict[str, str] | None:
    module = pyslurm()
    if module is None:
        return None
    try:
        nodes = module.Nodes.load()
        return {n: nodes[n].address for n in names if n in nodes}
    except Exception as exc:  # noqa: BLE001 - any pyslurm failure falls back to scontrol
        log.debug("pyslurm could not load nodes (%s); asking scontrol", exc)
        return None


def node_addresses(names: Sequence[str], timeout: float = 10.0) -> dict[str, str]:
    """The ``NodeAddr`` of each of ``names`` (one call for all of them): what `addresses.address_map` asks
    where a name does not resolve; a task's address is that rule's, never this alone."""
    found = _addresses_from_pyslurm(names)
    if found is not None and all(n in found for n in names):
        return found
    if shutil.which("scontrol") is None:
        raise AddressError(
            f"node names {collapse(list(names))} do not resolve, and scontrol is not on PATH to ask "
            "Slurm for their NodeAddr",
            "add the nodes to DNS or /etc/hosts, or run where scontrol is available",
        )
    try:
        out = run(["scontrol", "show", "node", "-o", collapse(list(names))], timeout)
    except ConfigurationError as exc:
        raise AddressError(exc.message, exc.hint) from None
    return {r["NodeName"]: r["NodeAddr"] for r in parse_records(out.stdout) if "NodeName" in r and r.get("NodeAddr")}


def submit(text: str) -> str:
    """Submit an sbatch script; returns the job id."""
    module = pyslurm()
    if module is not None:
        try:
            return str(module.JobSubmitDescription(script=text).submit())
        except Exception as exc:  # noqa: BLE001 - any pyslurm failure falls back to sbatch
            log.debug("pyslurm could not submit (%s); using sbatch", exc)
    out = run(["sbatch", "--parsable"], 120, stdin=text)
    if out.returncode != 0:
        said = (out.stderr.strip() or out.stdout.strip()).splitlines() or ["(no message)"]
        last = said[-1].removeprefix("sbatch: ")  # sbatch ends with the line that says why
        raise ConfigurationError(f"sbatch refused the job: {last}", _submit_hint("\n".join(said)))
    return out.stdout.strip().split(";")[0]


_UNREACHABLE = ("configuration source", "configuration file", "slurm.conf", "unable to contact slurm controller",
                "connection refused", "socket timed out", "zero bytes were transmitted", "authentication", "munge")


def _submit_hint(said: str) -> str:
    """Where to look when sbatch fails: Slurm's configuration and controller, or the script.

    >>> _submit_hint("sbatch: error: Could not establish a configuration source").split(":")[0]
    "Slurm's client finds no controller"
    """
    if any(words in said.lower() for words in _UNREACHABLE):
        return ("Slurm's client finds no controller: set SLURM_CONF to the cluster's slurm.conf or run on a "
                "login node; check with scontrol ping")
    return "the message is sbatch's; check the script with slurm-resolver render TEMPLATE --set ..."


def job_records(job_id: str) -> list[dict[str, str]]:
    """``scontrol show job -o`` as one dict per record (one per het component); [] once purged.

    Any other failure (slurmctld unreachable, a command that hangs) is a `ResolutionError`
    naming it: not knowing is not "no job".
    """
    out = run(["scontrol", "show", "job", "-o", job_id], 30)
    if out.returncode == 0:
        return parse_records(out.stdout)
    said = (out.stderr or out.stdout).strip()
    if "invalid job id" in said.lower():
        return []
    raise ResolutionError(f"scontrol show job {job_id} failed: {said[:300] or f'exit code {out.returncode}'}",
                          "check that slurmctld is reachable (scontrol ping)")


def requeue(job_id: str) -> None:
    """``scontrol requeue JOB``: Slurm ends the job and runs it again."""
    if shutil.which("scontrol") is None:
        raise ConfigurationError(
            "scontrol is not on PATH, so this job cannot requeue itself (a container without Slurm's client?)",
            "mount Slurm's client into the container, or requeue from outside: scontrol requeue " + job_id)
    out = run(["scontrol", "requeue", job_id], 30)
    if out.returncode != 0:
        raise ConfigurationError(f"scontrol requeue {job_id} failed: {out.stderr.strip() or out.stdout.strip()}",
                                 "the job must allow it (#SBATCH --requeue, JobRequeue=1 in slurm.conf)")


def cancel_step(step: str, timeout: float = 10.0) -> str | None:
    """``scancel JOB.STEP`` (SIGKILL to what is left of the step on every node that answers; a step's owner
    may): None where Slurm took it, else why not (logged by the caller, never raised)."""
    try:
        out = run(["scancel", "--quiet", step], timeout)
    except ConfigurationError as exc:  # not on PATH, or no answer
        return exc.message
    return None if out.returncode == 0 else (out.stderr or out.stdout).strip()[:300] or f"exit code {out.returncode}"


_BAD_STATES = ("DOWN", "DRAIN", "FAIL", "NOT_RESPONDING", "POWER_DOWN", "POWERED_DOWN", "POWERING_DOWN",
               "REBOOT_ISSUED", "FUTURE")


def unhealthy(record: dict[str, str]) -> str | None:
    """Why Slurm's record of a node (``scontrol show node -o``) says it cannot run tasks; None if it can.

    >>> unhealthy({"NodeName": "n2", "State": "DOWN*+DRAIN", "Reason": "Not responding"})
    'Slurm marks it DOWN*+DRAIN (Not responding)'
    >>> unhealthy({"NodeName": "n1", "State": "ALLOCATED"}) is None
    True
    """
    state = record.get("State", "")
    flags = state.replace("*", "+NOT_RESPONDING").split("+")
    if not any(flag.startswith(_BAD_STATES) for flag in flags):
        return None
    reason = record.get("Reason", "").split(" [")[0].strip()
    return f"Slurm marks it {state}" + (f" ({reason})" if reason and reason != "none" else "")


def _probe(record: dict[str, str], timeout: float) -> str | None:
    """Why the node's slurmd does not answer within ``timeout`` seconds; None if it does.

    A connection alone proves nothing: the kernel of a node whose slurmd is frozen (or hangs) still
    completes it, and holds it unaccepted. So the probe sends an empty message (it ends its side at
    once) and waits for the slurmd to end the connection, which a living slurmd does at once (it reads
    the empty message and closes: one "Zero Bytes were transmitted" error line in its log); a dead
    node refuses the connection or never completes it. The slurmd is asked at its ``NodeAddr``, where Slurm
    itself reaches it (a task's server is at the address `addresses.address_map` gives, which may differ).
    """
    address, port = record.get("NodeAddr") or record.get("NodeName", ""), record.get("Port", "6818")
    deadline = time.monotonic() + timeout
    try:
        with socket.create_connection((address, int(port)), timeout=timeout) as connection:
            connection.shutdown(socket.SHUT_WR)
            while True:
                connection.settimeout(max(0.01, deadline - time.monotonic()))
                if not connection.recv(4096):
                    return None  # the slurmd read the empty message and closed its end: it lives
    except (OSError, ValueError) as exc:
        why = f"nothing within {timeout:g} s" if isinstance(exc, TimeoutError) else \
            getattr(exc, "strerror", None) or str(exc)
        return f"its slurmd does not answer at {address}:{port} ({why})"


def node_health(names: Sequence[str], probe: Collection[str] = (), timeout: float = 2.0) -> dict[str, str]:
    """Why each of ``names`` that cannot run tasks cannot (a node not in the result can).

    One ``scontrol show node`` for all of them says what Slurm knows (DOWN, DRAIN, not
    responding); the nodes in ``probe`` are also asked directly, since Slurm marks a node whose
    slurmd stopped only after ``SlurmdTimeout``: a slurmd that does not answer an empty message
    within ``timeout`` seconds (`_probe`) is not there.
    """
    if not names:
        return {}
    out = run(["scontrol", "show", "node", "-o", collapse(list(names))], 30)
    records = {r["NodeName"]: r for r in parse_records(out.stdout) if "NodeName" in r}
    if not records:  # scontrol failed: nothing is known of any node, which is no reason to leave one behind
        log.warning("slurm_resolver: scontrol show node %s failed (%s)", collapse(list(names)), out.stderr.strip())
        return {}
    bad: dict[str, str] = {}
    for name in names:
        record = records.get(name)
        why = "Slurm does not know it" if record is None else unhealthy(record)
        if why:
            bad[name] = why
    asked = [records[n] for n in probe if n in records and n not in bad]
    with ThreadPoolExecutor(max_workers=max(1, min(32, len(asked)))) as pool:
        for record, why in zip(asked, pool.map(lambda r: _probe(r, timeout), asked)):
            if why:
                bad[record["NodeName"]] = why
    return bad


def step_records(job_id: str) -> list[dict[str, str]]:
    """``scontrol show step -o JOB`` as one dict per running step of the job (its batch and extern steps
    too); [] where the job runs no step, or is gone. Any other failure is a `ResolutionError`."""
    out = run(["scontrol", "show", "step", "-o", job_id], 30)
    if out.returncode == 0:
        return [r for r in parse_records(out.stdout) if "StepId" in r]
    said = (out.stderr or out.stdout).strip()
    if "invalid job id" in said.lower() or "no steps" in said.lower():
        return []
    raise ResolutionError(f"scontrol show step {job_id} failed: {said[:300] or f'exit code {out.returncode}'}",
                          "check that slurmctld is reachable (scontrol ping)")
