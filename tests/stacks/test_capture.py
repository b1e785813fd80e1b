"""A task's stacks as code paths: every thread's, innermost last, never a variable's value."""

from __future__ import annotations

import threading
import time

from slurm_resolver.stacks.capture import MOST_FRAMES, Frame, ThreadStack, capture


def _deep(n: int, ready: threading.Event, done: threading.Event) -> None:
    if n:
        _deep(n - 1, ready, done)
        return
    secret = "a value no stack may show"  # noqa: F841 - a local the capture must not carry
    ready.set()
    done.wait(10)  # blocked in C (a lock): the thread that asks still can


def test_every_thread_is_taken_by_another_the_main_first_ours_and_the_askers_left_out() -> None:
    ready, done = threading.Event(), threading.Event()
    worker = threading.Thread(target=_deep, args=(3, ready, done), name="loader")
    ours = threading.Thread(target=done.wait, args=(10,), name="slurm-resolver-test")
    worker.start()
    ours.start()
    ready.wait(5)
    try:
        asked: list[tuple[ThreadStack, ...]] = []  # asked by another thread, as the task's server does
        asking = threading.Thread(target=lambda: asked.append(capture()))
        asking.start()
        asking.join(10)
        found = asked[0]
    finally:
        done.set()
        worker.join()
        ours.join()
    names = [s.thread for s in found]
    assert names[0] == "main" and "loader" in names and "slurm-resolver-test" not in names
    loader = next(s for s in found if s.thread == "loader")
    functions = [f.function for f in loader.frames]
    assert functions.count("_deep") == 4 and functions[-1] in ("Event.wait", "Condition.wait")
    assert all(isinstance(f, Frame) and f.line > 0 for f in loader.frames)
    assert "a value no stack may show" not in repr(found)


def test_a_deep_stack_keeps_its_innermost_frames_and_counts_the_rest() -> None:
    ready, done = threading.Event(), threading.Event()
    worker = threading.Thread(target=_deep, args=(MOST_FRAMES + 10, ready, done), name="deep")
    worker.start()
    ready.wait(5)
    try:
        deep = next(s for s in capture() if s.thread == "deep")
    finally:
        done.set()
        worker.join()
    assert len(deep.frames) == MOST_FRAMES and deep.skipped > 10
    assert deep.frames[-1].function in ("Event.wait", "Condition.wait")  # where it waits: kept


def test_a_frame_reads_as_function_then_place() -> None:
    assert str(Frame("train.py", 22, "load_batch")) == "load_batch (train.py:22)"
    assert ThreadStack("main", ()).skipped == 0
    time.sleep(0)
