"""`slurm-resolver run` without a cluster: a fake launcher plays each attempt's tasks, writing their outcomes."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path

import pytest

from slurm_resolver.attempts import Policy
from slurm_resolver.cli import main
from slurm_resolver.errors import ResolutionError
from slurm_resolver.outcome import Death, Ending, Outcome, mark_bootstrapped, write
from slurm_resolver.restart import run

RAISED = "exited with code 1: ValueError: a bad batch"


@pytest.fixture
def job(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    """A job of three nodes, two tasks each; run's own variables restored after the test."""
    for name in ("SLURM_RESOLVER_OUTCOMES", "SLURM_RESOLVER_ATTEMPT", "SLURM_RESOLVER_FAILED_AT"):
        monkeypatch.setenv(name, "")
    return {"SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "n[1-3]", "SLURM_TASKS_PER_NODE": "2(x3)",
            "SLURM_SUBMIT_DIR": str(tmp_path)}


def killed(rank: int) -> Outcome:
    return Outcome(rank, f"n{rank // 2 + 1}", f"worker:{rank} (rank {rank})", Ending.KILLED, -9,
                   "exited with signal 9 (SIGKILL)", at=time.time())


def failed(rank: int) -> Outcome:
    return Outcome(rank, f"n{rank // 2 + 1}", f"worker:{rank} (rank {rank})", Ending.FAILED, 1, RAISED, at=time.time())


def gone(*ranks: int) -> list[Outcome]:
    deaths = tuple(Death(r, f"n{r // 2 + 1}", f"worker:{r} (rank {r}) died") for r in ranks)
    return [Outcome(0, "n1", "worker:0 (rank 0)", Ending.STOPPED, -15, "stopped", heard=deaths, at=time.time())]


class Launcher:
    """Plays one attempt per call: writes its outcomes (and rank 0's bootstrap mark), returns srun's code."""

    def __init__(self, attempts: list[list[Outcome] | None], signalled: int | None = None) -> None:
        self.attempts = attempts
        self.argvs: list[list[str]] = []
        self.signalled = signalled

    def __call__(self, argv: Sequence[str]) -> tuple[int, int | None]:
        self.argvs.append(list(argv))
        directory = Path(os.environ["SLURM_RESOLVER_OUTCOMES"])
        assert os.environ["SLURM_RESOLVER_ATTEMPT"] == str(len(self.argvs))
        mark_bootstrapped(directory, time.time())
        outcomes = self.attempts[len(self.argvs) - 1]
        for outcome in outcomes or []:
            write(outcome, directory)
        return (0 if outcomes is None else 1), self.signalled


def healthy(names: Sequence[str], probe: Collection[str]) -> Mapping[str, str]:
    return {}


def down(node: str) -> Callable[[Sequence[str], Collection[str]], Mapping[str, str]]:
    return lambda names, probe: {node: "its slurmd does not answer"} if node in probe else {}


def test_a_killed_task_is_restarted_on_the_same_nodes(job: dict[str, str], capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    launch = Launcher([[killed(3)] + gone(3), None])
    assert run(["python", "train.py"], Policy(3, 1), environ=job, health=healthy, launch=launch) == 0
    assert [a[4] for a in launch.argvs] == ["--nodelist=n[1-2]"] * 2
    assert launch.argvs[0][:4] == ["srun", "--nodes=2", "--ntasks=4", "--ntasks-per-node=2"]
    assert launch.argvs[0][-5:] == ["slurm_resolver", "bootstrap", "--", "python", "train.py"]
    err = capsys.readouterr().err
    assert "attempt 1 on n[1-2] (" in err and "worker:3 (rank 3): its command exited with signal 9 (SIGKILL); " \
        "restart 1 of 3 on n[1-2] (the same nodes)" in err
    assert "completed after attempt 1" in err and "restarted in " in err.split("completed after")[1]


def test_a_lost_node_is_left_for_the_spare(job: dict[str, str]) -> None:
    launch = Launcher([gone(2, 3), None])
    assert run(["train"], Policy(3, 1), environ=job, health=down("n2"), launch=launch) == 0
    assert [a[4] for a in launch.argvs] == ["--nodelist=n[1-2]", "--nodelist=n[1,3]"]


def test_an_exception_on_every_task_is_not_restarted(job: dict[str, str]) -> None:
    launch = Launcher([[failed(r) for r in range(6)], None])
    with pytest.raises(ResolutionError) as info:
        run(["train"], Policy(3), environ=job, health=healthy, launch=launch)
    assert len(launch.argvs) == 1
    assert "attempt 1 on n[1-3] (" in info.value.message and f"every task's command {RAISED}" in info.value.message
    assert "not restarted: the program failed on every task" in info.value.message


def test_exhausted_restarts_list_every_attempt(job: dict[str, str]) -> None:
    launch = Launcher([[killed(1)], [killed(3)], [killed(5)]])
    with pytest.raises(ResolutionError) as info:
        run(["train"], Policy(2), environ=job, health=healthy, launch=launch)
    message = info.value.message
    assert message.startswith("the step failed 3 time(s): attempt 1 on n[1-3]")
    for number, rank in ((1, 1), (2, 3), (3, 5)):
        assert f"attempt {number} on n[1-3] (" in message and f"worker:{rank} (rank {rank}): its command" in message
    assert message.endswith("restarts exhausted (--restarts 2)") and len(launch.argvs) == 3
    assert "checkpoints-42" in (info.value.hint or "")


def test_a_step_that_ends_after_a_signal_is_not_restarted(job: dict[str, str]) -> None:
    import signal

    launch = Launcher([[killed(3)], None], signalled=signal.SIGUSR2)
    with pytest.raises(ResolutionError, match="not restarted: run passed on SIGUSR2"):
        run(["train"], Policy(3), environ=job, health=healthy, launch=launch)


def test_the_command_line_outside_a_job(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
                                        ) -> None:
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    assert main(["run", "--", "true"]) == 1
    assert "SLURM_JOB_ID is not set" in capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:  # a usage error, as argparse's own
        main(["run"])
    assert usage.value.code == 2 and "run needs a command" in capsys.readouterr().err
