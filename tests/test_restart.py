"""`slurm-resolver run` without a cluster: a fake launcher plays each attempt's tasks, writing their outcomes."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path

import pytest

from slurm_resolver.attempts import RestartPolicy
from slurm_resolver.cli import main
from slurm_resolver.errors import ResolutionError
from slurm_resolver.faults import Cause, Fault
from slurm_resolver.outcome import Outcome, mark_bootstrapped, write
from slurm_resolver.restart import run
from slurm_resolver.srun_step import Ended, Stuck

RAISED = "exited with code 1: ValueError: a bad batch"


@pytest.fixture
def job(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    """A job of three nodes, two tasks each; run's own variables restored after the test."""
    for name in ("SLURM_RESOLVER_OUTCOMES", "SLURM_RESOLVER_ATTEMPT", "SLURM_RESOLVER_FAILED_AT"):
        monkeypatch.setenv(name, "")
    return {"SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "n[1-3]", "SLURM_TASKS_PER_NODE": "2(x3)",
            "SLURM_SUBMIT_DIR": str(tmp_path)}


def killed(rank: int) -> Outcome:
    return Outcome(f"worker:{rank} (rank {rank})", Fault(Cause.EXITED, "exited with signal 9 (SIGKILL)", -9, rank,
                                                         f"n{rank // 2 + 1}", time.time()))


def failed(rank: int) -> Outcome:
    return Outcome(f"worker:{rank} (rank {rank})", Fault(Cause.EXITED, RAISED, 1, rank, f"n{rank // 2 + 1}",
                                                         time.time()))


def gone(*ranks: int) -> list[Outcome]:
    deaths = tuple(Fault(Cause.CRASHED, f"worker:{r} (rank {r}) died", 0, r, f"n{r // 2 + 1}") for r in ranks)
    return [Outcome("worker:0 (rank 0)", Fault(Cause.LEFT, "stopped", -15, 0, "n1", time.time()), deaths)]


class Launcher:
    """Plays one attempt per call: writes its outcomes (and rank 0's bootstrap mark), returns srun's code.
    With ``hangs``, srun does not end by itself once the outcomes are written (a node lost with its
    slurmstepd): it waits, asking run's watch, until the watch says why the step cannot end."""

    def __init__(self, attempts: list[list[Outcome] | None], signalled: int | None = None, hangs: bool = False
                 ) -> None:
        self.attempts = attempts
        self.argvs: list[list[str]] = []
        self.signalled = signalled
        self.hangs = hangs
        self.cuts: list[str | None] = []

    def __call__(self, argv: Sequence[str], stuck: Stuck) -> Ended:
        self.argvs.append(list(argv))
        directory = Path(os.environ["SLURM_RESOLVER_OUTCOMES"])
        assert os.environ["SLURM_RESOLVER_ATTEMPT"] == str(len(self.argvs))
        mark_bootstrapped(directory, time.time(), str(len(self.argvs) - 1))
        outcomes = self.attempts[len(self.argvs) - 1]
        for outcome in outcomes or []:
            write(outcome, directory)
        cut = None
        if self.hangs and outcomes:
            deadline = time.monotonic() + 30
            while (cut := stuck()) is None and time.monotonic() < deadline:
                time.sleep(0.01)
            assert cut is not None, "run's watch never said why the step could not end"
        self.cuts.append(cut)
        return Ended(-9 if cut else 0 if outcomes is None else 1, self.signalled, cut)


def healthy(names: Sequence[str], probe: Collection[str]) -> Mapping[str, str]:
    return {}


def down(node: str) -> Callable[[Sequence[str], Collection[str]], Mapping[str, str]]:
    return lambda names, probe: {node: "its slurmd does not answer"} if node in probe else {}


