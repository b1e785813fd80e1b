"""What the cluster's end-to-end tests share: a node that loses power, and a wait for a condition."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator

import pytest

from ..conftest import TESTCLUSTER


def wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    """Return once ``predicate()`` holds; fail after ``timeout`` seconds, naming ``what``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"{what} did not happen within {timeout} s")


@pytest.fixture
def lose_node2(slurm_cluster: dict[str, str]) -> Iterator[Callable[[bool], float]]:
    """A function that cuts node2's power (``testcluster node-kill``: its slurmd, its slurmstepds and every
    process under them SIGKILLed at once; ``silent``: frozen instead, so that their connections go quiet
    without a FIN or RST, as across a network) and returns when; node2 comes back after the test, whatever
    happens (frozen processes SIGKILLed, slurmd started, node resumed)."""

    def idle() -> bool:  # a job of an earlier loss may stay COMPLETING there for a while after node-start
        out = subprocess.run(["sinfo", "-h", "-N", "-n", "node2", "-o", "%T"], capture_output=True, text=True)
        return out.stdout.strip() == "idle" and not subprocess.run(
            ["squeue", "-h", "-w", "node2"], capture_output=True, text=True).stdout.strip()

    wait_until(idle, 180, "node2 idle, to be lost")

    def lose(silent: bool) -> float:
        died = time.time()
        subprocess.run([str(TESTCLUSTER), "node-kill", *(["--silent"] if silent else []), "node2"], check=True,
                       capture_output=True)
        return died

    try:
        yield lose
    finally:
        subprocess.run([str(TESTCLUSTER), "node-start", "node2"], check=True, capture_output=True)
