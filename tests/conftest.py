"""Shared fixtures: captured environments, and the real Slurm test cluster.

Tests marked ``slurm`` use the cluster started by ``scripts/testcluster``. They are
never skipped: if the cluster cannot start, they fail with the reason. Every other test reads
nothing of the host it runs on (`_this_host_unread`): no NVIDIA driver, and the test cluster's
node names; tests marked ``gpu`` (tests/gpu/) read the host's GPUs, and only they.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
TESTCLUSTER = ROOT / "scripts" / "testcluster"


def captured(name: str) -> list[dict[str, str]]:
    """The environments of every task of a captured launch (tests/data/env/NAME.jsonl)."""
    with open(DATA / "env" / f"{name}.jsonl") as f:
        return [json.loads(line) for line in f if line.strip()]


def require(module: str) -> None:
    """Import ``module`` or skip; in CI (CI=true) a missing module fails instead."""
    try:
        __import__(module)
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail(f"{module} is not installed, but CI must run this test (scripts/test installs it)")
        pytest.skip(f"{module} is not installed")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that uses the cluster is marked ``slurm`` even where its module forgot to say so:
    ``-m "not slurm"`` then runs exactly the unit tests, and never starts a cluster."""
    for item in items:
        if "slurm_cluster" in getattr(item, "fixturenames", ()) and item.get_closest_marker("slurm") is None:
            item.add_marker(pytest.mark.slurm)


@pytest.fixture(autouse=True)
def _this_host_unread(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A unit test sees the same node wherever it runs: no NVIDIA driver (NVML is never read: a GPU
    node's would split its GPUs among the captured tasks), and only the test cluster's names resolve
    (a GPU node without ``/etc/hosts`` lines for them, or a site whose DNS answers ``n1``, changes
    nothing). Tests on the cluster and those marked ``gpu`` read the host itself. A test that wants
    GPUs says so: a fake ``pynvml`` (tests/fakes) with ``driver_present``, or a ``gpu_devices`` seam.
    A subprocess runs on the same node through `tests.hosts.unit.argv()`."""
    if request.node.get_closest_marker("gpu") or request.node.get_closest_marker("slurm"):
        return
    from .hosts import unit

    unit.enter(monkeypatch.setattr)


def require_command(command: str, installed_by: str) -> None:
    """Find ``command`` on PATH or skip (a GPU node may have no Slurm); in CI (CI=true) a missing one fails."""
    import shutil

    if shutil.which(command) is None:
        if os.environ.get("CI"):
            pytest.fail(f"{command} is not on PATH, but CI must run this test ({installed_by} installs it)")
        pytest.skip(f"{command} is not on PATH ({installed_by} installs it)")


@pytest.fixture(scope="session")
def slurm_cluster() -> dict[str, str]:
    """Bring the test cluster up (or reuse it); export SLURM_CONF. Fails, never skips."""
    result = subprocess.run([str(TESTCLUSTER), "up"], capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        pytest.fail(f"the Slurm test cluster did not start:\n{result.stderr[-4000:]}", pytrace=False)
    exported = subprocess.run([str(TESTCLUSTER), "env"], capture_output=True, text=True).stdout.split()[1:]
    variables = dict(item.split("=", 1) for item in exported)
    os.environ.update(variables)  # SLURM_CONF, and OMPI_MCA_btl=self,tcp (see testcluster env)
    return variables


@pytest.fixture(autouse=True)
def _logging_as_it_was() -> Iterator[None]:
    """The command line run in-process (``main(["-q", ...])``) sets the slurm_resolver logger's level
    and the root's handlers: put them back, so that a later test's warnings still reach caplog."""
    ours, root = logging.getLogger("slurm_resolver"), logging.getLogger()
    level, root_level, handlers = ours.level, root.level, list(root.handlers)
    yield
    ours.setLevel(level)
    root.setLevel(root_level)
    root.handlers[:] = handlers


def _daemons_stopped() -> list[str]:
    """The test cluster's daemons that no longer run, as ``testcluster status`` says (its pid files)."""
    status = subprocess.run([str(TESTCLUSTER), "status"], capture_output=True, text=True)
    return [line.split()[0] for line in status.stdout.splitlines() if line.endswith(" stopped")]


@pytest.fixture(autouse=True)
def _nodes_idle(request: pytest.FixtureRequest) -> None:
    """Before a test that uses the cluster, start again a daemon that a test before it lost (one failure
    is not every later test's), and wait (up to 60 s) for the jobs of the tests before it to end and
    every node to be idle again: Slurm's choice of nodes then starts at node1, as tests expect."""
    if "slurm_cluster" not in request.fixturenames:
        return
    request.getfixturevalue("slurm_cluster")
    stopped = _daemons_stopped()
    if stopped:  # a test before this one lost a daemon (Slurm 22.05's slurmd has died of two launches at once)
        warnings.warn(f"the test cluster's {', '.join(stopped)} stopped before this test: started again", stacklevel=1)
        subprocess.run([str(TESTCLUSTER), "up"], capture_output=True, text=True, timeout=600)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        jobs = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True).stdout.split()
        states = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], capture_output=True, text=True).stdout.split()
        if not jobs and states and all(state == "idle" for state in states):
            return
        time.sleep(0.2)
    warnings.warn(f"the cluster is not idle after 60 s (jobs {jobs}, node states {states}): "
                  "this test may get other nodes than it expects", stacklevel=1)


