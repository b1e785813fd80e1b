"""Hostile callers: a bootstrap under a flood of garbage and impostors, and every bound a caller meets."""

from __future__ import annotations

import asyncio
import itertools
import socket
import threading
import time
from typing import Any

import grpc
import pytest

from slurm_resolver.layout import launch_key
from slurm_resolver.rpc import coordination_pb2 as pb
from slurm_resolver.rpc import watch
from slurm_resolver.rpc.bootstrap import bootstrap, rendezvous_ports
from slurm_resolver.rpc.bootstrapped import Bootstrapped
from slurm_resolver.rpc.coordinator import Coordinator, Identity, Refused
from slurm_resolver.rpc.rounds import MOST_OPEN_ROUNDS
from slurm_resolver.rpc.server import JOIN, TOKEN_KEY, WATCH, WHO
from slurm_resolver.rpc.wire import MAX_MESSAGE, Failure, Header, Records, encode_contribution

from .test_bootstrap import env, run_all, stop

HOSTILE_JOINS = [
    [b"\xff" * 64],
    [b""],
    encode_contribution(Header("1.0", "table", 1), Records(), Failure()),  # another launch
    [pb.Contribution(job_key="77.9", round="table", source=4_000_000).SerializeToString()],  # no such rank
    [pb.Contribution(job_key="77.9", round="x" * 10_000, source=1).SerializeToString()],  # overlong round
    [pb.Contribution(job_key="77.9", round="table", source=1,
                     records=pb.Records(ranks=[1, 2], ports=[0])).SerializeToString()],  # columns disagree
]


