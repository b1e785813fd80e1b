"""The table of calls: each call's row declared in its own module and collected once; the service's handlers,
both links' stubs and the bounds derived from the rows; and docs/protocol.md's worked example, a new call
(``Versions``, `tests/rpc/example/versions_call.py`) with messages of its own, a sealed ask and a checked
answer, fanned down the tree, added in one module and one row and run over both networks."""

from __future__ import annotations

import asyncio
import platform
import re
import textwrap
import time
from typing import Any

import pytest

from slurm_resolver.rpc import calls
from slurm_resolver.rpc.bootstrap import bootstrap_async
from slurm_resolver.rpc.bootstrapped import Bootstrapped
from slurm_resolver.rpc.detection.watch import LOST, WATCH, WatchHandler
from slurm_resolver.rpc.diagnosis.stacks_call import STACKS, StacksHandler
from slurm_resolver.rpc.network.grpc_network import GrpcNetwork
from slurm_resolver.rpc.network.in_process import LocalNetwork
from slurm_resolver.rpc.network.loop import LoopThread
from slurm_resolver.rpc.network.server import Server
from slurm_resolver.rpc.network.service import UNSERVED
from slurm_resolver.rpc.rounds.coordinator import JOIN, Coordinator
from slurm_resolver.rpc.shapes import Parts, RoundCall, Shape, Unary, served, unary
from slurm_resolver.rpc.transport import CallFailure, LinkError, Network, Refusal
from slurm_resolver.rpc.trust.identity import WHO, IdentityHandler
from slurm_resolver.rpc.trust.seals import Purpose
from slurm_resolver.rpc.wire import unwrap

from ..conftest import ROOT
from .example import versions_call
from .example.versions_call import VERSIONS, VersionsAsk, VersionsHandler, ask_versions, decode_answer, encode_ask


def test_the_table_is_every_call_of_the_proto_once() -> None:
    from slurm_resolver.rpc import coordination_pb2 as pb

    service = pb.DESCRIPTOR.services_by_name["Coordination"]
    methods = {f"/{service.full_name}/{method.name}" for method in service.methods}
    assert set(calls.TABLE) == methods  # Join's two methods each
    assert [call.part for call in calls.CALLS][:4] == [Coordinator, IdentityHandler, WatchHandler, StacksHandler]
    assert (JOIN.shape, WHO.shape, WATCH.shape, STACKS.shape) == (Shape.ROUND, Shape.UNARY, Shape.STREAM, Shape.UNARY)
    assert isinstance(JOIN, RoundCall) and JOIN.bundled_method == "/slurm_resolver.v4.Coordination/JoinBundled"
    assert isinstance(WHO, Unary) and WHO.method == "/slurm_resolver.v4.Coordination/WhoAreYou"
    with pytest.raises(ValueError, match="two calls named WhoAreYou"):
        served([*calls.CALLS, WHO])


def test_a_row_names_its_parts_method_and_each_server_part_answers_its_own() -> None:
    """A row names the class of its part and that class's method (mypy checks the name); a server finds the
    part by the class, and the method by its name (a test's stand-in may stand for several parts)."""
    assert STACKS.answer is StacksHandler.stacks and STACKS.part is StacksHandler

    class StandIn:
        async def stacks(self, message: bytes, deadline: float) -> bytes:
            return message[::-1]

    parts = Parts({StacksHandler: StandIn()})
    assert asyncio.run(STACKS.handler(parts)(b"abc", 0.0)) == b"cba"
    with pytest.raises(Exception, match="this server has no IdentityHandler"):
        WHO.handler(parts)


def test_bounds_are_checked_once_for_every_network() -> None:
    row = unary("Small", StacksHandler, StacksHandler.stacks, most_request=4, most_answer=2)
    row.check_request(b"1234")
    with pytest.raises(Exception, match="a Small call of more than 4 bytes") as request:
        row.check_request(b"12345")
    assert getattr(request.value, "code", None) is Refusal.INVALID
    assert row.check_answer(b"12") == b"12"
    with pytest.raises(LinkError, match="a Small answer of more than 2 bytes"):
        row.check_answer(b"123")


# The page's example: a job whose table has Versions (as the newcomer's row in calls.py gives it).

