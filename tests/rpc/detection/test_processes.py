"""What a task sees of its node's processes, read from the kernel: a real child process running, stopped,
continued and gone; a pid whose start time is another's; a command whose name holds parentheses."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from pathlib import Path

from slurm_resolver.rpc.detection.processes import Process, Seen, _stat, seen


def _process(pid: int) -> Process:
    fields = _stat(pid)
    assert fields is not None
    return Process(pid, int(fields[19]))


def _until(pid: int, state: Seen, process: Process) -> Seen:
    deadline = time.monotonic() + 5
    found = seen(process)
    while found is not state and time.monotonic() < deadline:
        time.sleep(0.02)
        found = seen(process)
    return found


def test_a_process_is_seen_running_stopped_continued_and_gone() -> None:
    child = subprocess.Popen(["sleep", "30"])
    try:
        process = _process(child.pid)
        assert seen(process) is Seen.RUNNING  # asleep in the kernel: alive
        child.send_signal(signal.SIGSTOP)
        assert _until(child.pid, Seen.STOPPED, process) is Seen.STOPPED
        child.send_signal(signal.SIGCONT)
        assert _until(child.pid, Seen.RUNNING, process) is Seen.RUNNING
        child.kill()
        assert _until(child.pid, Seen.GONE, process) is Seen.GONE  # a zombie is gone too
        child.wait()
        assert seen(process) is Seen.GONE
    finally:
        child.kill()
        child.wait()


def test_another_start_is_another_process_and_this_one_is_running() -> None:
    own = Process.own()
    assert seen(own) is Seen.RUNNING and own.started > 0
    assert seen(Process(own.pid, own.started + 1)) is Seen.RUNNING  # itself: whatever it is told
    child = subprocess.Popen(["sleep", "30"])
    try:
        other = _process(child.pid)
        assert seen(Process(other.pid, other.started + 7)) is Seen.UNKNOWN  # a pid used again, or of another namespace
    finally:
        child.kill()
        child.wait()


def test_a_command_named_with_parentheses_and_spaces_is_read_right(tmp_path: Path) -> None:
    sleeper = tmp_path / "x) S (y"  # the kernel's field of the name ends at the last ')'
    shutil.copy(shutil.which("sleep") or "/bin/sleep", sleeper)
    child = subprocess.Popen([str(sleeper), "30"])
    try:
        process = _process(child.pid)
        child.send_signal(signal.SIGSTOP)
        assert _until(child.pid, Seen.STOPPED, process) is Seen.STOPPED
    finally:
        child.kill()
        child.wait()