def test_a_killed_task_is_restarted_on_the_same_nodes(job: dict[str, str], capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    launch = Launcher([[killed(3)] + gone(3), None])
    assert run(["python", "train.py"], RestartPolicy(3, 1), environ=job, health=healthy, launch=launch) == 0
    assert [a[4] for a in launch.argvs] == ["--nodelist=n[1-2]"] * 2
    assert launch.argvs[0][:4] == ["srun", "--nodes=2", "--ntasks=4", "--ntasks-per-node=2"]
    assert launch.argvs[0][-5:] == ["slurm_resolver", "bootstrap", "--", "python", "train.py"]
    err = capsys.readouterr().err
    assert "attempt 1 on n[1-2] (" in err and "worker:3 (rank 3): its command exited with signal 9 (SIGKILL); " \
        "restart 1 of 3 on n[1-2] (the same nodes)" in err
    assert "srun" not in err, "the srun line is said only with -v"
    final = err.splitlines()[-1]
    assert final.startswith("slurm-resolver run: completed: attempt 2 on n[1-2] (") and "restarted in " in final
    assert final.endswith("after 1 restart(s)") and err.count("SIGKILL") == 1


def test_the_srun_line_is_said_with_verbose_readably(job: dict[str, str], capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    assert run(["python", "-c", "raise ValueError('no')"], environ=job, health=healthy, launch=Launcher([None]),
               verbose=True) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("slurm-resolver run: attempt 1 on n[1-3]: srun --nodes=3 --ntasks=6")
    assert err[0].endswith(""" -- python -c "raise ValueError('no')\"""") and len(err) == 2
    assert err[1].startswith("slurm-resolver run: completed: attempt 1 on n[1-3] (") and err[1].endswith(" s)")


def test_a_lost_node_is_left_for_the_spare(job: dict[str, str]) -> None:
    launch = Launcher([gone(2, 3), None])
    assert run(["train"], RestartPolicy(3, 1), environ=job, health=down("n2"), launch=launch) == 0
    assert [a[4] for a in launch.argvs] == ["--nodelist=n[1-2]", "--nodelist=n[1,3]"]


def test_an_exception_on_every_task_is_not_restarted_and_said_once(job: dict[str, str], tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    launch = Launcher([[failed(r) for r in range(6)], None])
    with pytest.raises(ResolutionError) as info:
        run(["train"], RestartPolicy(3), environ=job, health=healthy, launch=launch)
    assert len(launch.argvs) == 1
    assert info.value.message.startswith("attempt 1 on n[1-3] (")
    assert f"every task's command {RAISED}" in info.value.message and info.value.message.count("ValueError") == 1
    assert info.value.message.endswith("; not restarted: the program's own error (a restart would fail the same way)")
    assert len(info.value.one_line()) < 250
    assert capsys.readouterr().err == "", "the error is the one line run ends with"
    assert not (tmp_path / "checkpoints-42").exists(), "nothing left behind by a program that never checkpoints"


def test_a_node_that_loses_power_is_left_without_waiting_for_srun(job: dict[str, str], monkeypatch: pytest.MonkeyPatch
                                                                  ) -> None:
    cancelled: list[str] = []
    monkeypatch.setattr("slurm_resolver.slurmctl.cancel_step", lambda step: cancelled.append(step))
    launch = Launcher([gone(2, 3), None], hangs=True)
    probed: list[set[str]] = []

    def health(names: Sequence[str], probe: Collection[str]) -> Mapping[str, str]:
        probed.append(set(probe))
        return down("n2")(names, probe)

    assert run(["train"], RestartPolicy(3, 1), environ=job, health=health, launch=launch) == 0
    assert launch.cuts[0] == "n2: its slurmd does not answer" and cancelled == ["42.0"]
    assert probed == [{"n2"}, {"n3"}], "n2 probed once (a lost node's probe waits for its timeout), then the spare"
    assert launch.argvs[0][4] == "--nodelist=n[1-2]" and "--overlap" not in launch.argvs[0]
    assert launch.argvs[1][4:6] == ["--nodelist=n[1,3]", "--overlap"], "the dead step's CPUs do not hold it"


def test_a_step_that_does_not_end_after_a_death_is_ended(job: dict[str, str], monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    monkeypatch.setattr("slurm_resolver.srun_step.ENDS_WITHIN", 0.2)
    monkeypatch.setattr("slurm_resolver.slurmctl.cancel_step", lambda step: None)
    launch = Launcher([[killed(3)] + gone(3), None], hangs=True)
    assert run(["train"], RestartPolicy(3), environ=job, health=healthy, launch=launch) == 0
    assert launch.cuts[0] == "srun did not end within 0.2 s of the death its tasks recorded"


def test_exhausted_restarts_list_every_attempt(job: dict[str, str]) -> None:
    launch = Launcher([[killed(1)], [killed(3)], [killed(5)]])
    with pytest.raises(ResolutionError) as info:
        run(["train"], RestartPolicy(2), environ=job, health=healthy, launch=launch)
    message = info.value.message
    assert message.startswith("the step failed 3 times: attempt 1 on n[1-3]")
    for number, rank in ((1, 1), (2, 3), (3, 5)):
        assert f"attempt {number} on n[1-3] (" in message and f"worker:{rank} (rank {rank}): its command" in message
    assert message.endswith("restarts exhausted (--restarts 2)") and len(launch.argvs) == 3
    assert info.value.hint == "each attempt's output is above"


def test_a_step_that_ends_after_a_signal_is_not_restarted(job: dict[str, str]) -> None:
    import signal

    launch = Launcher([[killed(3)], None], signalled=signal.SIGUSR2)
    with pytest.raises(ResolutionError, match="not restarted: run passed on SIGUSR2"):
        run(["train"], RestartPolicy(3), environ=job, health=healthy, launch=launch)


def test_the_command_line_outside_a_job(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
                                        ) -> None:
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    assert main(["run", "--", "true"]) == 1
    assert "SLURM_JOB_ID is not set" in capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:  # a usage error, as argparse's own
        main(["run"])
    assert usage.value.code == 2 and "run needs a command" in capsys.readouterr().err


def test_the_watch_asks_only_about_vanished_tasks_nodes_once_each(tmp_path: Path) -> None:
    from slurm_resolver.srun_step import Watch

    asked: list[list[str]] = []

    def health(names: Sequence[str], probe: Collection[str]) -> Mapping[str, str]:
        asked.append(list(names))
        return {"n2": "its slurmd does not answer"} if "n2" in probe else {}

    watch = Watch(tmp_path, health, within=60)
    mark_bootstrapped(tmp_path, time.time(), "0")
    assert watch() is None and asked == [], "no death recorded: nothing to ask"
    write(killed(1), tmp_path)
    assert watch() is None and asked == [], "a task killed on a living node: srun ends by itself"
    write(gone(5)[0], tmp_path)  # rank 5 on n3 vanished
    assert watch() is None and asked == [["n3"]]
    assert watch() is None and asked == [["n3"]], "asked once"
    write(Outcome("worker:1 (rank 1)", Fault(Cause.LEFT, "stopped", 0, 1, "n1"),
                  (Fault(Cause.SILENT, "worker:3 died", 0, 3, "n2"),)), tmp_path)
    assert watch() == "n2: its slurmd does not answer" and asked == [["n3"], ["n2"]]
