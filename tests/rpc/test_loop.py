"""The bootstrap's event loop thread: closing it is silent, even with a stream still being read."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from slurm_resolver.rpc.loop import LoopThread


async def _events() -> AsyncIterator[int]:
    """Stands for a watch's stream of events: a generator that awaits, and cleans up as it ends."""
    try:
        while True:
            yield 1
            await asyncio.sleep(10)
    finally:
        await asyncio.sleep(0.01)


async def _watch() -> None:
    async for _ in _events():
        pass


def test_closing_while_a_generator_runs_says_nothing(capfd: pytest.CaptureFixture[str],
                                                     caplog: pytest.LogCaptureFixture) -> None:
    thread = LoopThread()
    thread.loop.call_soon_threadsafe(lambda: thread.loop.create_task(_watch()))
    time.sleep(0.2)
    thread.close()
    assert thread.loop.is_closed()
    err = capfd.readouterr().err
    assert err == "" and caplog.records == []  # asyncio logs "aclose(): ... already running" otherwise