def _attack(port: int) -> None:
    """One volley of hostile calls at ``port``, each failing fast on its own."""
    for garbage in (b"\x00" * 32, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\xee" * 64):
        try:
            with socket.create_connection(("localhost", port), timeout=0.3) as sock:
                sock.sendall(garbage)
        except OSError:
            return  # nobody listens there (yet)
    with grpc.insecure_channel(f"localhost:{port}") as channel:
        calls: list[tuple[str, Any]] = [(JOIN, chunks) for chunks in HOSTILE_JOINS]
        calls += [(WHO, b""), (WATCH, [b"\x01\x02"]), ("/tensorflow.WorkerService/GetStatus", b"")]
        for method, payload in calls:
            try:
                if method in (JOIN, WATCH):
                    list(channel.stream_stream(method)(iter(payload), timeout=0.5))
                else:
                    channel.unary_unary(method)(payload, timeout=0.5, metadata=((TOKEN_KEY, "guess"),))
            except grpc.RpcError:
                pass


def test_a_bootstrap_under_a_flood_of_hostile_calls_agrees_on_the_right_cluster() -> None:
    ports = rendezvous_ports(launch_key(env(0, 4, "9")))
    stop_attacks = threading.Event()
    volleys = [0]

    def attacker() -> None:
        while not stop_attacks.is_set():
            for port in ports:
                _attack(port)
            volleys[0] += 1

    threads = [threading.Thread(target=attacker, daemon=True) for _ in range(3)]
    for t in threads:
        t.start()
    time.sleep(0.3)  # the attack is under way before the tasks start
    started = time.monotonic()
    results = run_all(4, step="9", timeout=30, heartbeat=None)
    took = time.monotonic() - started
    try:
        assert all(isinstance(r, Bootstrapped) for r in results), results
        spec = results[0].cluster_spec().as_dict()
        assert all(r.cluster_spec().as_dict() == spec for r in results)  # one cluster, the servers' real one
        assert [f"localhost:{r.server.port}" for r in results] == spec["worker"]
        assert took < 20
    finally:
        stop_attacks.set()
        for t in threads:
            t.join(10)
        stop(results)
    assert volleys[0] > 0


@pytest.mark.slurm
def test_with_munge_thousands_of_impostor_calls_change_nothing(slurm_cluster: dict[str, str]) -> None:
    """While rank 0 waits for rank 1, thousands of calls claim rank 1 with the right key but no
    credential or a forged one, and clients connect and never send: all are refused and logged,
    and once the real rank 1 comes, the table is the real one and every task bootstraps."""
    step = "12"
    impostor = [encode_contribution(Header(f"77.{step}", "table", 1, 0), Records([1], [4242], [4243]), Failure()),
                encode_contribution(Header(f"77.{step}", "table", 1, 0, b"MUNGE:forged"),
                                    Records([1], [4242], [4243]), Failure())]
    results: list[Any] = [None] * 4

    def task(rank: int) -> None:
        environ = {**env(rank, 4, step), "SLURM_CONF": slurm_cluster["SLURM_CONF"]}
        try:
            results[rank] = bootstrap(environ=environ, timeout=30, auth="munge", heartbeat=None)
        except Exception as exc:  # noqa: BLE001 - collected for the assertions
            results[rank] = exc

    runners = {r: threading.Thread(target=task, args=(r,)) for r in range(4)}
    for rank in (0, 2, 3):
        runners[rank].start()
    leader = rendezvous_ports(launch_key(env(0, 4, step)))[0]
    calls = 0
    idle = []
    try:
        with grpc.insecure_channel(f"127.0.0.1:{leader}") as channel:
            join = channel.stream_stream(JOIN)
            grpc.channel_ready_future(channel).result(timeout=10)
            for _ in range(20):  # connect and never send
                idle.append(socket.create_connection(("127.0.0.1", leader), timeout=1))
            started = time.monotonic()
            while calls < 2000:
                try:
                    list(join(iter(impostor[calls % 2]), timeout=2))
                except grpc.RpcError as exc:
                    assert exc.code() == grpc.StatusCode.UNAUTHENTICATED, exc.details()
                calls += 1
            took = time.monotonic() - started
        runners[1].start()
        for t in runners.values():
            t.join(60)
        assert all(isinstance(r, Bootstrapped) for r in results), results
        spec = results[0].cluster_spec().as_dict()
        assert [f"localhost:{r.server.port}" for r in results] == spec["worker"]  # 4242 nowhere
        assert results[0]._member.coordinator.refused == 2000 and took < 30
    finally:
        for sock in idle:
            sock.close()
        stop(results)


def test_a_second_watch_for_a_watched_task_is_refused_and_kills_nobody() -> None:
    def probe(b: Bootstrapped) -> Any:
        if b.rank == 0:
            deadline = time.monotonic() + 10
            while 1 not in b._tower._below and time.monotonic() < deadline:  # rank 1's own watch first
                time.sleep(0.01)
            b.barrier("watched", timeout=20)
            b.barrier("probed", timeout=20)
            return b.failures()
        b.barrier("watched", timeout=20)
        leader = b.cluster_spec().task_address("worker", 0)
        impostor = [pb.Beat(job_key=b.job_key, source=1, node=0).SerializeToString()]  # as rank 1, again
        with grpc.insecure_channel(leader) as channel:
            with pytest.raises(grpc.RpcError) as twice:
                list(channel.stream_stream(WATCH)(iter(impostor), timeout=3))
            with pytest.raises(grpc.RpcError) as garbage:
                list(channel.stream_stream(WATCH)(iter([b"\x08" * 20]), timeout=3))
        b.barrier("probed", timeout=20)
        return twice.value.code(), twice.value.details(), garbage.value.code()

    results = run_all(2, step="10", timeout=20, then=probe)
    assert results[0] == {}, results  # nobody was declared dead
    code, details, garbage = results[1]
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "watched already" in details
    assert garbage in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION)


def test_a_watch_that_never_beats_is_refused_after_a_while(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watch, "FIRST_BEAT", 0.5)

    def probe(b: Bootstrapped) -> Any:
        if b.rank == 0:
            b.barrier("probed", timeout=20)
            return b.failures()
        leader = b.cluster_spec().task_address("worker", 0)
        silent = threading.Event()

        def nothing() -> Any:
            silent.wait(10)  # a caller that opens the call and sends nothing
            yield from ()

        started = time.monotonic()
        with grpc.insecure_channel(leader) as channel:
            with pytest.raises(grpc.RpcError) as info:
                list(channel.stream_stream(WATCH)(nothing(), timeout=8))
        silent.set()
        took = time.monotonic() - started
        b.barrier("probed", timeout=20)
        return info.value.code(), info.value.details(), took

    results = run_all(2, step="14", timeout=20, then=probe)
    assert results[0] == {}, results
    code, details, took = results[1]
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "without a first beat within 0.5 s" in details, details
    assert took < 4


def test_a_watch_where_nobody_watches_is_refused_as_such() -> None:
    """Tasks started with failure detection off: a watch call gets a refusal, not an unknown error."""
    results = run_all(2, step="13", timeout=20, heartbeat=None)
    try:
        beat = pb.Beat(job_key=results[1].job_key, source=1, node=0).SerializeToString()
        with grpc.insecure_channel(f"localhost:{results[0].server.port}") as channel:
            with pytest.raises(grpc.RpcError) as info:
                list(channel.stream_stream(WATCH)(iter([beat]), timeout=5))
        assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION, info.value
        assert "watches no task" in info.value.details()
    finally:
        stop(results)


