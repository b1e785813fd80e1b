"""The generated protocol buffer code matches the .proto files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ..conftest import ROOT


def test_generated_code_is_fresh(tmp_path: Path) -> None:
    subprocess.run([str(ROOT / "scripts" / "generate-protos"), str(tmp_path)], check=True, cwd=ROOT,
                   env={**os.environ, "PYTHON": sys.executable}, capture_output=True)
    generated = sorted(tmp_path.rglob("*_pb2*.py*"))
    assert generated
    for path in generated:
        committed = ROOT / path.relative_to(tmp_path)
        assert committed.read_text() == path.read_text(), f"{committed} is stale: run scripts/generate-protos"
