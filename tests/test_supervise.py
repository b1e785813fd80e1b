"""``bootstrap -- COMMAND`` supervision: the command ends the task, a peer's death ends the command."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from types import SimpleNamespace

import pytest

from slurm_resolver.errors import ConfigurationError, ResolutionError
from slurm_resolver.supervise import supervise


class Task:
    """The parts of a bootstrapped task that supervision uses."""

    def __init__(self) -> None:
        self.rank = 3
        self.me = SimpleNamespace(job="worker", index=3, node="node2")
        self.callbacks: list[Callable[[int, str], None]] = []
        self.stopped = False

    def on_failure(self, callback: Callable[[int, str], None]) -> None:
        self.callbacks.append(callback)

    def stop(self) -> None:
        self.stopped = True

    def fail(self, why: str) -> None:
        self.failed = why


def test_a_command_that_succeeds_ends_the_task_normally() -> None:
    task = Task()
    assert supervise(task, [sys.executable, "-c", "pass"]) == 0 and task.stopped  # type: ignore[arg-type]


def test_a_peer_death_stops_the_command_and_names_the_peer() -> None:
    task = Task()
    threading.Timer(0.5, lambda: task.callbacks[0](5, "worker:5 (rank 5) on node3 died")).start()
    started = time.monotonic()
    with pytest.raises(ResolutionError) as info:
        supervise(task, [sys.executable, "-c", "import time; time.sleep(60)"], grace=1.0)  # type: ignore[arg-type]
    assert time.monotonic() - started < 5 and task.stopped
    assert "worker:5 (rank 5) on node3 died; stopped this task's command" in info.value.message


def test_a_command_that_cannot_start_is_named_and_a_failure() -> None:
    task = Task()
    with pytest.raises(ConfigurationError, match="cannot run 'no-such-command-xyz'"):
        supervise(task, ["no-such-command-xyz"])  # type: ignore[arg-type]
    assert "worker:3 (rank 3) on node2: cannot run 'no-such-command-xyz'" in task.failed  # the others stop


def test_a_command_that_fails_just_after_a_peer_died_blames_the_peer() -> None:
    """A collective breaks when a peer dies, often before the news of its death arrives."""
    task = Task()
    threading.Timer(0.5, lambda: task.callbacks[0](5, "worker:5 (rank 5) on node3 died")).start()
    with pytest.raises(ResolutionError) as info:
        supervise(task, [sys.executable, "-c", "raise SystemExit(3)"])  # type: ignore[arg-type]
    assert "worker:5 (rank 5) on node3 died; then this task's command" in info.value.message
    assert "exited with code 3" in info.value.message and not hasattr(task, "failed") and task.stopped
