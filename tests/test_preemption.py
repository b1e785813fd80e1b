"""Time limits and preemption: the warning flag, requeue ids, restart counts, checkpoint directories."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from slurm_resolver.errors import ConfigurationError, EnvironmentVariableError
from slurm_resolver.preemption import Preemption, checkpoint_dir, requeue, requeue_id, restart_count


def test_the_warning_only_sets_a_flag() -> None:
    previous = signal.getsignal(signal.SIGUSR2)
    try:
        preemption = Preemption()
        assert not preemption.requested and not preemption.should_stop()
        os.kill(os.getpid(), signal.SIGUSR2)
        assert preemption.requested and preemption.should_stop() and preemption.received == "SIGUSR2"
    finally:
        signal.signal(signal.SIGUSR2, previous)


def test_with_a_cluster_every_task_answers_the_vote() -> None:
    class Voting:
        def __init__(self) -> None:
            self.votes: list[tuple[str, bool]] = []

        def vote(self, name: str, yes: bool, timeout: float) -> bool:
            self.votes.append((name, yes))
            return True  # another task was warned

    previous = signal.getsignal(signal.SIGUSR2)
    try:
        b = Voting()
        assert Preemption().should_stop(b) is True and b.votes == [("preemption", False)]
    finally:
        signal.signal(signal.SIGUSR2, previous)


def test_an_unknown_signal_is_named() -> None:
    with pytest.raises(ConfigurationError, match="'USR9' is not a signal"):
        Preemption(["USR9"])


@pytest.mark.parametrize("env, expected", [
    ({"SLURM_JOB_ID": "41"}, "41"),
    ({"SLURM_JOB_ID": "43", "SLURM_ARRAY_JOB_ID": "40", "SLURM_ARRAY_TASK_ID": "3"}, "40_3"),  # the element only
])
def test_requeue_names_the_job_or_the_array_element(env: dict[str, str], expected: str) -> None:
    assert requeue_id(env) == expected


def test_requeue_outside_a_job_or_without_scontrol_says_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigurationError, match="SLURM_JOB_ID is not set"):
        requeue({})
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ConfigurationError, match="scontrol is not on PATH") as info:
        requeue({"SLURM_JOB_ID": "41"})
    assert "scontrol requeue 41" in str(info.value.hint)


def test_restart_count() -> None:
    assert restart_count({}) == 0 and restart_count({"SLURM_RESTART_COUNT": "2"}) == 2
    with pytest.raises(EnvironmentVariableError, match="SLURM_RESTART_COUNT"):
        restart_count({"SLURM_RESTART_COUNT": "two"})
    with pytest.raises(EnvironmentVariableError, match="SLURM_ARRAY_TASK_ID"):
        requeue_id({"SLURM_JOB_ID": "4", "SLURM_ARRAY_JOB_ID": "3", "SLURM_ARRAY_TASK_ID": "x"})


def test_the_checkpoint_directory_survives_requeues(tmp_path: Path) -> None:
    env = {"SLURM_JOB_ID": "41", "SLURM_SUBMIT_DIR": str(tmp_path), "SLURM_RESTART_COUNT": "1"}
    path = checkpoint_dir(environ=env)
    assert path == tmp_path / "checkpoints-41" and path.is_dir()
    element = {"SLURM_JOB_ID": "43", "SLURM_ARRAY_JOB_ID": "40", "SLURM_ARRAY_TASK_ID": "3"}
    assert checkpoint_dir(tmp_path / "scratch", element) == tmp_path / "scratch" / "checkpoints-40_3"
