"""``slurm-resolver stacks``: what it says where no server of the step answers."""

from __future__ import annotations

import asyncio
import socket

import pytest

from slurm_resolver.cli.diagnosis import _ask
from slurm_resolver.errors import ResolutionError
from slurm_resolver.rpc.trust.seals import AuthMode, Authority


def _closed_port() -> int:
    with socket.socket() as probe:  # bound, then closed: nothing listens there
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.mark.parametrize(("address", "node", "where"), [
    ("127.0.0.1", "127.0.0.1", "on 127.0.0.1, ports"),  # the name is the address: said once
    ("127.0.0.1", "gpu-a17", "on gpu-a17 (127.0.0.1), ports"),  # NodeAddr another network than the name
])
def test_no_answer_names_the_node_and_its_address_only_where_they_differ(address: str, node: str,
                                                                         where: str) -> None:
    proof = Authority(AuthMode.SECRET, "a test", secret=b"s" * 24, launch="9.0")
    with pytest.raises(ResolutionError) as raised:
        asyncio.run(_ask(address, node, [_closed_port()], proof, "9.0", 4, 2.0))
    assert f"no server of step 9.0 answered {where}" in str(raised.value), raised.value
