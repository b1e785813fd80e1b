"""The node a unit test sees wherever it runs: no NVIDIA driver, and only the test cluster's names resolve.

tests/conftest.py applies it to every test not marked ``slurm`` or ``gpu``; a unit test's subprocess applies
it with ``python -m tests.hosts.unit MODULE ARG...`` (`argv()`), which then runs ``python -m MODULE ARG...``.
Without it, a GPU node's NVML splits its GPUs among the captured tasks, and a host without the test
cluster's ``/etc/hosts`` lines (or a site whose DNS answers ``n1``) fails or passes by chance
(scripts/emulate-gpu-node shows both; docs/testing.md).
"""

from __future__ import annotations

import ipaddress
import re
import runpy
import sys
from collections.abc import Callable
from typing import Any

NAMES = re.compile(r"node[0-9]+|localhost")
"""The names that resolve: the test cluster's, whose tasks' environments tests/data/env captured."""

NO_DRIVER = ("/nonexistent/unit-tests-see-no-nvidia-driver",)
"""NVIDIA's driver files as a unit test finds them: absent, so NVML is never loaded."""


def resolves(name: str) -> bool:
    """Whether ``name`` resolves on the unit tests' node: the test cluster's names, and addresses (which
    ``getaddrinfo`` reads without asking anyone)."""
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return bool(NAMES.fullmatch(name))
    return True


def enter(setattr: Callable[[Any, str, Any], None] = setattr) -> None:
    """Make this process the unit tests' node (``setattr``: pytest's ``monkeypatch.setattr``, undone after a test)."""
    from slurm_resolver import addresses, nvml

    setattr(nvml, "DRIVER_FILES", NO_DRIVER)
    setattr(addresses, "resolves", resolves)


def argv(module: str, *args: str) -> list[str]:
    """The command that runs ``python -m module args...`` on the unit tests' node (from the repository's root)."""
    return [sys.executable, "-m", __name__, module, *args]


if __name__ == "__main__":
    enter()
    sys.argv = sys.argv[1:]
    runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
