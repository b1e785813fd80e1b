"""``slurm-resolver submit``: the job id, and following the job to its exit code."""

from __future__ import annotations

import functools
import io
from pathlib import Path

import pytest

from slurm_resolver import cli, submission


def test_wait_follows_states_and_returns_the_exit_code() -> None:
    states = iter([[{"JobState": "PENDING", "RunTime": "0", "NodeList": "(null)"}],
                   [{"JobState": "RUNNING", "RunTime": "00:00:01", "NodeList": "node1"}],
                   [{"JobState": "FAILED", "RunTime": "00:00:02", "NodeList": "node1", "ExitCode": "2:0"}]])
    progress = io.StringIO()
    code = submission.wait("7", progress=progress, records=lambda _: next(states), poll=0)
    lines = progress.getvalue().splitlines()
    assert code == 2 and lines[-1] == "job 7 FAILED (exit 2) after 00:00:02: see its output file"
    assert lines[0] == "job 7: PENDING, 0"  # no empty nodes
    killed = [{"JobState": "CANCELLED", "ExitCode": "0:9"}]
    assert submission.wait("8", progress=io.StringIO(), records=lambda _: killed, poll=0) == 137


def test_wait_on_a_purged_job_is_an_error() -> None:
    with pytest.raises(submission.ResolutionError, match="no longer known"):
        submission.wait("9", progress=io.StringIO(), records=lambda _: [], poll=0)


def test_wait_follows_a_job_through_a_slurmctld_that_briefly_does_not_answer() -> None:
    """Not knowing is not "no job": the job is followed on, and said so once; past the timeout, the error."""
    answers: list[object] = [submission.ResolutionError("scontrol show job 10 failed: Unable to contact slurm "
                                                        "controller (connect failure)")] * 2
    answers.append([{"JobState": "COMPLETED", "RunTime": "1", "NodeList": "node1", "ExitCode": "0:0"}])

    def records(job: str) -> list[dict[str, str]]:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[return-value]

    progress = io.StringIO()
    assert submission.wait("10", progress=progress, records=records, poll=0) == 0
    lines = progress.getvalue().splitlines()
    assert lines[0] == ("job 10: its state is unknown for now (scontrol show job 10 failed: Unable to contact slurm "
                        "controller (connect failure)); still following")
    assert lines[1].startswith("job 10 COMPLETED after 1")

    def down(job: str) -> list[dict[str, str]]:
        raise submission.ResolutionError("scontrol show job 11 failed: Unable to contact slurm controller")

    with pytest.raises(submission.ResolutionError, match="Unable to contact"):
        submission.wait("11", timeout=0, progress=io.StringIO(), records=down, poll=0)


def test_wait_says_where_the_output_is_and_copies_each_line_as_it_is_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "slurm-resolver-12.out"
    record = {"JobState": "RUNNING", "RunTime": "00:00:01", "NodeList": "node1", "StdOut": str(out)}
    seen: list[str] = []

    def records(job: str) -> list[dict[str, str]]:
        seen.append(capsys.readouterr().out)  # what the terminal had before this poll
        if len(seen) == 1:
            out.write_text("start\nhalf a li")
        elif len(seen) == 3:
            return [dict(record, JobState="FAILED", ExitCode="3:0", RunTime="00:02:10")]
        return [record]

    progress = io.StringIO()
    assert submission.wait("12", progress=progress, records=records, poll=0) == 3
    assert seen[1:] == ["start\n", ""]  # a whole line at once, the half line only once whole or at the end
    assert capsys.readouterr().out == "half a li"
    lines = progress.getvalue().splitlines()
    assert lines[0] == f"slurm-resolver: output: {out}"
    assert lines[-1] == f"job 12 FAILED (exit 3) after 00:02:10: see {out}"


def test_the_job_id_is_alone_on_stdout_without_wait(monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(submission, "submit", lambda text: "41")
    assert cli.main(["submit", "data_parallel"]) == 0
    assert capsys.readouterr().out == "41\n"


def test_with_wait_the_id_is_a_sentence_on_stderr(monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(submission, "submit", lambda text: "42")
    monkeypatch.setattr(submission, "wait", lambda job, timeout, progress, failure: 0)
    assert cli.main(["submit", "data_parallel", "--wait"]) == 0
    out, err = capsys.readouterr()
    assert out == "" and "submitted batch job 42" in err


def test_quiet_wait_shows_only_the_jobs_output(monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    states = iter([[{"JobState": "RUNNING", "RunTime": "0", "NodeList": "node1"}],
                   [{"JobState": "COMPLETED", "RunTime": "1", "NodeList": "node1", "ExitCode": "0:0"}]])
    monkeypatch.setattr(submission, "submit", lambda text: "43")
    follow = functools.partial(submission.wait, records=lambda job: next(states), poll=0)
    monkeypatch.setattr(submission, "wait", follow)
    assert cli.main(["submit", "data_parallel", "--wait", "-q"]) == 0
    assert capsys.readouterr() == ("", "")


def test_quiet_wait_still_says_a_failed_job_and_where_its_output_is(monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    states = iter([[{"JobState": "RUNNING", "RunTime": "0", "NodeList": "node1", "StdOut": "/nowhere/out-44.txt"}],
                   [{"JobState": "FAILED", "RunTime": "00:00:03", "NodeList": "node1", "ExitCode": "3:0",
                     "StdOut": "/nowhere/out-44.txt"}]])
    monkeypatch.setattr(submission, "submit", lambda text: "44")
    follow = functools.partial(submission.wait, records=lambda job: next(states), poll=0)
    monkeypatch.setattr(submission, "wait", follow)
    assert cli.main(["submit", "data_parallel", "--wait", "-q"]) == 3
    assert capsys.readouterr() == ("", "job 44 FAILED (exit 3) after 00:00:03: see /nowhere/out-44.txt\n")


def test_ctrl_c_stops_following_and_says_the_job_goes_on(monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    def records(job: str) -> list[dict[str, str]]:
        if calls.append(job) or len(calls) > 1:
            raise KeyboardInterrupt
        return [{"JobState": "RUNNING", "RunTime": "0", "NodeList": "node1", "StdOut": "/nowhere/out-45.txt"}]

    calls: list[str] = []
    monkeypatch.setattr(submission, "submit", lambda text: "45")
    monkeypatch.setattr(submission, "wait", functools.partial(submission.wait, records=records, poll=0))
    assert cli.main(["submit", "data_parallel", "--wait", "-q"]) == 130
    assert capsys.readouterr().err.splitlines() == [
        "job 45 goes on: no longer followed (scancel 45 ends it); see /nowhere/out-45.txt",
        "slurm-resolver: interrupted"]
