"""A task's calls up the tree: the search for its leader past what else listens, and the errors it gives."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

import pytest

from slurm_resolver.errors import ResolutionError
from slurm_resolver.resolution import resolve
from slurm_resolver.rpc.calls import TABLE
from slurm_resolver.rpc.handlers import TaskHandlers
from slurm_resolver.rpc.messages import TABLE_ROUND, Contribution, Failure, Identity, Round
from slurm_resolver.rpc.network.in_process import LocalNetwork
from slurm_resolver.rpc.rounds import uplink as uplink_module
from slurm_resolver.rpc.rounds.codec import decision
from slurm_resolver.rpc.rounds.coordinator import Coordinator
from slurm_resolver.rpc.rounds.uplink import Uplink
from slurm_resolver.rpc.shapes import Parts
from slurm_resolver.rpc.simulation.simulate import srun_environ
from slurm_resolver.rpc.transport import Refusal, Refused
from slurm_resolver.rpc.tree import plan_of
from slurm_resolver.rpc.trust.gate import Gate
from slurm_resolver.rpc.trust.identity import IdentityHandler
from slurm_resolver.rpc.trust.seals import AuthMode, Authority

from ..forge import standing_in

CLUSTER = resolve(srun_environ(1, 2), resolves=lambda name: True)
HOST = CLUSTER.hosts[CLUSTER.placement.nodes[0]]


def _keyed() -> Authority:
    authority = Authority(AuthMode.NONE, "a test")
    authority.learn(b"k" * 32)
    return authority


def _leader(port: int, authority: Authority | None = None) -> TaskHandlers:
    plan = plan_of(CLUSTER.as_rank(0), 0, 8)
    return TaskHandlers(Identity(CLUSTER.launch.key, 0, CLUSTER.placement.nodes[0], "worker", 0), 2,
                        authority or _keyed(), port, plan.sources, True)


class Stranger:
    """Another launch's server (or a task that leads nothing): it refuses every call."""

    world_size = 2

    @property
    def parts(self) -> Parts:
        return standing_in(self)

    def __init__(self, port: int) -> None:
        pass

    def open_call(self, first: bytes) -> Any:
        raise Refused(Refusal.FOREIGN, "this server belongs to another launch")

    async def join(self, call: Any, more: Any, deadline: float) -> Any:
        raise AssertionError("never reached")

    def sent(self, round: Any) -> None:
        pass

    async def who(self, message: bytes, deadline: float) -> bytes:
        raise Refused(Refusal.FOREIGN, "another launch")

    async def stacks(self, message: bytes, deadline: float) -> bytes:
        raise Refused(Refusal.FOREIGN, "another launch")

    async def watch(self, beats: Any) -> Any:
        raise Refused(Refusal.FOREIGN, "another launch")
        yield b""  # pragma: no cover


def _uplink(network: LocalNetwork, candidates: list[int]) -> Uplink:
    return Uplink(CLUSTER.as_rank(1), plan_of(CLUSTER.as_rank(1), 1, 8), network, _keyed(), candidates)


def test_the_leader_is_found_past_another_launchs_server_and_its_port_kept() -> None:
    async def scenario() -> tuple[bool, int, int | None]:
        network = LocalNetwork()
        await network.serve(HOST, [31001], Stranger, TABLE)
        leader = _leader(31002)
        await network.serve(HOST, [31002], lambda port: leader, TABLE)
        uplink = _uplink(network, [31001, 31002])
        barrier = Round.barrier("b", 0)

        async def decide_it() -> None:
            merged = await leader.rounds.gather(barrier, Contribution(), time.monotonic() + 5, lambda s: Failure())
            leader.rounds.publish(barrier, decision(merged.failure))

        outcome, _ = (await asyncio.gather(uplink.join(barrier, Contribution(), time.monotonic() + 5, 5),
                                           decide_it()))[0]
        return not outcome.failure, uplink.port, uplink.rank

    assert asyncio.run(scenario()) == (True, 31002, 0)


