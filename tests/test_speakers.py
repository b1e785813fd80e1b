"""Who speaks for the job, decided in one module on causes: never on a failure's words."""

from __future__ import annotations

import threading
import time

import pytest

from slurm_resolver.errors import ConfigurationError, SlurmResolverError
from slurm_resolver.faults import Cause, Fault
from slurm_resolver.speakers import Speaker, for_a_failed_call, for_a_round, for_deaths, for_unstarted


@pytest.mark.parametrize(("speaker", "says"), [
    (Speaker.TASK, [True, True, True]), (Speaker.FIRST, [True, True, False]), (Speaker.ABOVE, [True, False, False]),
    (Speaker.ANOTHER, [True, False, False]),
])
def test_which_task_says_an_error(speaker: Speaker, says: list[bool]) -> None:
    """Ranks None (no launch), 0 and 3; an error says what its speaker says."""
    assert [speaker.says(rank) for rank in (None, 0, 3)] == says
    assert [SlurmResolverError("x", speaker=speaker).said_by(rank) for rank in (None, 0, 3)] == says


def test_the_lowest_rank_known_alive_speaks_for_the_deaths() -> None:
    dead = {0: Fault(Cause.CRASHED, "worker:0 died"), 1: Fault(Cause.SILENT, "worker:1 stopped beating")}
    assert [for_deaths(rank, 4, dead) for rank in (2, 3)] == [Speaker.TASK, Speaker.ABOVE]


def test_a_lower_rank_that_could_not_start_the_command_speaks_whatever_its_words() -> None:
    news = threading.Event()
    same_words_other_cause = {1: Fault(Cause.REPORTED, "cannot run 'x': No such file or directory")}
    assert for_unstarted(3, same_words_other_cause, news, time.monotonic() + 0.05) is Speaker.TASK
    assert for_unstarted(3, {1: Fault(Cause.UNSTARTED, "anything at all", 127)}, news,
                         time.monotonic() + 1) is Speaker.ABOVE
    assert for_unstarted(0, {1: Fault(Cause.UNSTARTED, "", 127)}, news, time.monotonic() + 1) is Speaker.TASK


def test_one_heard_late_still_speaks_for_the_job() -> None:
    news, dead = threading.Event(), {}
    later = threading.Timer(0.05, lambda: (dead.update({0: Fault(Cause.UNSTARTED, "", 127)}), news.set()))
    later.start()
    assert for_unstarted(2, dead, news, time.monotonic() + 2) is Speaker.ABOVE
    later.join()


def test_a_rounds_failure_is_said_where_it_was_decided() -> None:
    assert (for_a_round(True), for_a_round(False)) == (Speaker.TASK, Speaker.ABOVE)


@pytest.mark.parametrize(("rank", "heard", "first_nodes", "speaker"), [
    (5, Speaker.TASK, [], Speaker.TASK),  # the root answered: this task's own failure
    (5, Speaker.ABOVE, [(0, 1), (2, 3)], Speaker.ABOVE),  # the task above answered and says why
    (2, Speaker.TASK, [(0, 1), (2, 3)], Speaker.TASK),  # the root never answered: the next node's lowest rank
    (5, Speaker.FIRST, [(0, 1), (2, 3)], Speaker.ANOTHER),
    (1, Speaker.TASK, [(0, 1, 2)], Speaker.TASK),  # one node: the root's next task
    (2, Speaker.TASK, [(0, 1, 2)], Speaker.ANOTHER),
])
def test_who_says_a_call_up_the_tree_failed(rank: int, heard: Speaker, first_nodes: list[tuple[int, ...]],
                                            speaker: Speaker) -> None:
    assert for_a_failed_call(rank, heard, first_nodes) is speaker


def test_the_errors_speaker_is_the_speakers_modules() -> None:
    from slurm_resolver import errors

    assert errors.Speaker is Speaker and ConfigurationError("x").speaker is Speaker.TASK
