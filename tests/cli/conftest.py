"""Helpers of the command-line tests: run ``python -m slurm_resolver`` in a given environment, on the unit
tests' node (tests/hosts/unit.py: no GPU, the test cluster's names), whatever host runs them."""

from __future__ import annotations

import subprocess

import pytest

from ..hosts import unit


@pytest.fixture
def cli() -> object:
    def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(unit.argv("slurm_resolver", *args), capture_output=True, text=True, env=env, timeout=60)

    return run
