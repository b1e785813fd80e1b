"""TensorFlow's native log records kept out of a job's output, and nothing else lost."""

from __future__ import annotations

import subprocess
import sys

import pytest

from slurm_resolver.training.native_logs import kept

from ..conftest import DATA, ROOT

NATIVE = (DATA / "tensorflow_native.txt").read_bytes().splitlines(True)  # one ps_worker job's, TensorFlow 2.21
PYTHON = [b"[chief:0 rank 0 node1 +2.0s] epoch 1/5: loss 0.5323\n",
          b"/opt/app/train.py:12: UserWarning: careful\n", b"  warnings.warn('careful')\n",
          b"Traceback (most recent call last):\n", b'  File "/opt/app/train.py", line 3, in <module>\n',
          b"ValueError: a bad batch\n", b"error: something\n"]


def mixed() -> list[bytes]:
    """The native lines with Python's between records (a record is one write: nothing comes inside it),
    after a record of one line, after a protocol buffer's text, after the CPU-instructions sentence."""
    starts = [i for i, line in enumerate(NATIVE) if line[:1] in b"IWE" and line[1:5] == b"0000"]
    after_text = next(i for i in starts if NATIVE[i - 1] == b"\n")
    after_sentence = next(i for i in starts if NATIVE[i - 1].startswith(b"To enable"))
    lines = list(NATIVE)
    for at in sorted({starts[1], after_sentence, after_text, starts[-1], len(NATIVE)}, reverse=True):
        lines[at:at] = PYTHON
    return lines


def test_level_2_keeps_every_python_line_and_no_native_one() -> None:
    assert list(kept(mixed(), 2)) == PYTHON * 5


def test_level_0_keeps_everything_and_level_1_all_but_info() -> None:
    assert list(kept(mixed(), 0)) == mixed()
    warning = b"W0000 00:00:1795445229.248179   11464 device.cc:1] slow\n"
    assert list(kept([*NATIVE, warning], 1)) == [warning]  # TensorFlow's own default, set when it is imported


def test_an_error_record_stays_unless_it_follows_from_a_missing_driver() -> None:
    error = b"E0000 00:00:1795445228.121264   11094 cuda_platform.cc:52] failed call to cuInit: no device\n"
    other = b"E0000 00:00:1795445228.121264   11094 session.cc:1] the graph is broken\n"
    assert list(kept([error, other], 2)) == [error, other]
    assert list(kept([NATIVE[2 if b"cuda drivers" in NATIVE[2] else 3], error, other], 2)) == [other]


def test_the_older_format_is_a_record_too() -> None:
    old = b"2025-09-17 14:44:05.157831: I external/local_xla/xla/tsl/cuda/cudart_stub.cc:32] Could not find cuda\n"
    assert list(kept([old, PYTHON[0]], 2)) == [PYTHON[0]]


@pytest.mark.parametrize("level, expected", [("2", PYTHON), ("1", PYTHON), ("0", NATIVE[:8] + PYTHON)])
def test_a_process_that_quiets_tensorflow_writes_only_its_own_lines(level: str, expected: list[bytes]) -> None:
    """Through the filter process, until the task leaves with os._exit (the training programs' way out)."""
    code = ("import os, sys\n"
            "from slurm_resolver.training import native_logs\n"
            "native_logs.quiet_tensorflow()\n"
            f"for line in {NATIVE[:8] + PYTHON!r}:\n"
            "    os.write(2, line)\n"
            "native_logs.drain()\n"
            "os._exit(3)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=30, cwd=ROOT,
                         env={"PATH": "/usr/bin:/bin", "TF_CPP_MIN_LOG_LEVEL": level})
    assert out.returncode == 3 and out.stderr.splitlines(True) == expected
