"""TensorFlow's native log records, kept out of a training job's output at ``TF_CPP_MIN_LOG_LEVEL``.

TensorFlow 2.16 and later log from C++ through Abseil, and ``TF_CPP_MIN_LOG_LEVEL`` no
longer silences them (tensorflow#100442): oneDNN, CUDA stubs and CPU instructions at every
import, then a server's start, its session options, its cuInit failure on a node without a
GPU, some 30 lines a task. A TensorFlow program of ``slurm_resolver.training`` calls
[quiet_tensorflow][slurm_resolver.training.native_logs.quiet_tensorflow] first: from then on
its stderr goes through a small filter process that drops the native records below the
level, as the variable promises (2 unless set: info and warnings; 0 keeps every line), and
passes every other line on as it comes. The filter outlives the task by the time it takes
to pass on what the task wrote last.
"""

from __future__ import annotations

import atexit
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterable, Iterator, Mapping

from ..environment import export_defaults, snapshot

__all__ = ["quiet_tensorflow", "drain", "kept", "main"]

_SEVERITY = "IWEF"
_RECORD = re.compile(rb"^(?:([IWEF])\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ |\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: ([IWEF]) )"
                     rb"[\w./-]+:\d+\] ")
_BEFORE_INIT = b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
_CONTINUED = re.compile(rb"^(To enable the following instructions: .*|\s*|( *[a-z_][a-z0-9_]* \{)|( *\})|"
                        rb"( *[a-z_][a-z0-9_]*: (\"[^\"]*\"|[\w.+-]+)))\r?\n?$")
"""What follows a record on lines of its own: protocol buffers in text form, an empty line, the
CPU-instructions sentence. Nothing a Python program prints (tracebacks, messages) looks so."""
_NO_DRIVER = b"Could not find cuda drivers"
_CUINIT = b"failed call to cuInit"


def kept(lines: Iterable[bytes], level: int) -> Iterator[bytes]:
    """The lines to pass on: every line but native records of a severity below ``level`` (0 info, 1 warning,
    2 error, 3 fatal) and their continuation lines; and, unless ``level`` is 0, a cuInit error once
    TensorFlow said there is no driver.

    >>> list(kept([b"I0000 00:00:17.004756   11096 port.cc:153] oneDNN custom operations are on.\\n",
    ...            b"Traceback (most recent call last):\\n"], 2))
    [b'Traceback (most recent call last):\\n']
    """
    dropping, no_driver = False, False
    for line in lines:
        record = _RECORD.match(line)
        severity = record and (record.group(1) or record.group(2))
        if line.startswith(_BEFORE_INIT):
            severity = b"I"  # a note on Abseil's set-up, not a warning about the job
        if severity:
            no_driver = no_driver or _NO_DRIVER in line
            dropping = _SEVERITY.index(severity.decode()) < level or bool(level and no_driver and _CUINIT in line)
        elif not (dropping and _CONTINUED.match(line)):
            dropping = False
        if not dropping:
            yield line


def main(argv: list[str] | None = None) -> int:
    """The filter process: standard input to standard output, line by line, until the end of input."""
    for ignored in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(ignored, signal.SIG_IGN)  # the task's signals are the task's: drain until it is gone
    level = int((argv if argv is not None else sys.argv[1:])[0])
    out = sys.stdout.buffer
    for line in kept(sys.stdin.buffer, level):
        out.write(line)
        out.flush()
    return 0


def _level(environ: Mapping[str, str]) -> int:
    text = environ.get("TF_CPP_MIN_LOG_LEVEL", "0").strip()
    return min(int(text), 4) if text.isdigit() else 0


_filter: list[tuple[subprocess.Popen[bytes], int]] = []
"""The filter process of this process, and the stderr it writes to."""


def quiet_tensorflow(environ: Mapping[str, str] | None = None) -> None:
    """Set ``TF_CPP_MIN_LOG_LEVEL=2`` unless it is set, and filter this process's stderr at that level.

    Call it before TensorFlow is imported, and [drain][slurm_resolver.training.native_logs.drain]
    before an ``os._exit`` (a normal exit drains by itself). Level 0 leaves stderr alone.
    """
    export_defaults({"TF_CPP_MIN_LOG_LEVEL": "2"})
    level = _level(snapshot(environ))
    if not level or _filter:
        return
    read, write = os.pipe()
    stderr = os.dup(2)
    sys.stderr.flush()
    process = subprocess.Popen([sys.executable, "-m", __name__, str(level)], stdin=read, stdout=stderr,
                               stderr=stderr, close_fds=True)
    os.close(read)
    os.dup2(write, 2)
    os.close(write)
    _filter.append((process, stderr))
    atexit.register(drain)


def drain(timeout: float = 2.0) -> None:
    """Give stderr back to this process and let the filter pass on what is left (at most ``timeout`` s)."""
    if not _filter:
        return
    process, stderr = _filter.pop()
    sys.stderr.flush()
    os.dup2(stderr, 2)  # closes the pipe's last writer: the filter reads to its end and exits
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        pass


if __name__ == "__main__":
    sys.exit(main())
