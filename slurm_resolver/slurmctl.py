"""The seam to slurmctld: node addresses through pyslurm when installed, else ``scontrol``.

Only called when a node name does not resolve; never on the ordinary start-up path.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence

from .errors import AddressError
from .hostlists import collapse

__all__ = ["node_addresses", "parse_scontrol_nodes"]


def parse_scontrol_nodes(text: str) -> dict[str, str]:
    """``NodeName`` to ``NodeAddr`` from ``scontrol show node -o`` output.

    >>> parse_scontrol_nodes("NodeName=node1 Arch=x86_64 NodeAddr=10.0.0.1 NodeHostName=n1\\n")
    {'node1': '10.0.0.1'}
    """
    result: dict[str, str] = {}
    for line in text.splitlines():
        fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
        if "NodeName" in fields and fields.get("NodeAddr"):
            result[fields["NodeName"]] = fields["NodeAddr"]
    return result


def _from_pyslurm(names: Sequence[str]) -> dict[str, str] | None:
    try:
        import pyslurm
    except ImportError:
        return None
    try:  # pyslurm >= 23: Nodes.load(); earlier: node().get()
        nodes = pyslurm.Nodes.load()
        return {n: nodes[n].address for n in names if n in nodes}
    except Exception:  # noqa: BLE001 - any pyslurm failure falls back to scontrol
        return None


def node_addresses(names: Sequence[str], timeout: float = 10.0) -> dict[str, str]:
    """The ``NodeAddr`` of each of ``names`` (one call for all of them)."""
    found = _from_pyslurm(names)
    if found is not None and all(n in found for n in names):
        return found
    scontrol = shutil.which("scontrol")
    if scontrol is None:
        raise AddressError(
            f"node names {collapse(list(names))} do not resolve, and scontrol is not on PATH to ask "
            "Slurm for their NodeAddr",
            "add the nodes to DNS or /etc/hosts, or run where scontrol is available",
        )
    try:
        out = subprocess.run([scontrol, "show", "node", "-o", collapse(list(names))],
                             capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise AddressError(f"scontrol show node did not answer within {timeout:g} s",
                           "check that slurmctld is reachable") from None
    return parse_scontrol_nodes(out.stdout)
