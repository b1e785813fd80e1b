"""The DDP job's way out: no interpreter finalization, nothing of its output lost."""

from __future__ import annotations

import subprocess
import sys


def test_leave_exits_with_the_code_and_flushes_what_was_printed() -> None:
    program = ("import sys; from slurm_resolver.training.ddp import leave; print('summary'); "
               "print('warning', file=sys.stderr); leave(3); print('never')")
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stdout, out.stderr) == (3, "summary\n", "warning\n")
