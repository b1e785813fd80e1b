"""faulthandler's dumps read back as stacks: table-driven, and malformed text never raises."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurm_resolver.stacks.capture import Frame
from slurm_resolver.stacks.dumped import read_dump

DUMP = """\
Thread 0x00007f913fb8a6c0 (most recent call first):
  File "/tmp/job.py", line 5 in worker
  File "/usr/lib/python3.11/threading.py", line 982 in run

Current thread 0x00007f91409ccb80 (most recent call first):
  File "/usr/lib/python3.11/re/__init__.py", line 166 in match
  File "/tmp/job.py", line 8 in stuck
  File "/tmp/job.py", line 10 in <module>
"""


@pytest.mark.parametrize("main, names", [
    (None, ["main", "thread 0x7f913fb8a6c0"]),  # the current thread taken for the main one
    (0x7F913FB8A6C0, ["main", "thread 0x7f91409ccb80"]),  # the main thread as the command wrote it
])
def test_a_dump_reads_as_threads_main_first_outermost_frame_first(main: int | None, names: list[str]) -> None:
    stacks = read_dump(DUMP, main)
    assert [s.thread for s in stacks] == names
    current = next(s for s in stacks if s.frames[-1].function == "match")
    assert current.frames == (Frame("/tmp/job.py", 10, "<module>"), Frame("/tmp/job.py", 8, "stuck"),
                              Frame("/usr/lib/python3.11/re/__init__.py", 166, "match"))


def test_the_innermost_frames_are_kept_and_the_rest_counted() -> None:
    deep = "Current thread 0x1 (most recent call first):\n" + "".join(
        f'  File "a.py", line {i} in f{i}\n' for i in range(100)) + "  ...\n"
    (stack,) = read_dump(deep, most=32)
    assert stack.frames[-1] == Frame("a.py", 0, "f0") and len(stack.frames) == 32 and stack.skipped == 69


def test_a_thread_without_python_frames_and_stray_lines() -> None:
    text = "Fatal nothing\nThread 0x2 (most recent call first):\n  <no Python frame>\n  garbage\n"
    assert [(s.thread, s.frames) for s in read_dump(text)] == [("thread 0x2", ())]


@given(st.text(max_size=400))
def test_any_text_reads_without_raising(text: str) -> None:
    for stack in read_dump(text):
        assert all(isinstance(f.line, int) for f in stack.frames)