def json_objects(text: str) -> list[dict[str, Any]]:
    """Every JSON object printed in ``text``, even where srun joined two tasks' lines."""
    decoder = json.JSONDecoder()
    rows, position = [], text.find('{"')
    while position >= 0:
        try:
            row, end = decoder.raw_decode(text, position)
        except ValueError:
            position = text.find('{"', position + 1)
            continue
        rows.append(row)
        position = text.find('{"', end)
    return rows


def in_threads(run: Callable[[int], Any], count: int, timeout: float = 60) -> list[Any]:
    """``run(rank)`` for ranks 0 to ``count - 1``, each on a thread of its own (tasks of one process);
    each result, or the exception it raised."""
    import threading

    results: list[Any] = [None] * count

    def task(rank: int) -> None:
        try:
            results[rank] = run(rank)
        except Exception as exc:  # noqa: BLE001 - collected for the assertions
            results[rank] = exc

    threads = [threading.Thread(target=task, args=(r,)) for r in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    return results


def sbatch_wait(script: Path, *args: str, timeout: float = 120) -> None:
    """Submit ``script`` and wait for the job to end (polling faster than ``sbatch --wait``)."""
    out = subprocess.run(["sbatch", "--parsable", *args, str(script)], capture_output=True, text=True, check=True)
    job = out.stdout.strip().split(";")[0]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True).stdout
        if not state.strip():
            return
        time.sleep(0.25)
    subprocess.run(["scancel", job], capture_output=True)
    raise AssertionError(f"job {job} did not end within {timeout} s")


@pytest.fixture
def run_tasks(slurm_cluster: dict[str, str], tmp_path: Path) -> Callable[..., list[dict[str, Any]]]:
    """Run a Python snippet under a Slurm command; return each task's JSON line, sorted by rank.

    The snippet runs as ``python -c`` with this interpreter; every line it prints that
    starts with ``{`` is collected.
    """

    def run(launcher: list[str], code: str, timeout: float = 120, check: bool = True) -> list[dict[str, Any]]:
        script = tmp_path / "task.py"
        script.write_text(code)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.run([*launcher, sys.executable, str(script)], capture_output=True, text=True,
                              timeout=timeout, env=env, cwd=tmp_path)
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(launcher)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        rows = json_objects(proc.stdout)
        rows.sort(key=lambda r: r.get("truth_rank", r.get("rank") or 0))
        run.last = proc  # type: ignore[attr-defined]
        return rows

    return run
