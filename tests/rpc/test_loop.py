"""A task's event loop thread: coroutines run on it from other threads, and it closes cleanly."""

from __future__ import annotations

import asyncio
import threading

import pytest

from slurm_resolver.rpc.loop import LoopThread


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