def _with_versions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Versions' row in the table, as ``calls.py``'s ``CALLS`` would hold it."""
    monkeypatch.setattr(calls, "CALLS", (*calls.CALLS, VERSIONS))
    monkeypatch.setattr(calls, "TABLE", served(calls.CALLS))


async def _job(network_of: Any, size: int, nodes: int, secret: str) -> list[Bootstrapped]:
    """A job of ``size`` tasks on ``nodes`` nodes (each on a loopback address of its own), bootstrapped."""
    from slurm_resolver.resolution import resolve
    from slurm_resolver.rpc.simulation.simulate import srun_environ

    base = resolve(srun_environ(nodes, size // nodes), resolves=lambda name: False,
                   node_addresses=lambda names: {name: f"127.0.7.{i + 1}" for i, name in enumerate(names)})
    return list(await asyncio.gather(*(
        bootstrap_async(base.as_rank(rank), environ={"SLURM_RESOLVER_SECRET": secret}, network=network_of(),
                        timeout=20, heartbeat=None, auth="secret") for rank in range(size))))


async def _versions_over(network_of: Any, size: int, nodes: int) -> dict[str, Any]:
    job = await _job(network_of, size, nodes, "s" * 32)
    try:
        asker = job[size - 1].server.handlers.parts.of(VersionsHandler)  # the last task asks the root
        settled = asker.settled.value
        assert settled is not None
        found: dict[str, Any] = {"counts": await ask_versions(settled, asker.gate.authority, 0, time.monotonic() + 5)}
        cluster, root = settled.cluster, job[0].server
        assert cluster.bound_ports is not None and root is not None
        link = settled.network.connect(cluster.task(0).host, root.port)

        async def refusal(message: bytes) -> object:
            try:
                await link.unary(VERSIONS, message, 5.0)
            except LinkError as exc:
                return exc.code or exc.kind
            return None

        authority = asker.gate.authority
        sealed = lambda header: authority.seal(Purpose.CALL, header)  # noqa: E731
        found["another launch"] = await refusal(encode_ask(VersionsAsk("9.9", 1, b"n" * 16, root.port), sealed))
        found["unsealed"] = await refusal(encode_ask(VersionsAsk(cluster.launch.key, 1, b"n" * 16, root.port),
                                                     lambda header: b"forged"))
        found["another server"] = await refusal(encode_ask(VersionsAsk(cluster.launch.key, 1, b"n" * 16,
                                                                       root.port + 1), sealed))
        found["beyond its bound"] = await refusal(b"\x0a" * 600)
        answer = await link.unary(VERSIONS, encode_ask(VersionsAsk(cluster.launch.key, size - 1, b"m" * 16,
                                                                    root.port), sealed), 5.0)
        found["answer"] = decode_answer(unwrap(answer)[0], size)[1:]
        return found
    finally:
        for b in job:
            await b.aio.stop(0)


EXPECTED = {"another launch": Refusal.FOREIGN, "unsealed": Refusal.UNAUTHENTICATED,
            "another server": Refusal.UNAUTHENTICATED, "beyond its bound": Refusal.INVALID, "answer": (b"m" * 16, 0)}


def test_the_pages_new_call_fans_down_the_tree_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Six tasks on three nodes: the root's answer merges every task's version, through the node leaders."""
    _with_versions(monkeypatch)
    shared = LocalNetwork()  # every task's server in one network
    found = asyncio.run(_versions_over(lambda: shared, 6, 3))
    assert found.pop("counts") == {platform.python_version(): 6}
    assert found == EXPECTED


def test_the_pages_new_call_fans_down_the_tree_over_grpc(monkeypatch: pytest.MonkeyPatch) -> None:
    _with_versions(monkeypatch)
    found = asyncio.run(_versions_over(GrpcNetwork, 4, 2))  # a network (its channels) for each task
    assert found.pop("counts") == {platform.python_version(): 4}
    assert found == EXPECTED


def test_a_server_without_the_row_answers_it_as_a_method_it_does_not_serve() -> None:
    """A task of a version without the call answers it as gRPC does any method it does not serve."""

    async def scenario(network: Network) -> object:
        job = await _job(lambda: network, 2, 1, "s" * 32)  # the table as the package has it: no Versions
        try:
            server = job[0].server
            assert server is not None
            await network.connect(job[0].cluster.task(0).host, server.port).unary(VERSIONS, b"x", 5.0)
        except LinkError as exc:
            return exc.kind
        finally:
            for b in job:
                await b.aio.stop(0)
        return None

    assert asyncio.run(scenario(LocalNetwork())) is CallFailure.UNAVAILABLE


def test_the_pages_code_is_the_examples() -> None:
    """Every Python block of docs/protocol.md's "A new call" stands verbatim in the example's module, and the
    page names every step a newcomer takes."""
    page = (ROOT / "docs" / "protocol.md").read_text()
    section = page[page.index("### A new call"):].split("\n## ")[0]
    source = (ROOT / "tests" / "rpc" / "example" / "versions_call.py").read_text()
    blocks = [textwrap.dedent(block) for block in re.findall(r"```python\n(.*?)```", section, re.S)]
    assert len(blocks) >= 4
    for block in blocks:
        assert block.strip() in source, block[:200]
    assert "scripts/generate-protos" in section and "calls.py" in section and "coordination.proto" in section
    assert (ROOT / "tests" / "rpc" / "example" / "versions.proto").read_text().count("message ") == 2
    assert versions_call.VERSIONS.part is VersionsHandler


def test_a_server_with_no_handlers_refuses_every_call_of_the_service() -> None:
    """A framework's server (a `Server` made without handlers) answers health checks only: any call of the
    service is refused as such (``not_leader``: a task looking for its leader looks further)."""
    loop = LoopThread()
    server = Server({"worker": ["localhost:0"]}, "worker", 0, loop=loop)

    async def ask() -> list[tuple[Refusal | None, str]]:
        network = GrpcNetwork()
        link = network.connect("localhost", server.port)
        said = []
        for make in (lambda: link.join(JOIN, [b"x"], 5.0), lambda: link.unary(WHO, b"x", 5.0),
                     lambda: link.stream(WATCH, _beats()).__anext__(), lambda: link.unary(VERSIONS, b"x", 5.0),
                     lambda: link.unary(LOST, b"x", 5.0)):
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
    assert said == [(Refusal.NOT_LEADER, UNSERVED)] * 5


async def _beats() -> Any:
    yield b"beat"
    await asyncio.sleep(10)
