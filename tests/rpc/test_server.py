"""The gRPC server of every task survives hostile bytes and answers strangers with refusals."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import grpc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_resolver.rpc.coordinator import Coordinator, Identity
from slurm_resolver.rpc.server import JOIN, TOKEN_KEY, WHO, Server
from slurm_resolver.rpc.wire import Failure, Header, Records, decode_identity, encode_contribution


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    """Rank 0 of launch 9.0, leading ranks 1-3, that knows the token ``secret``."""
    coordinator = Coordinator(Identity("9.0", 0, "localhost", "worker", 0), 4, [1, 2, 3])
    served = Server({"worker": ["localhost:0"]}, "worker", 0, coordinator=coordinator)
    served._loop.loop.call_soon_threadsafe(coordinator.set_token, "secret")
    yield served
    served.stop(0)


def call(server: Server, method: str, payload: list[bytes] | bytes, **kwargs: object) -> object:
    with grpc.insecure_channel(f"localhost:{server.port}") as channel:
        if method == JOIN:
            return list(channel.stream_stream(JOIN)(iter(payload), timeout=2, **kwargs))  # type: ignore[arg-type]
        return channel.unary_unary(method)(payload, timeout=2, **kwargs)


def healthy(server: Server) -> bool:
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with grpc.insecure_channel(f"localhost:{server.port}") as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=2)
    return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)


def test_identity_needs_the_token(server: Server) -> None:
    with pytest.raises(grpc.RpcError) as info:
        call(server, WHO, b"")
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
    reply = call(server, WHO, b"", metadata=((TOKEN_KEY, "secret"),))
    assert decode_identity(reply)[:2] == ("9.0", 0)  # type: ignore[arg-type]


def test_another_launch_and_a_stranger_rank_are_refused(server: Server) -> None:
    foreign = encode_contribution(Header("8.0", "table", 1), Records(), Failure())
    with pytest.raises(grpc.RpcError) as info:
        call(server, JOIN, foreign)
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "foreign" in (info.value.details() or "")
    stranger = encode_contribution(Header("9.0", "table", 0), Records(), Failure())  # rank 0 joins nobody here
    with pytest.raises(grpc.RpcError) as info:
        call(server, JOIN, stranger)
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "not_leader" in (info.value.details() or "")


def test_other_methods_are_unavailable_not_unimplemented(server: Server) -> None:
    with pytest.raises(grpc.RpcError) as info:
        call(server, "/tensorflow.WorkerService/GetStatus", b"")
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE


@settings(max_examples=40, deadline=None)
@given(st.lists(st.binary(max_size=300), min_size=1, max_size=3))
def test_hostile_bytes_are_refused_and_the_server_lives_on(server: Server, chunks: list[bytes]) -> None:
    try:
        call(server, JOIN, chunks)
    except grpc.RpcError as exc:
        assert exc.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION,
                              grpc.StatusCode.DEADLINE_EXCEEDED)
    assert healthy(server)


def test_garbage_on_the_socket_does_not_hurt(server: Server) -> None:
    for garbage in (b"\x00" * 64, b"GET / HTTP/1.1\r\n\r\n", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\xff" * 100):
        with socket.create_connection(("localhost", server.port), timeout=2) as sock:
            sock.sendall(garbage)
    assert healthy(server)
