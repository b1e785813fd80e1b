"""The wheel carries the sbatch templates and py.typed."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from .conftest import ROOT


def test_wheel_contains_templates(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path), str(ROOT)],
                   check=True, capture_output=True, timeout=300)
    wheel = next(tmp_path.glob("slurm_resolver-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    templates = {p.name for p in (ROOT / "sbatch_templates").glob("*.sbatch")}
    assert templates and all(f"slurm_resolver/sbatch_templates/{t}" in names for t in templates)
    assert "slurm_resolver/py.typed" in names
    modules = {str(p.relative_to(ROOT)) for p in (ROOT / "slurm_resolver").rglob("*.py")}
    assert sorted(modules - set(names)) == [], "add the package to setup.cfg's packages"
    metadata = next(n for n in names if n.endswith("METADATA"))
    text = zipfile.ZipFile(wheel).read(metadata).decode()
    assert "GPL-2.0-or-later" in text and "Requires-Dist: python-hostlist" in text
