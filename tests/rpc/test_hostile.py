"""Hostile callers: a bootstrap under a flood of garbage and impostors, and every bound a caller meets."""

from __future__ import annotations

import asyncio
import itertools
import socket
import threading
import time
from types import SimpleNamespace
from typing import Any

import grpc
import pytest

from slurm_resolver.layout import launch_key
from slurm_resolver.rpc import coordination_pb2 as pb
from slurm_resolver.rpc.bootstrap import bootstrap
from slurm_resolver.rpc.bootstrapped import Bootstrapped
from slurm_resolver.rpc.calls import JOIN, TABLE, WATCH, WHO
from slurm_resolver.rpc.detection import watch as watch_module
from slurm_resolver.rpc.handlers import TaskHandlers
from slurm_resolver.rpc.messages import TABLE_ROUND, Failure, Identity, Records, Round, Source
from slurm_resolver.rpc.network.ports import rendezvous_ports
from slurm_resolver.rpc.rounds.codec import decision
from slurm_resolver.rpc.rounds.coordinator import Coordinator
from slurm_resolver.rpc.rounds.state import MOST_OPEN_ROUNDS
from slurm_resolver.rpc.shapes import Parts
from slurm_resolver.rpc.transport import Refusal, Refused
from slurm_resolver.rpc.trust.gate import Gate
from slurm_resolver.rpc.trust.identity import IdentityHandler
from slurm_resolver.rpc.trust.seals import AuthMode, Authority
from slurm_resolver.rpc.wire import MAX_MESSAGE

from .forge import call_at, first_beat, join_call, standing_in, who_call
from .test_bootstrap import JOB, env, run_all, stop


def _envelope(message: object) -> bytes:
    return bytes(pb.Envelope(header=message.SerializeToString()).SerializeToString())  # type: ignore[attr-defined]


HOSTILE_JOINS = [
    [b"\xff" * 64],
    [b""],
    join_call("1.0", TABLE_ROUND, 1),  # another launch
    [_envelope(pb.Call(job_key="77.9", round=pb.Round(kind="table"), source=4_000_000))],  # no such rank
    [_envelope(pb.Call(job_key="77.9", round=pb.Round(kind="barrier", name="x" * 10_000), source=1))],  # overlong
    [_envelope(pb.Call(job_key="77.9", round=pb.Round(kind="table"), source=1,
                       records=pb.Records(ranks=[1, 2], ports=b"\0\0")))],  # columns disagree
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
        calls: list[tuple[str, Any]] = [(JOIN.method, chunks) for chunks in HOSTILE_JOINS]
        calls += [(WHO.method, who_call("77.9", 1, port)), (WATCH.method, [b"\x01\x02"]),
                  ("/tensorflow.WorkerService/GetStatus", b"")]
        for method, payload in calls:
            try:
                if method in (JOIN.method, WATCH.method):
                    list(channel.stream_stream(method)(iter(payload), timeout=0.5))
                else:
                    channel.unary_unary(method)(payload, timeout=0.5)
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
    leader = rendezvous_ports(launch_key(env(0, 4, step)))[0]
    impostor = [join_call(f"{JOB}.{step}", TABLE_ROUND, 1, port=leader, records=Records([1], [4242], [4243])),
                join_call(f"{JOB}.{step}", TABLE_ROUND, 1, port=leader, records=Records([1], [4242], [4243]))]
    header = pb.Envelope.FromString(impostor[1][0])
    impostor[1] = [pb.Envelope(header=header.header, seal=b"MUNGE:forged").SerializeToString()]
    results: list[Any] = [None] * 4

    def task(rank: int) -> None:
        environ = {**env(rank, 4, step), "SLURM_CONF": slurm_cluster["SLURM_CONF"]}
        try:
            results[rank] = bootstrap(environ=environ, timeout=120, auth="munge", heartbeat=None)
        except Exception as exc:  # noqa: BLE001 - collected for the assertions
            results[rank] = exc

    runners = {r: threading.Thread(target=task, args=(r,)) for r in range(4)}
    for rank in (0, 2, 3):
        runners[rank].start()
    calls = 0
    idle = []
    try:
        with grpc.insecure_channel(f"127.0.0.1:{leader}") as channel:
            join = channel.stream_stream(JOIN.method)
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
        assert results[0]._member.coordinator.gate.refused == 2000 and took < 90
    finally:
        for sock in idle:
            sock.close()
        stop(results)


def test_a_second_watch_for_a_watched_task_is_refused_and_kills_nobody() -> None:
    def probe(b: Bootstrapped) -> Any:
        if b.rank == 0:
            deadline = time.monotonic() + 10
            while Source.task(1) not in b._detector.deaths.below and time.monotonic() < deadline:  # rank 1 first
                time.sleep(0.01)
            b.barrier("watched", timeout=20)
            b.barrier("probed", timeout=20)
            return b.failures()
        b.barrier("watched", timeout=20)
        leader = b.cluster_spec().task_address("worker", 0)
        port = int(leader.rpartition(":")[2])
        impostor = [first_beat(b.job_key, 1, 0, port, b._member.uplink.authority)]  # as rank 1, again
        with grpc.insecure_channel(leader) as channel:
            with pytest.raises(grpc.RpcError) as twice:
                list(channel.stream_stream(WATCH.method)(iter(impostor), timeout=3))
            with pytest.raises(grpc.RpcError) as garbage:
                list(channel.stream_stream(WATCH.method)(iter([b"\x08" * 20]), timeout=3))
        b.barrier("probed", timeout=20)
        return twice.value.code(), twice.value.details(), garbage.value.code()

    results = run_all(2, step="10", timeout=20, then=probe)
    assert results[0] == {}, results  # nobody was declared dead
    code, details, garbage = results[1]
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "watched already" in details
    assert garbage in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION)


