"""A task's gRPC server in TensorFlow's shape: where it binds, what it says of itself, what it refuses."""

from __future__ import annotations

import pytest

from slurm_resolver.errors import ConfigurationError
from slurm_resolver.rpc.server import SERVER_OPTIONS, Server, bindable, server_options


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
