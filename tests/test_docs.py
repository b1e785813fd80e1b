"""The documentation stays true: the variable reference is generated, the examples run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from slurm_resolver.variables import VARIABLES, reference_markdown

from .conftest import ROOT

DOCS = ROOT / "docs"
EXAMPLES = sorted((DOCS / "resolvers").glob("*.md"))


def test_variable_reference_is_generated_from_the_table() -> None:
    page = (DOCS / "variables.md").read_text()
    assert page.endswith(reference_markdown()), "regenerate: slurm-resolver variables"


def test_every_variable_read_is_in_the_table() -> None:
    names = {v.name for v in VARIABLES}
    source = "\n".join(p.read_text() for p in (ROOT / "slurm_resolver").rglob("*.py"))
    read = set(re.findall(r'"((?:SLURM|SLURMD|OMPI|PMI|PMIX|MPI|CUDA|GPU|TF)_[A-Z_]+)"', source))
    generic = {n.split("_<")[0] for n in names}
    missing = sorted(r for r in read if r not in names and not any(r.startswith(g) for g in generic)
                     and r not in {"OMPI_COMM_WORLD_", "SLURMD_", "SLURM_"})
    assert not missing, f"add to slurm_resolver/variables.py: {missing}"


@pytest.mark.parametrize("page", EXAMPLES, ids=lambda p: p.name)
def test_examples_run(page: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", page.read_text(), re.S)
    runnable = [b for b in blocks if "=" in b and not b.lstrip().startswith(("SlurmClusterResolver(",))]
    assert runnable, f"{page.name} has no runnable example"
    for block in runnable:
        exec(compile(block, str(page), "exec"), {})


def test_site_builds_with_warnings_as_errors(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
                         cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "site" / "bootstrap" / "index.html").is_file()
    assert (tmp_path / "site" / "search" / "search_index.json").is_file()  # the theme's search
    reference = (tmp_path / "site" / "reference" / "index.html").read_text()
    import slurm_resolver

    for name in slurm_resolver.__all__:
        if name != "__version__":
            assert re.search(rf'id="slurm_resolver\.[\w.]*\b{name}"', reference), f"{name} is not on the API reference"