def test_a_watch_that_never_beats_is_refused_after_a_while(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watch_module, "FIRST_BEAT", 0.5)

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
                list(channel.stream_stream(WATCH.method)(nothing(), timeout=8))
        silent.set()
        took = time.monotonic() - started
        b.barrier("probed", timeout=20)
        return info.value.code(), info.value.details(), took

    results = run_all(2, step="14", timeout=20, then=probe)
    assert results[0] == {}, results
    code, details, took = results[1]
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "without a first beat within 0.5 s" in details, details
    assert took < 4


def test_a_watch_where_nobody_watches_is_refused_as_such() -> None:
    """Tasks started with failure detection off: a watch call gets a refusal, not an unknown error."""
    results = run_all(2, step="13", timeout=20, heartbeat=None)
    try:
        beat = first_beat(results[1].job_key, 1, 0, results[0].server.port)
        with grpc.insecure_channel(f"localhost:{results[0].server.port}") as channel:
            with pytest.raises(grpc.RpcError) as info:
                list(channel.stream_stream(WATCH.method)(iter([beat]), timeout=5))
        assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION, info.value
        assert "watches no task" in info.value.details()
    finally:
        stop(results)


def test_oversized_and_endless_calls_are_cut_off() -> None:
    """Unsealed calls (auth pinned to none: where munged answers, auto would refuse them unproven)."""
    results = run_all(2, step="11", timeout=20, heartbeat=None, auth="none")
    try:
        port = results[0].server.port
        with grpc.insecure_channel(f"localhost:{port}",
                                   options=[("grpc.max_send_message_length", 2 * MAX_MESSAGE)]) as channel:
            join = channel.stream_stream(JOIN.method)
            with pytest.raises(grpc.RpcError) as big:
                list(join(iter([b"\x0a" + b"\xff" * (MAX_MESSAGE + 10)]), timeout=5))
            assert big.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            key = launch_key(env(0, 2, "11"))
            endless = itertools.chain(join_call(key, TABLE_ROUND, 1, port=port),
                                      (b"\x0a\x02ab" for _ in range(100_000)))
            with pytest.raises(grpc.RpcError) as many:
                list(join(endless, timeout=5))
            assert many.value.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.DEADLINE_EXCEEDED)
            read = [0]

            def foreign() -> Any:  # another launch's call, then more than any job sends
                yield join_call("1.0", TABLE_ROUND, 1)[0]
                for _ in range(100_000):
                    read[0] += 1
                    yield b"\x0a\x00"
            with pytest.raises(grpc.RpcError) as other:
                list(join(foreign(), timeout=5))
            assert other.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "launch" in other.value.details()
            assert read[0] < 10_000  # refused at its first chunk, not after reading the rest
    finally:
        stop(results)


def _authority() -> Authority:
    """The proofs of launch 5.0's tasks after its first round: its key is known."""
    authority = Authority(AuthMode.NONE, "a test")
    authority.learn(b"k" * 32)
    return authority