def test_oversized_and_endless_calls_are_cut_off() -> None:
    results = run_all(2, step="11", timeout=20, heartbeat=None)
    try:
        port = results[0].server.port
        with grpc.insecure_channel(f"localhost:{port}",
                                   options=[("grpc.max_send_message_length", 2 * MAX_MESSAGE)]) as channel:
            join = channel.stream_stream(JOIN)
            with pytest.raises(grpc.RpcError) as big:
                list(join(iter([b"\x0a" + b"\xff" * (MAX_MESSAGE + 10)]), timeout=5))
            assert big.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            key = launch_key(env(0, 2, "11"))
            endless = itertools.chain(encode_contribution(Header(key, "table", 1), Records(), Failure()),
                                      (b"\x0a\x02ab" for _ in range(100_000)))
            with pytest.raises(grpc.RpcError) as many:
                list(join(endless, timeout=5))
            assert many.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            read = [0]

            def foreign() -> Any:  # another launch's call, then more than any job sends
                yield encode_contribution(Header("1.0", "table", 1), Records(), Failure())[0]
                for _ in range(100_000):
                    read[0] += 1
                    yield b"\x0a\x00"
            with pytest.raises(grpc.RpcError) as other:
                list(join(foreign(), timeout=5))
            assert other.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "launch" in other.value.details()
            assert read[0] < 10_000  # refused at its first chunk, not after reading the rest
    finally:
        stop(results)


def _contribution(round_name: str, source: int = 1) -> list[bytes]:
    return encode_contribution(Header("5.0", round_name, source), Records(), Failure())


def test_callers_cannot_open_rounds_or_wait_without_bound() -> None:
    async def scenario() -> tuple[int, int, int, int]:
        coordinator = Coordinator(Identity("5.0", 0, "n0", "worker", 0), 4, [1, 2, 3])

        async def call(round_name: str, seconds: float) -> str:
            try:
                await coordinator.join(_contribution(round_name), time.monotonic() + seconds)
            except Refused as exc:
                return exc.code + ": " + exc.detail
            return "answered"

        # One round, many callers claiming to be rank 1: beyond 2 per source (+8) they are refused.
        crowd = await asyncio.gather(*(call("same", 0.5) for _ in range(40)))
        crowded = sum("callers already wait" in c for c in crowd)
        # Many rounds at once: beyond MOST_OPEN_ROUNDS they are refused.
        rounds = await asyncio.gather(*(call(f"r{i}", 0.5) for i in range(MOST_OPEN_ROUNDS + 50)))
        refused = sum("rounds are open" in r for r in rounds)
        # The abandoned rounds are forgotten: a real round still opens and completes.
        coordinator.rounds.publish("later", [b""])
        answered = await call("later", 1.0)
        return crowded, refused, coordinator.rounds.open, int(answered == "answered")

    crowded, refused, still_open, answered = asyncio.run(scenario())
    assert crowded == 40 - (2 * 3 + 8)
    assert refused == 50
    assert still_open == 0 and answered == 1


def test_a_caller_that_goes_away_leaves_no_round_open() -> None:
    async def scenario() -> tuple[int, int]:
        coordinator = Coordinator(Identity("5.0", 0, "n0", "worker", 0), 4, [1, 2, 3])
        call = asyncio.ensure_future(coordinator.join(_contribution("gone"), time.monotonic() + 60))
        await asyncio.sleep(0.1)
        opened = coordinator.rounds.open
        call.cancel()  # its connection closed: gRPC cancels the handler
        await asyncio.gather(call, return_exceptions=True)
        return opened, coordinator.rounds.open

    assert asyncio.run(scenario()) == (1, 0)


def test_identify_callers_before_the_token_are_bounded() -> None:
    async def scenario() -> int:
        coordinator = Coordinator(Identity("5.0", 0, "n0", "worker", 0), 4, [1, 2, 3])

        async def ask() -> str:
            try:
                await coordinator.who("guess", time.monotonic() + 0.3)
            except Refused as exc:
                return exc.detail
            return "answered"

        replies = await asyncio.gather(*(ask() for _ in range(4 + 64 + 10)))
        return sum("wait to identify" in r for r in replies)

    assert asyncio.run(scenario()) == 10
