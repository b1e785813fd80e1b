"""Who speaks for the job, decided on causes: never on a failure's words."""

from __future__ import annotations

import threading
import time

from slurm_resolver.errors import Speaker
from slurm_resolver.rpc.messages import Cause, Fault
from slurm_resolver.supervise.speakers import failed_alike_below, failed_as_it_did, speaker


def test_the_lowest_rank_known_alive_speaks_for_the_deaths() -> None:
    dead = {0: Fault(Cause.CRASHED, "worker:0 died"), 1: Fault(Cause.SILENT, "worker:1 stopped beating")}
    assert [speaker(rank, 4, dead) for rank in (2, 3)] == [Speaker.TASK, Speaker.ABOVE]


def test_a_lower_rank_that_could_not_start_the_command_speaks_whatever_its_words() -> None:
    news = threading.Event()
    same_words_other_cause = {1: Fault(Cause.REPORTED, "cannot run 'x': No such file or directory")}
    assert not failed_alike_below(3, same_words_other_cause, news, time.monotonic() + 0.05)
    assert failed_alike_below(3, {1: Fault(Cause.UNSTARTED, "anything at all", 127)}, news, time.monotonic() + 1)
    assert not failed_alike_below(0, {1: Fault(Cause.UNSTARTED, "", 127)}, news, time.monotonic() + 1)


def test_a_command_failed_as_the_peers_did_where_it_exited_alike() -> None:
    exited = Fault(Cause.EXITED, "worker:5 (rank 5): its command exited with code 1: ValueError", 1)
    assert failed_as_it_did(exited, 1) and not failed_as_it_did(exited, 2)
    assert not failed_as_it_did(Fault(Cause.CRASHED, "its command exited with code 1", 1), 1)
