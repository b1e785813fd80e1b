"""The judge's verdict: a hung job's every stack said once, the odd ranks named with their nodes, and the step
failed with the hang's cause."""

from __future__ import annotations

import asyncio
import logging

import pytest

from slurm_resolver.faults import Cause, Fault
from slurm_resolver.rpc.diagnosis.judge import say_where
from slurm_resolver.stacks.classes import Ranks
from slurm_resolver.stacks.progress import Hang, HangKind, Marks

from .test_stacks_call import _job


@pytest.mark.parametrize("kind", [HangKind.STILL, HangKind.LAGGING])
def test_a_hang_is_said_where_every_task_is_then_the_step_fails(kind: HangKind, caplog: pytest.LogCaptureFixture
                                                                ) -> None:
    """A job that stands still names the odd stack's rank (rank 7, in another function); one whose rank 7 lags
    names the ranks behind. Either way the step fails once, as a hang."""
    cluster, handlers = _job()
    marks = Marks(3, Ranks.of([7]), 9, 15)
    failed: list[Fault] = []

    async def fail(fault: Fault) -> None:
        failed.append(fault)

    with caplog.at_level(logging.ERROR, logger="slurm_resolver"):
        asyncio.run(say_where(Hang(kind, 30.0, marks), handlers[0], fail))
    node = cluster.task(7).node
    assert [f.cause for f in failed] == [Cause.HUNG] and f"rank 7 ({node})" in failed[0].words
    assert failed[0].words.startswith("the job hung: ")
    said = caplog.text
    assert "every task's stacks" in said and "sleep_elsewhere" in said and said.count("the job hung") == 1