@pytest.mark.parametrize("rank", [1, 2], ids=["a task that leads nothing", "a leader with tasks below"])
def test_a_leader_not_up_yet_is_called_again_on_a_channel_with_no_backoff(rank: int) -> None:
    """The first port is called at once; nobody listens there yet: its channel is discarded (a gRPC
    channel that failed to connect waits out a backoff) and the port probed until the leader is up,
    whether the caller brings its own record (called in its task) or its node's (in a task of its own)."""
    two_nodes = resolve(srun_environ(2, 2), resolves=lambda name: True)
    root_plan = plan_of(two_nodes.as_rank(0), 0, 8)

    class Forgetful(LocalNetwork):
        discarded: list[int] = []

        async def discard(self, host: str, port: int) -> None:
            self.discarded.append(port)

    async def scenario() -> tuple[bool, int | None, list[int]]:
        network = Forgetful()
        root = TaskHandlers(Identity(two_nodes.launch.key, 0, two_nodes.placement.nodes[0], "worker", 0), 4,
                            _keyed(), 31012, root_plan.sources, True)
        plan = plan_of(two_nodes.as_rank(rank), rank, 8)
        assert bool(plan.sources) is (rank == 2)
        uplink = Uplink(two_nodes.as_rank(rank), plan, network, _keyed(), [31012])
        barrier = Round.barrier("b", 0)

        async def late_root() -> None:
            await asyncio.sleep(0.2)
            await network.serve(two_nodes.hosts[two_nodes.placement.nodes[0]], [31012], lambda port: root, TABLE)
            merged = await root.rounds.gather(barrier, Contribution(), time.monotonic() + 0.5, lambda s: Failure())
            root.rounds.publish(barrier, decision(merged.failure))

        outcome, _ = (await asyncio.gather(uplink.join(barrier, Contribution(), time.monotonic() + 5, 5),
                                           late_root()))[0]
        return not outcome.failure, uplink.port, network.discarded

    assert asyncio.run(scenario()) == (True, 31012, [31012])


@pytest.mark.parametrize("rank", [1, 2], ids=["a task that leads nothing", "a leader with tasks below"])
def test_a_leader_slower_than_the_unproven_wait_is_asked_who_it_is_once_and_then_waited_on(
        rank: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A first round that outlasts `unproven_wait()` (25-40 s at 16,384 tasks on this project's machine)
    keeps the task's call open (it is never made again) while the server is asked who it is; proven,
    it is waited on alone: no other candidate is probed. Before, every task's own call was made again
    and every task probed the other ports each second (here: 10 probes in 0.6 s), which slowed the
    round further and failed the 16,384-task bootstrap."""
    monkeypatch.setattr(uplink_module, "UNPROVEN_WAIT", 0.2)
    two_nodes = resolve(srun_environ(2, 2), resolves=lambda name: True)
    root_plan = plan_of(two_nodes.as_rank(0), 0, 8)

    class Counting(LocalNetwork):
        probes = 0

        async def listening(self, host: str, port: int) -> bool:
            self.probes += 1
            return await super().listening(host, port)

    class Root(Coordinator):
        opened = asked = 0

        def open_call(self, first_message: bytes) -> Any:
            self.opened += 1
            return super().open_call(first_message)

    async def scenario() -> tuple[int, int, int]:
        network = Counting()
        first_round = Authority(AuthMode.NONE, "a test")  # nobody knows the launch's key yet
        root = Root(Gate(Identity(two_nodes.launch.key, 0, two_nodes.placement.nodes[0], "worker", 0), 4, first_round,
                         31021), root_plan.sources, True)
        parts = Parts({Coordinator: root, IdentityHandler: IdentityHandler(root.gate)})  # a root of its own make
        await network.serve(two_nodes.hosts[two_nodes.placement.nodes[0]], [31021],
                            lambda port: SimpleNamespace(parts=parts), TABLE)
        uplink = Uplink(two_nodes.as_rank(rank), plan_of(two_nodes.as_rank(rank), rank, 8), network,
                        Authority(AuthMode.NONE, "a test"), [31021, 31022, 31023])

        async def slow_root() -> None:
            merged = await root.gather(TABLE_ROUND, Contribution(), time.monotonic() + 0.6, lambda s: Failure())
            root.publish(TABLE_ROUND, decision(merged.failure))  # decided 0.6 s on: a task below is missing

        await asyncio.gather(uplink.join(TABLE_ROUND, Contribution(), time.monotonic() + 5, 0.8), slow_root())
        return uplink.port, root.opened, network.probes

    assert asyncio.run(scenario()) == (31021, 1, 0)  # its call, made once, answered; no port probed


def test_nobody_answering_names_the_task_above_its_host_and_ports() -> None:
    async def scenario() -> str:
        uplink = _uplink(LocalNetwork(), [31005, 31006])
        with pytest.raises(ResolutionError) as caught:
            await uplink.join(Round.barrier("b", 0), Contribution(), time.monotonic() + 0.3, 0.3)
        return caught.value.message

    message = asyncio.run(scenario())
    assert "rank 0" in message and "did not answer" in message and "31005" in message


def test_a_notice_nobody_announces_says_so() -> None:
    async def scenario() -> str:
        network = LocalNetwork()
        leader = _leader(31003)
        await network.serve(HOST, [31003], lambda port: leader, TABLE)
        uplink = _uplink(network, [31003])
        with pytest.raises(ResolutionError) as caught:
            await uplink.join(Round.notice("done"), Contribution(), time.monotonic() + 0.5, 0.5)
        return caught.value.message

    assert asyncio.run(scenario()) == "bootstrap: nobody announced 'done' within 0.5 s"