def _coordinator() -> Coordinator:
    """Rank 0 of launch 5.0, leading ranks 1-3, on port 8000."""
    return Coordinator(Gate(Identity("5.0", 0, "n0", "worker", 0), 4, _authority(), 8000), map(Source.task, [1, 2, 3]),
                       True)


def _contribution(round: Round, source: int = 1) -> list[bytes]:
    return join_call("5.0", round, source, port=8000, authority=_authority())


def test_callers_cannot_open_rounds_or_wait_without_bound() -> None:
    async def scenario() -> tuple[int, int, int, int]:
        coordinator = _coordinator()

        async def call(round: Round, seconds: float) -> str:
            try:
                await call_at(coordinator, _contribution(round), seconds)
            except Refused as exc:
                return exc.code.value + ": " + exc.detail
            return "answered"

        # One round, many callers claiming to be rank 1: beyond 2 per source (+8) they are refused.
        crowd = await asyncio.gather(*(call(Round.barrier("same", 0), 0.5) for _ in range(40)))
        crowded = sum("callers already wait" in c for c in crowd)
        # Many rounds at once: beyond MOST_OPEN_ROUNDS they are refused.
        rounds = await asyncio.gather(*(call(Round.barrier("r", i), 0.5) for i in range(MOST_OPEN_ROUNDS + 50)))
        refused = sum("rounds are open" in r for r in rounds)
        # The abandoned rounds are forgotten: a real round still opens and completes.
        coordinator.publish(Round.barrier("later", 0), decision(Failure()))
        answered = await call(Round.barrier("later", 0), 1.0)
        return crowded, refused, coordinator.open_rounds, int(answered == "answered")

    crowded, refused, still_open, answered = asyncio.run(scenario())
    assert crowded == 40 - (2 * 3 + 8)
    assert refused == 50
    assert still_open == 0 and answered == 1


def test_a_caller_that_goes_away_leaves_no_round_open() -> None:
    async def scenario() -> tuple[int, int]:
        coordinator = _coordinator()
        call = asyncio.ensure_future(call_at(coordinator, _contribution(Round.barrier("gone", 0)), 60))
        await asyncio.sleep(0.1)
        opened = coordinator.open_rounds
        call.cancel()  # its connection closed: gRPC cancels the handler
        await asyncio.gather(call, return_exceptions=True)
        return opened, coordinator.open_rounds

    assert asyncio.run(scenario()) == (1, 0)


def test_identity_calls_before_the_launch_key_is_known_take_no_slot() -> None:
    """A server that cannot check seals yet answers at once that it is not ready: nobody waits there,
    so strangers cannot fill what real tasks need; with the key, a stranger's seal is refused."""
    async def scenario() -> tuple[list[Refusal], Refusal]:
        coordinator = IdentityHandler(Gate(Identity("5.0", 0, "n0", "worker", 0), 4, Authority(AuthMode.NONE, "a test"),
                                           8000))

        async def ask() -> Refusal:
            try:
                await coordinator.who(who_call("5.0", 1, 8000), time.monotonic() + 30)
            except Refused as exc:
                return exc.code
            raise AssertionError("answered without a key")

        early = await asyncio.gather(*(ask() for _ in range(200)))
        coordinator.gate.authority.learn(b"k" * 32)
        return early, await ask()

    early, later = asyncio.run(scenario())
    assert set(early) == {Refusal.UNREADY} and later is Refusal.UNAUTHENTICATED


