"""Helpers of the command-line tests: run ``python -m slurm_resolver`` in a given environment."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.fixture
def cli() -> object:
    def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "slurm_resolver", *args], capture_output=True, text=True,
                              env=env, timeout=60)

    return run
