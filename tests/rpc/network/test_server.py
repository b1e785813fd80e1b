"""A task's gRPC server in TensorFlow's shape: where it binds, what it says of itself, what it refuses."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

import pytest

from slurm_resolver.errors import ConfigurationError
from slurm_resolver.rpc.calls import TABLE
from slurm_resolver.rpc.network.server import SERVER_OPTIONS, Server, bindable, server_options
from slurm_resolver.rpc.shapes import Parts

from ..forge import standing_in


def test_a_local_server_binds_a_free_port_and_says_where() -> None:
    server = Server.create_local_server()
    try:
        assert server.port > 0 and server.target == f"grpc://localhost:{server.port}"
        assert server.server_def == {"cluster": {"localhost": ["localhost:0"]}, "job_name": "localhost",
                                     "task_index": 0}
        server.start()  # serving already: kept for TensorFlow's shape
    finally:
        server.stop(0)


def test_only_grpc_and_a_named_task_of_a_larger_cluster() -> None:
    with pytest.raises(ConfigurationError, match="protocol='mpi' is not supported"):
        Server({"worker": ["localhost:0"]}, protocol="mpi")
    with pytest.raises(ValueError, match="explicit `job_name`"):
        Server({"worker": ["localhost:0", "localhost:0"]})


def test_it_binds_the_nodes_address_never_every_address_and_bounds_what_a_caller_sends() -> None:
    assert bindable("localhost") in ("127.0.0.1", "[::1]")
    assert ("grpc.so_reuseport", 0) in SERVER_OPTIONS
    assert dict(SERVER_OPTIONS)["grpc.max_receive_message_length"] == 1024 * 1024


def test_grpc_bounds_a_servers_connections_below_the_processs_open_files() -> None:
    """Beyond its bound, gRPC closes a connection as it accepts it: the process never runs out of files."""
    assert dict(server_options(1024))["grpc.max_allowed_incoming_connections"] == 896
    assert "grpc.max_allowed_incoming_connections" not in dict(server_options(0))


class _Watched:
    """A server's handlers whose watch calls last until the caller goes (as a leader's do)."""

    world_size = 1

    @property
    def parts(self) -> Parts:
        return standing_in(self)

    def open_call(self, first: bytes) -> Any:
        raise AssertionError("no rounds here")

    async def join(self, call: Any, more: Any, deadline: float) -> Any:
        raise AssertionError("no rounds here")

    def sent(self, round: Any) -> None:
        pass

    async def who(self, message: bytes, deadline: float) -> bytes:
        await asyncio.sleep(1.5)  # a question still open as the server stops, answered after it stopped
        return b""

    async def stacks(self, message: bytes, deadline: float) -> bytes:
        await asyncio.sleep(1.5)  # a question still open as the server stops, answered after it stopped
        return b""

    async def watch(self, beats: Any) -> Any:
        async for _ in beats:
            yield b"beat"


@pytest.mark.parametrize("grace", [0.0, 0.3])
def test_a_server_stopped_with_calls_in_flight_ends_them_itself_and_grpc_says_nothing(
        grace: float, caplog: pytest.LogCaptureFixture) -> None:
    """gRPC logs a warning for every call it has to abort as a server stops ("Aborting method [...] due
    to server stop."), which reached a job's output beside the one line that named a dead task."""
    import grpc

    from slurm_resolver.rpc.calls import WATCH, WHO

    server = Server({"worker": ["localhost:0"]}, "worker", 0, calls=TABLE, handlers=lambda port: _Watched())
    ended: list[str] = []

    def beats() -> Any:
        while not ended:
            yield b"beat"
            time.sleep(0.05)

    def call(method: str) -> None:
        with grpc.insecure_channel(f"localhost:{server.port}") as channel:
            try:
                if method == WATCH.method:
                    for _ in channel.stream_stream(method)(beats(), timeout=20):
                        pass
                else:
                    channel.unary_unary(method)(b"who", timeout=20)
            except grpc.RpcError as exc:
                ended.append(exc.code().name)

    threads = [threading.Thread(target=call, args=(m,)) for m in (WATCH.method, WATCH.method, WHO.method)]
    for thread in threads:
        thread.start()
    time.sleep(1.0)  # every call under way
    with caplog.at_level(logging.DEBUG, logger="grpc"):
        started = time.monotonic()
        server.stop(grace)
        took = time.monotonic() - started
        for thread in threads:
            thread.join(10)
        time.sleep(1.0)  # a handler still running would end now, and gRPC say so
    assert len(ended) == 3 and took < grace + 2, (ended, took)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], [r.getMessage() for r in caplog.records]
