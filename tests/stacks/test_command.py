"""A task's command seen from its task: its marks through shared memory, its stacks through its own
faulthandler, even while it holds the GIL in C code (a real child process)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from slurm_resolver.stacks.command import PROGRESS_FILE, Watched, marker, not_marked

from ..conftest import ROOT

COMMAND = """
import re, sys, time
sys.path.insert(0, sys.argv[1])
import os
from slurm_resolver.stacks.command import marker
m = marker(os.environ)
m.mark(7)
m.mark()
print("marked", flush=True)
def stuck_in_c():
    re.match(r"(a+)+$", "a" * 40 + "b")  # holds the GIL in C for minutes
stuck_in_c()
"""


def test_a_commands_marks_and_its_stacks_while_it_holds_the_gil() -> None:
    watched = Watched()
    try:
        assert watched.mark() is None and watched.stacks() is None  # nothing marked: never signalled
        child = subprocess.Popen([sys.executable, "-c", COMMAND, str(ROOT)], stdout=subprocess.PIPE, text=True,
                                 env={**os.environ, **watched.environ()})
        try:
            assert child.stdout is not None and child.stdout.readline().strip() == "marked"
            assert watched.mark() == 8
            time.sleep(0.2)
            stacks = watched.stacks()
            assert stacks is not None, "the command's stacks"
            main = stacks[0]
            assert main.thread == "main" and [f.function for f in main.frames][-2:] == ["stuck_in_c", "match"]
            assert child.poll() is None  # the signal did not end it
            again = watched.stacks()
            assert again is not None and again[0].frames == main.frames  # a second dump reads alone
        finally:
            child.kill()
            child.wait()
    finally:
        watched.close()
    assert not os.path.exists(watched.path) and not os.path.exists(watched.dump_path)


def test_no_file_no_marker_and_a_stand_in_for_the_unknown() -> None:
    assert marker({}) is None and marker({PROGRESS_FILE: ""}) is None
    (stand_in,) = not_marked(42)
    assert "pid 42" in stand_in.frames[0].function
