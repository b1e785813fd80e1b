"""The coordination service on a real server: it survives hostile bytes and answers strangers with refusals."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator
from types import SimpleNamespace

import grpc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_resolver.rpc.calls import JOIN, TABLE, WHO
from slurm_resolver.rpc.handlers import TaskHandlers
from slurm_resolver.rpc.messages import TABLE_ROUND, Identity, Source
from slurm_resolver.rpc.network import service
from slurm_resolver.rpc.network.callers import UNPROVEN_SHARE, Bound
from slurm_resolver.rpc.network.server import Server
from slurm_resolver.rpc.network.service import HEALTH_METHOD
from slurm_resolver.rpc.trust.identity import decode_identity
from slurm_resolver.rpc.trust.seals import AuthMode, Authority, Purpose
from slurm_resolver.rpc.wire import unwrap

from ..forge import join_call, who_call

KEY = b"k" * 32


def _authority() -> Authority:
    authority = Authority(AuthMode.NONE, "a test")
    authority.learn(KEY)
    return authority


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    """Rank 0 of launch 9.0, leading ranks 1-3, that knows the launch's key."""
    served = Server({"worker": ["localhost:0"]}, "worker", 0, calls=TABLE, handlers=lambda port: TaskHandlers(
        Identity("9.0", 0, "localhost", "worker", 0), 4, _authority(), port, map(Source.task, [1, 2, 3]), True))
    yield served
    served.stop(0)


def call(server: Server, method: str, payload: list[bytes] | bytes, timeout: float = 2, **kwargs: object) -> object:
    with grpc.insecure_channel(f"localhost:{server.port}") as channel:
        if method == JOIN.method:
            return list(channel.stream_stream(JOIN.method)(iter(payload), timeout=timeout,  # type: ignore[arg-type]
                                                           **kwargs))
        return channel.unary_unary(method)(payload, timeout=timeout, **kwargs)


def healthy(server: Server) -> bool:
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with grpc.insecure_channel(f"localhost:{server.port}") as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=2)
    return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)


def test_identity_needs_a_seal_of_the_launch_and_answers_with_one(server: Server) -> None:
    with pytest.raises(grpc.RpcError) as info:
        call(server, WHO.method, who_call("9.0", 1, server.port))  # no seal
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
    mine = _authority()
    reply = call(server, WHO.method, who_call("9.0", 1, server.port, mine))
    header, seal = unwrap(reply)  # type: ignore[arg-type]
    assert decode_identity(header)[0].rank == 0 and mine.check(Purpose.ANSWER, header, seal).believed
    with pytest.raises(grpc.RpcError) as elsewhere:  # a question made for another server
        call(server, WHO.method, who_call("9.0", 1, server.port + 1, mine))
    assert elsewhere.value.code() == grpc.StatusCode.UNAUTHENTICATED and "another server" in elsewhere.value.details()


def test_a_server_whose_loop_stands_still_still_hears_a_call_that_came_in_time(server: Server,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The first-message deadline counts the seconds the server could have read the call, not those its
    loop stood still: at 16,384 tasks on 2 cores each process's loop stood still 6-11 s as its servers
    started, and a 5 s deadline on the wall clock refused the job's own first-round calls as silent
    (the leaders' identity checks failed, and with them the whole bootstrap). Here the loop stands
    still 1.5 s the moment a call begins to wait for its message, with a deadline of 1 s."""
    monkeypatch.setattr(service, "FIRST_MESSAGE", 1.0)
    taking = Bound.take

    def take_then_stand_still(bound: Bound, peer: str) -> None:
        taking(bound, peer)
        if bound.share == UNPROVEN_SHARE:  # the call now waits for its message
            asyncio.get_running_loop().call_soon(time.sleep, 1.5)

    monkeypatch.setattr(Bound, "take", take_then_stand_still)
    reply = call(server, WHO.method, who_call("9.0", 1, server.port, _authority()), timeout=10)
    assert decode_identity(unwrap(reply)[0])[0].rank == 0  # type: ignore[arg-type]


def test_another_launch_and_a_stranger_rank_are_refused_without_naming_the_launch(server: Server) -> None:
    with pytest.raises(grpc.RpcError) as info:
        call(server, JOIN.method, join_call("8.0", TABLE_ROUND, 1, port=server.port))
    details = info.value.details() or ""
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "foreign" in details and "9.0" not in details
    with pytest.raises(grpc.RpcError) as info:  # rank 0 joins nobody here
        call(server, JOIN.method, join_call("9.0", TABLE_ROUND, 0, port=server.port))
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "not_leader" in (info.value.details() or "")


def test_other_methods_are_unavailable_not_unimplemented(server: Server) -> None:
    with pytest.raises(grpc.RpcError) as info:
        call(server, "/tensorflow.WorkerService/GetStatus", b"")
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE


@settings(max_examples=40, deadline=None)
@given(st.lists(st.binary(max_size=300), min_size=1, max_size=3))
def test_hostile_bytes_are_refused_and_the_server_lives_on(server: Server, chunks: list[bytes]) -> None:
    try:
        call(server, JOIN.method, chunks)
    except grpc.RpcError as exc:
        assert exc.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION,
                              grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAUTHENTICATED)
    assert healthy(server)


def test_garbage_health_checks_are_refused_quietly(server: Server, caplog: pytest.LogCaptureFixture) -> None:
    for garbage in (b"\xff" * 300, b"\x0a\x05" + b"\xff" * 5):
        try:
            call(server, HEALTH_METHOD, garbage)
        except grpc.RpcError as exc:
            assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert healthy(server) and not [r for r in caplog.records if r.levelname in ("ERROR", "WARNING")]


def test_garbage_on_the_socket_does_not_hurt(server: Server) -> None:
    for garbage in (b"\x00" * 64, b"GET / HTTP/1.1\r\n\r\n", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\xff" * 100):
        with socket.create_connection(("localhost", server.port), timeout=2) as sock:
            sock.sendall(garbage)
    assert healthy(server)


def test_a_methods_handler_is_made_on_its_first_call_and_a_strangers_names_are_not_kept() -> None:
    generic = service.CoordinationService(grpc, None, TABLE)
    asked = [generic.service(SimpleNamespace(method=f"/x.Y/Z{n}")) for n in range(1000)]
    assert all(handler is asked[0] for handler in asked)  # one handler for any other method
    known = [*TABLE, HEALTH_METHOD]
    first = [generic.service(SimpleNamespace(method=m)) for m in known]
    assert [generic.service(SimpleNamespace(method=m)) for m in known] == first
    assert len(generic._made) == len(known) + 1  # noqa: SLF001 - the bound: the names it knows, and one other
