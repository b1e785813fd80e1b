"""A task's event loop thread: coroutines run on it from other threads, it closes cleanly and silently."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator

import pytest

from slurm_resolver.rpc.network.loop import LoopThread


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


def test_a_failed_bootstrap_raises_from_its_public_frame() -> None:
    """The caller's frame and one of ours, not a walk through the loop thread, futures and the protocol."""
    import traceback

    from slurm_resolver.errors import ConfigurationError
    from slurm_resolver.rpc.bootstrap import bootstrap

    batch = {"SLURM_JOB_ID": "5", "SLURM_PROCID": "0", "SLURMD_NODENAME": "localhost",
             "SLURM_JOB_NODELIST": "localhost", "SLURM_TASKS_PER_NODE": "2", "CUDA_VISIBLE_DEVICES": ""}
    with pytest.raises(ConfigurationError, match="bootstrap runs in every task of a launch") as info:
        bootstrap(environ=batch, timeout=5)
    frames = traceback.extract_tb(info.value.__traceback__)
    assert [frame.name for frame in frames] == ["test_a_failed_bootstrap_raises_from_its_public_frame", "bootstrap"]
    assert frames[-1].line and "#" not in frames[-1].line, frames[-1].line  # the line every user sees: no aside
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_coroutines_run_on_the_loops_thread_and_their_errors_come_back() -> None:
    loop = LoopThread(name="test-loop")

    async def where() -> str:
        return threading.current_thread().name

    async def broken() -> None:
        raise ValueError("inside")

    try:
        assert loop.run(where()) == "test-loop"
        with pytest.raises(ValueError, match="inside"):
            loop.run(broken())
    finally:
        loop.close()
    assert loop.loop.is_closed()
    loop.close()  # closing twice is nothing


def test_running_on_the_loop_from_itself_is_refused_instead_of_hanging() -> None:
    loop = LoopThread()

    async def nested() -> None:
        coroutine = asyncio.sleep(0)
        try:
            loop.run(coroutine)
        finally:
            coroutine.close()

    try:
        with pytest.raises(RuntimeError, match="called from its own loop"):
            loop.run(nested())
    finally:
        loop.close()