def test_without_the_secret_nobody_opens_rounds_watches_or_announces() -> None:
    """Calls with the launch's key but no seal of its secret: thousands of barriers, announcements
    and watches claiming a task below are refused at their first message; no round opens, no
    notice is decided, nobody is watched (before: 1,024 open rounds blocked the job's barriers,
    8,200 forged announcements made a real one fail, a watch slot taken forged deaths)."""
    async def scenario() -> tuple[set[Refusal], int, int, bool]:
        mine = Authority(AuthMode.SECRET, "a test", secret=b"s" * 24, launch="5.0")
        server = TaskHandlers(Identity("5.0", 0, "n0", "worker", 0), 4, mine, 8000, map(Source.task, [1, 2, 3]), True)
        coordinator = server.rounds
        stranger = Authority(AuthMode.SECRET, "a stranger", secret=b"t" * 24, launch="5.0")
        codes: set[Refusal] = set()
        for i in range(1500):
            for round in (Round.barrier("b", i), Round.announce(f"done {i}")):
                for authority in (stranger, None):
                    try:
                        await call_at(coordinator, join_call("5.0", round, 1, port=8000, authority=authority), 1)
                    except Refused as exc:
                        codes.add(exc.code)

        class Watching:
            sources = frozenset({Source.task(1)})

            def serve(self, *args: Any) -> Any:
                raise AssertionError("a stranger's beat was believed")

        server.watched.set(Watching())

        async def beats() -> Any:
            yield first_beat("5.0", 1, 0, 8000, stranger)

        try:
            async for _ in server.watching.watch(beats()):
                pass
        except Refused as exc:
            codes.add(exc.code)
        return codes, coordinator.open_rounds, coordinator.known_rounds, server.gate.refused >= 6000

    codes, still_open, known, counted = asyncio.run(scenario())
    assert codes == {Refusal.UNAUTHENTICATED} and still_open == 0 and known == 0 and counted


class Squatter:
    """Another user's server on the first rendezvous port: it refuses every call as ``code`` says,
    or (None) accepts it and never answers."""

    world_size = 3

    @property
    def parts(self) -> Parts:
        return standing_in(self)

    def __init__(self, code: Refusal | None, detail: str) -> None:
        self.code, self.detail = code, detail

    def open_call(self, first: bytes) -> Any:
        if self.code is not None:
            raise Refused(self.code, self.detail)
        return SimpleNamespace(chunks=())

    async def join(self, call: Any, more: Any, deadline: float) -> Any:
        await asyncio.Event().wait()  # silent: holds the call

    def sent(self, round: Any) -> None:
        pass

    async def who(self, message: bytes, deadline: float) -> bytes:
        raise Refused(Refusal.INVALID, self.detail)

    async def stacks(self, message: bytes, deadline: float) -> bytes:
        raise Refused(Refusal.INVALID, self.detail)

    async def watch(self, beats: Any) -> Any:
        raise Refused(Refusal.INVALID, self.detail)
        yield b""  # pragma: no cover


@pytest.mark.parametrize("code, detail, late", [
    (Refusal.INVALID, "a malformed call (DecodeError)", 0.0),
    (Refusal.DEADLINE, "worker:0 (rank 0) on node1, which gathers the bootstrap for 3 tasks, still waited for "
                       "ranks 2", 0.0),
    (Refusal.UNAUTHENTICATED, "a seal not made with this launch's key: not a task of this launch", 3.0),
    (None, "", 0.0),  # silent
])
def test_a_squatters_refusal_or_silence_on_the_first_port_only_sends_the_tasks_to_the_next(
        code: Refusal | None, detail: str, late: float) -> None:
    """A refusal counts only from a server that proved itself (as an answer does): from a squatter on
    the first rendezvous port it means "not here", and a silent one is left after a few seconds; the
    leader, on the next port (and a few seconds late), is found by every task."""
    from slurm_resolver.resolution import resolve
    from slurm_resolver.rpc.bootstrap import bootstrap_async
    from slurm_resolver.rpc.network.in_process import LocalNetwork
    from slurm_resolver.rpc.simulation.simulate import srun_environ

    base = resolve(srun_environ(1, 3), resolves=lambda name: True)
    host, ports = base.hosts[base.placement.nodes[0]], [31101, 31102, 31103]
    env = {"SLURM_RESOLVER_RENDEZVOUS_PORTS": ",".join(map(str, ports))}

    async def scenario() -> tuple[list[Any], float]:
        network = LocalNetwork()
        await network.serve(host, ports[:1], lambda port: Squatter(code, detail), TABLE)

        async def task(rank: int) -> Any:
            await asyncio.sleep(late if rank == 0 else 0.0)
            return await bootstrap_async(base.as_rank(rank), exchange="rendezvous", timeout=20, environ=env,
                                         network=network, heartbeat=None, auth="none")

        started = time.monotonic()
        done = await asyncio.gather(*(task(r) for r in range(3)), return_exceptions=True)
        took = time.monotonic() - started
        await asyncio.gather(*(b.aio.stop(0) for b in done if isinstance(b, Bootstrapped)))
        return list(done), took

    done, took = asyncio.run(scenario())
    assert all(isinstance(b, Bootstrapped) for b in done), done
    assert [b.me.port for b in done][0] == ports[1] and took < late + 10, took
