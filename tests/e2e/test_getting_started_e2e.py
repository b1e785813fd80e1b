"""Each "Getting started" page's job, run on the test cluster exactly as the page prints it.

The page is the test's input: its ``job.sbatch`` and ``train.py`` blocks are written out as they are, and
the job is submitted as the page says (``sbatch job.sbatch``) with the project's Python first on ``PATH``
(what ``pip install`` into the job's Python gives). The test checks what the page's output shows: every
rank's line, and the same all-reduced sum in each.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ..conftest import ROOT, require

pytestmark = pytest.mark.slurm

PAGES = ROOT / "docs" / "start"
FILE = re.compile(r'^```\w+ title="([^"]+)"\n(.*?)^```$', re.M | re.S)
SUBMIT = "```bash\nsbatch job.sbatch\n```"

CASES = [  # page, the module it needs, the lines of every rank (the sum in each)
    ("pytorch", "torch", r"^rank (\d) of 4 on node\d: loss [0-9.]+, sum of ranks 6$"),
    ("jax", "jax", r"^process (\d) of 4: 4 devices in all, sum of process indices 6$"),
    ("lightning", "lightning", r"^rank (\d) of 4 on node\d \(node \d, local rank \d\): loss [0-9.]+, sum of ranks 6$"),
    ("tensorflow", "tensorflow",
     r"^worker (\d) of 2 on node\d: weight 3.000 \(3.000 to learn\), sum of worker indices 1$"),
]


def files_of(page: Path) -> dict[str, str]:
    """The files a page prints (its code blocks with a title), as they are."""
    return {name: text for name, text in FILE.findall(page.read_text())}


def submit(directory: Path, timeout: float = 300) -> str:
    """``sbatch job.sbatch`` in ``directory``, as the page says; the job's output once it ended."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("PYTHONPATH", None)
    job = subprocess.run(["sbatch", "--parsable", "job.sbatch"], cwd=directory, env=env, capture_output=True,
                         text=True, check=True).stdout.strip().split(";")[0]
    deadline = time.monotonic() + timeout
    while subprocess.run(["squeue", "-h", "-j", job], capture_output=True, text=True).stdout.strip():
        if time.monotonic() > deadline:
            subprocess.run(["scancel", job], capture_output=True)
            raise AssertionError(f"job {job} did not end within {timeout} s:\n"
                                 f"{(directory / f'slurm-{job}.out').read_text()[-4000:]}")
        time.sleep(0.5)
    return (directory / f"slurm-{job}.out").read_text()


@pytest.mark.parametrize(("page", "module", "line"), CASES, ids=[c[0] for c in CASES])
def test_the_pages_job_runs_as_printed(slurm_cluster: dict[str, str], tmp_path: Path, page: str, module: str,
                                       line: str) -> None:
    require(module)
    text = (PAGES / f"{page}.md").read_text()
    files = files_of(PAGES / f"{page}.md")
    assert set(files) == {"job.sbatch", "train.py"} and SUBMIT in text, "the page shows both files and how to submit"
    for name, content in files.items():
        (tmp_path / name).write_text(content)
    output = submit(tmp_path)
    ranks = sorted(int(m.group(1)) for m in re.finditer(line, output, re.M))
    world = int(re.search(r"of (\d)", line).group(1))  # type: ignore[union-attr]
    assert ranks == list(range(world)), output[-6000:]
    assert "Traceback" not in output and "srun: error" not in output and "terminate called" not in output, output
    shown = re.search(r"```text\n(.*?)```", text, re.S)
    printed = [row for row in shown.group(1).splitlines() if not row.startswith("slurm_resolver")] if shown else []
    assert printed and all(re.match(line, row) for row in printed), "the page's output is what the job prints"
