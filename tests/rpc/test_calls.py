"""The table of calls: each call declared once, the service's handlers, both links' stubs and the refusals
derived from it; and docs/protocol.md's worked example, a new call (``Echo``) added in one row and run
over both networks, authenticated and bounded like every call."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from slurm_resolver.rpc import coordination_pb2 as pb
from slurm_resolver.rpc.calls import CALLS, JOIN, TABLE, WATCH, WHO, Shape, Unary, table, unary
from slurm_resolver.rpc.handlers import TaskHandlers
from slurm_resolver.rpc.messages import Identity, WireError
from slurm_resolver.rpc.network.grpc_network import GrpcNetwork
from slurm_resolver.rpc.network.in_process import LocalNetwork
from slurm_resolver.rpc.network.loop import LoopThread
from slurm_resolver.rpc.network.server import Server
from slurm_resolver.rpc.transport import CallFailure, LinkError, Network, Refusal
from slurm_resolver.rpc.trust.gate import Gate
from slurm_resolver.rpc.trust.identity import Question, decode_who, encode_who
from slurm_resolver.rpc.trust.seals import AuthMode, Authority, Purpose
from slurm_resolver.rpc.wire import Seal, envelope, parse_message, unwrap

# The worked example of docs/protocol.md, "A new call": Echo, a unary call that says a task's words back.
# 1. Its messages (in coordination.proto; here a Who asks, and an Identity's ``node`` carries the words back).
# 2. Its codec:


def encode_echo(words: bytes, nonce: bytes, seal: Seal) -> bytes:
    """The answer: ``words`` said back, to the question of ``nonce``."""
    return envelope(pb.Identity(node=words.decode(), nonce=nonce), seal)


def decode_echo(header: bytes) -> tuple[bytes, bytes]:
    """The words said back and the nonce answered, checked."""
    message = parse_message(pb.Identity(), header)
    if len(message.node) > 64:
        raise WireError("an echo longer than any")
    return message.node.encode(), bytes(message.nonce)


# 3. Its handler: behind the gate every call meets (the launch, then the seal), as every call's.

class EchoHandler:
    """The server's side of Echo."""

    def __init__(self, gate: Gate) -> None:
        self.gate = gate

    async def echo(self, message: bytes, deadline: float) -> bytes:
        question, header, seal = self.gate.read(message, decode_who)
        self.gate.same_launch(question.job_key)
        self.gate.sealed("an echo", question.source, header, seal, question.port)
        return encode_echo(question.job_key.encode()[::-1], question.nonce, self.gate.seal())


# 4. Its row: its name, its shape, its handler, its bounds.

ECHO = unary("Echo", lambda handlers: handlers.echoing.echo, "this server echoes nothing", most_request=512)


class EchoingHandlers(TaskHandlers):
    """A task's server that answers Echo too (in the package: `TaskHandlers` itself gains the part)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.echoing = EchoHandler(self.gate)


def _authority() -> Authority:
    authority = Authority(AuthMode.NONE, "a test")
    authority.learn(b"k" * 32)
    return authority


def _ask(authority: Authority, port: int, job_key: str = "5.0", padding: int = 0) -> bytes:
    question = Question(job_key + " " * padding, 1, b"n" * 16, port, False)
    return encode_who(question, lambda header: authority.seal(Purpose.CALL, header))


async def _echo_over(network: Network) -> tuple[bytes, object, object, object]:
    authority = _authority()
    served = await network.serve("localhost", [0], lambda port: EchoingHandlers(
        Identity("5.0", 0, "localhost", "worker", 0), 4, authority, port), table(ECHO))
    plain = await network.serve("localhost", [0], lambda port: TaskHandlers(
        Identity("5.0", 0, "localhost", "worker", 0), 4, authority, port))
    try:
        link = network.connect("localhost", served.port)
        header, _ = unwrap(await link.unary(ECHO, _ask(authority, served.port), 5.0))
        words, nonce = decode_echo(header)
        assert nonce == b"n" * 16
        refusals: list[object] = []
        for make in (lambda: link.unary(ECHO, _ask(authority, served.port, "6.0"), 5.0),  # another launch's
                     lambda: link.unary(ECHO, _ask(authority, served.port, padding=600), 5.0),  # beyond its bound
                     lambda: network.connect("localhost", plain.port).unary(ECHO, _ask(authority, plain.port), 5.0)):
            try:
                await make()
                refusals.append(None)
            except LinkError as exc:
                refusals.append(exc.code or exc.kind)
        return words, refusals[0], refusals[1], refusals[2]
    finally:
        await served.stop()
        await plain.stop()
        await network.close()


def test_a_new_call_is_one_row_and_runs_in_process() -> None:
    """docs/protocol.md's worked example: Echo answered, another launch refused, a call beyond the row's
    bound refused, and a server without the row answers it as a method it does not serve (as gRPC does a
    framework's method before its server: unavailable)."""
    assert asyncio.run(_echo_over(LocalNetwork())) == (b"0.5", Refusal.FOREIGN, Refusal.INVALID,
                                                       CallFailure.UNAVAILABLE)


def test_a_new_call_is_one_row_and_runs_over_grpc() -> None:
    loop = LoopThread()
    try:
        assert loop.run(_echo_over(GrpcNetwork())) == (b"0.5", Refusal.FOREIGN, Refusal.INVALID,
                                                        CallFailure.UNAVAILABLE)
    finally:
        loop.close()


def test_the_table_is_every_call_of_the_proto_once() -> None:
    proto = (pb.DESCRIPTOR.services_by_name["Coordination"] if hasattr(pb, "DESCRIPTOR") else None)
    names = {call.name for call in CALLS}
    if proto is not None:
        assert names == {method.name for method in proto.methods}
    assert set(TABLE) == {call.method for call in CALLS} and len(TABLE) == len(CALLS)
    assert (JOIN.shape, WHO.shape, WATCH.shape) == (Shape.ROUND, Shape.UNARY, Shape.STREAM)
    assert isinstance(WHO, Unary) and WHO.method == "/slurm_resolver.v4.Coordination/WhoAreYou"
    with pytest.raises(ValueError, match="two calls named WhoAreYou"):
        table(WHO)


def test_a_server_with_no_handlers_refuses_each_call_with_its_rows_words() -> None:
    """A framework's server (a `Server` made without handlers) answers health checks only: the refusals
    come from the table."""
    loop = LoopThread()
    server = Server({"worker": ["localhost:0"]}, "worker", 0, loop=loop)

    async def ask() -> list[tuple[Refusal | None, str]]:
        network = GrpcNetwork()
        link = network.connect("localhost", server.port)
        said = []
        for make in (lambda: link.join([b"x"], 5.0), lambda: link.unary(WHO, b"x", 5.0),
                     lambda: link.stream(WATCH, _beats()).__anext__()):
            try:
                await make()
            except LinkError as exc:
                said.append((exc.code, exc.detail))
        await network.close()
        return said

    try:
        said = loop.run(ask())
    finally:
        server.stop()
        loop.close()
    assert said == [(Refusal.NOT_LEADER, JOIN.unserved), (Refusal.NOT_LEADER, WHO.unserved),
                    (Refusal.NOT_LEADER, WATCH.unserved)]


async def _beats() -> Any:
    yield b"beat"
    await asyncio.sleep(time.monotonic() * 0 + 10)
