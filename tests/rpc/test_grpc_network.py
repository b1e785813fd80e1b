"""The real network: a peer slow to answer its first handshake is waited for, within the call's deadline."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from slurm_resolver.rpc.grpc_network import GrpcNetwork
from slurm_resolver.rpc.transport import LinkError
from slurm_resolver.rpc.wire import decode_identity

PEER = """
import sys, threading
from slurm_resolver.rpc.coordinator import Coordinator, Identity
from slurm_resolver.rpc.server import Server
coordinator = Coordinator(Identity("7.0", 1, "localhost", "worker", 1), 2)
server = Server({"worker": ["localhost:0"]}, "worker", 0, coordinator=coordinator)
server._loop.loop.call_soon_threadsafe(coordinator.set_token, "secret")
print(server.port, flush=True)
threading.Event().wait()
"""


@pytest.fixture()
def peer() -> Iterator[tuple[subprocess.Popen[str], int]]:
    """Another process serving rank 1 of launch 7.0 (token ``secret``), and its port."""
    proc = subprocess.Popen([sys.executable, "-c", PEER], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    port = int(proc.stdout.readline())
    yield proc, port
    proc.kill()
    proc.wait()


def _paused_for(proc: subprocess.Popen[str], seconds: float) -> None:
    os.kill(proc.pid, signal.SIGSTOP)
    asyncio.get_running_loop().call_later(seconds, os.kill, proc.pid, signal.SIGCONT)


def test_a_peer_that_answers_its_first_handshake_after_2_s_is_verified(peer: tuple[subprocess.Popen[str], int]
                                                                       ) -> None:
    """The peer's process stands still for 2 s (SIGSTOP) before its first connection: the kernel
    accepts, nobody answers gRPC's handshake. Health and identity wait for it within their deadline."""
    proc, port = peer

    async def scenario() -> tuple[bool, bytes, float]:
        network = GrpcNetwork()
        try:
            _paused_for(proc, 2.0)
            start = time.monotonic()
            link = network.connect("localhost", port)
            healthy = await link.healthy(10.0)
            who = await link.who("secret", 10.0)
            return healthy, who, time.monotonic() - start
        finally:
            await network.close()

    healthy, who, took = asyncio.run(scenario())
    assert healthy and decode_identity(who)[:2] == ("7.0", 1)
    assert 1.8 < took < 8.0


def test_a_stopped_peer_still_fails_at_the_calls_deadline(peer: tuple[subprocess.Popen[str], int]) -> None:
    proc, port = peer

    async def scenario() -> float:
        network = GrpcNetwork()
        _paused_for(proc, 5.0)
        start = time.monotonic()
        try:
            with pytest.raises(LinkError):
                await network.connect("localhost", port).healthy(1.0)
            return time.monotonic() - start
        finally:
            await network.close()

    assert 0.9 < asyncio.run(scenario()) < 3.0
