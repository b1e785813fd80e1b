"""Bounds per attacker, not per call, over real sockets: memory, calls not yet proven, open files, logs.

A stranger who knows only a server's port (and the launch's key, which squeue shows) may open
as many connections and calls as it likes: the server's memory, its slots for calls not yet
proven and its log stay bounded, and the job's own tasks still get through.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from slurm_resolver.rpc import coordination_pb2 as pb
from slurm_resolver.rpc.messages import TABLE_ROUND, Records, Round
from slurm_resolver.rpc.network.callers import MOST_UNPROVEN, UNPROVEN_SHARE
from slurm_resolver.rpc.rounds.coordinator import JOIN
from slurm_resolver.rpc.trust.identity import WHO
from slurm_resolver.rpc.trust.seals import AuthMode, Authority

from ..conftest import ROOT
from .forge import join_call

SERVER = """
import threading
from slurm_resolver.rpc.trust.seals import Authority, AuthMode
from slurm_resolver.rpc.calls import TABLE
from slurm_resolver.rpc.handlers import TaskHandlers
from slurm_resolver.rpc.messages import Source
from slurm_resolver.rpc.network.server import Server
from slurm_resolver.rpc.messages import Identity
authority = Authority(AuthMode.SECRET, "a test", secret=b"s" * 24, launch="9.0")
server = Server({"worker": ["127.0.0.1:0"]}, "worker", 0, calls=TABLE, handlers=lambda port: TaskHandlers(
    Identity("9.0", 0, "localhost", "worker", 0), 100000, authority, port, map(Source.task, range(1, 8)), True))
print(server.port, flush=True)
threading.Event().wait()
"""


@pytest.fixture()
def leader() -> Iterator[tuple[subprocess.Popen[str], int]]:
    """Rank 0 of launch 9.0 (tasks prove themselves with a secret) in a process of its own, and its port."""
    proc = subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=ROOT)
    assert proc.stdout is not None
    port = int(proc.stdout.readline())
    yield proc, port
    proc.kill()
    proc.wait()


def _rss_mb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) // 1024 for line in status if line.startswith("VmRSS"))


def _flood(port: int, message: bytes, attackers: int, calls: int) -> dict[str, int]:
    codes: dict[str, int] = {}

    def attack() -> None:
        with grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.max_send_message_length", 8 << 20)]) as ch:
            call = ch.unary_unary(JOIN.bundled_method)
            for _ in range(calls):
                try:
                    call(message, timeout=10)
                    codes["OK"] = codes.get("OK", 0) + 1
                except grpc.RpcError as exc:
                    codes[exc.code().name] = codes.get(exc.code().name, 0) + 1

    threads = [threading.Thread(target=attack) for _ in range(attackers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return codes


def test_a_flood_of_large_unproven_calls_keeps_memory_and_the_log_bounded(
        leader: tuple[subprocess.Popen[str], int]) -> None:
    """Strangers with the launch's key send the largest calls a server reads, many at once: each is
    refused from its header (no seal of the job) before its records are read, memory stays flat
    whatever the number of attackers (before: 64 held calls took rank 0 from 49 to 455 MB), the
    log says a few lines, and the job's own task still gets its answer."""
    proc, port = leader
    n = 12_000  # about 250 kB: a chunk of the largest records
    records = Records(list(range(n)), [1000] * n, [1000] * n, {r: "GPU-" + "x" * 60 for r in range(n)})
    message = pb.Bundle(messages=join_call("9.0", TABLE_ROUND, 1, port=port, records=records)[:1]).SerializeToString()
    base = _rss_mb(proc.pid)
    peaks = []
    for attackers in (32, 128):
        peak = [0]
        watching = threading.Event()

        def watch(peak: list[int] = peak, watching: threading.Event = watching) -> None:
            while not watching.is_set():
                peak[0] = max(peak[0], _rss_mb(proc.pid))
                time.sleep(0.02)

        watcher = threading.Thread(target=watch)
        watcher.start()
        codes = _flood(port, message, attackers, 10)
        watching.set()
        watcher.join()
        assert "OK" not in codes and codes.get("UNAUTHENTICATED", 0) > attackers, codes
        peaks.append(peak[0] - base)
    assert max(peaks) < 300, peaks  # MB, whatever the number of attackers
    mine = Authority(AuthMode.SECRET, "a test", secret=b"s" * 24, launch="9.0")
    real = join_call("9.0", Round.barrier("b", 0), 1, port=port, authority=mine)
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        with pytest.raises(grpc.RpcError) as answered:  # believed: it waits for the round, which never ends
            channel.unary_unary(JOIN.bundled_method)(pb.Bundle(messages=real).SerializeToString(), timeout=1)
    assert answered.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    proc.kill()
    log = proc.communicate()[1]
    lines = [line for line in log.splitlines() if "refused" in line]
    assert len(lines) <= 25, log[-2000:]  # 1,600 refusals: the first 20 and every 1,000th


def test_calls_that_never_send_their_first_message_are_cut_off_and_few_wait(
        leader: tuple[subprocess.Popen[str], int]) -> None:
    """Calls that open and send nothing, from one caller: its share of them waits, cut off after 5 s
    since they crowd others (``busy``, so that a caller that did send asks again), the rest are told at
    once that the server is busy, and nothing is held once they are cut off."""
    _, port = leader
    outcomes: list[tuple[str, float]] = []
    hold = threading.Event()

    def silent() -> Any:
        hold.wait(20)
        yield from ()

    def open_one() -> None:
        started = time.monotonic()
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            try:
                list(channel.stream_stream(JOIN.method)(silent(), timeout=15))
                outcomes.append(("OK", time.monotonic() - started))
            except grpc.RpcError as exc:
                cut = "while others wait" in (exc.details() or "")
                outcomes.append(("cut" if cut else exc.code().name, time.monotonic() - started))

    threads = [threading.Thread(target=open_one) for _ in range(MOST_UNPROVEN + 16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    hold.set()
    cut = [took for code, took in outcomes if code == "cut"]
    busy = [took for code, took in outcomes if code == "RESOURCE_EXHAUSTED"]
    waited = [took for code, took in outcomes if code == "DEADLINE_EXCEEDED"]  # below the share: they crowd nobody
    assert len(cut) >= 1 and len(busy) >= 16 and len(cut) + len(busy) + len(waited) == len(outcomes), outcomes
    assert len(cut) + len(waited) <= UNPROVEN_SHARE, outcomes
    assert all(took < 8 for took in cut) and all(took < 3 for took in busy), outcomes


def _frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload


def _literal(name: str, value: str) -> bytes:  # HPACK: a literal header, not indexed, no Huffman
    return b"\x00" + bytes([len(name)]) + name.encode() + bytes([len(value)]) + value.encode()


def drip(port: int, method: str, seconds: float) -> float | None:
    """Open a call of ``method`` over raw HTTP/2 and send its message one byte a second: when the
    server ended the call (None: not within ``seconds``)."""
    import socket

    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + _frame(4, 0, 0))
        headers = b"".join(_literal(n, v) for n, v in [
            (":method", "POST"), (":scheme", "http"), (":path", method), (":authority", f"127.0.0.1:{port}"),
            ("content-type", "application/grpc"), ("te", "trailers")])
        sock.sendall(_frame(1, 4, 1, headers) + _frame(0, 0, 1, b"\x00" + (64).to_bytes(4, "big")))  # 64 bytes due
        start, received = time.monotonic(), b""
        sock.settimeout(1.0)
        while time.monotonic() - start < seconds:
            try:
                sock.sendall(_frame(0, 0, 1, b"x"))
                data = sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return time.monotonic() - start
            if not data:
                return time.monotonic() - start
            received += data
            while len(received) >= 9 and len(received) >= 9 + int.from_bytes(received[:3], "big"):
                kind, stream = received[3], int.from_bytes(received[5:9], "big") & 0x7FFFFFFF
                received = received[9 + int.from_bytes(received[:3], "big"):]
                if (stream == 1 and kind in (1, 3)) or kind == 7:  # its trailers, RST_STREAM, or GOAWAY
                    return time.monotonic() - start
    return None


@pytest.mark.parametrize("method", [JOIN.method, JOIN.bundled_method, WHO.method])
def test_first_messages_dripped_a_byte_a_second_are_cut_off_once_they_crowd_in_every_kind_of_call(
        leader: tuple[subprocess.Popen[str], int], method: str) -> None:
    """A caller whose calls drip their first message fills its share of the calls that wait: past 5 s
    they are cut. Unary calls too: gRPC calls a unary handler only once its message came, so the
    server reads JoinBundled and WhoAreYou as streams of one message."""
    _, port = leader
    took: list[float | None] = []
    threads = [threading.Thread(target=lambda: took.append(drip(port, method, 14.0))) for _ in range(UNPROVEN_SHARE)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    cut = [t for t in took if t is not None]
    assert cut and all(t < 9 for t in cut), took


FLOOD = """
import socket, sys, threading, time
port, connections, streams, seconds = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
def frame(kind, flags, stream, payload=b""):
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload
def literal(name, value):
    return b"\\x00" + bytes([len(name)]) + name.encode() + bytes([len(value)]) + value.encode()
def headers(method):
    return b"".join(literal(n, v) for n, v in [(":method", "POST"), (":scheme", "http"), (":path", method),
        (":authority", "127.0.0.1:%d" % port), ("content-type", "application/grpc"), ("te", "trailers")])
def flood(method):
    # Calls that open and never send their message, opened again as soon as the server ends one.
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            sock = socket.create_connection(("127.0.0.1", port))
        except OSError:
            time.sleep(0.1)
            continue
        sock.sendall(b"PRI * HTTP/2.0\\r\\n\\r\\nSM\\r\\n\\r\\n" + frame(4, 0, 0))
        ids = iter(range(1, 1 << 30, 2))
        for _ in range(streams):
            sock.sendall(frame(1, 4, next(ids), headers(method)))
        sock.settimeout(0.5)
        data = b""
        while time.monotonic() < end:
            try:
                got = sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                break
            if not got:
                break
            data += got
            while len(data) >= 9 and len(data) >= 9 + int.from_bytes(data[:3], "big"):
                size, kind, flags = int.from_bytes(data[:3], "big"), data[3], data[4]
                stream, payload, data = int.from_bytes(data[5:9], "big") & 0x7FFFFFFF, data[9:9 + size], data[9 + size:]
                if kind == 4 and not flags & 1:
                    sock.sendall(frame(4, 1, 0))
                elif kind == 6 and not flags & 1:
                    sock.sendall(frame(6, 1, 0, payload))
                elif stream and (kind == 3 or (kind == 1 and flags & 1)):  # that call ended: another
                    sock.sendall(frame(1, 4, next(ids), headers(method)))
        sock.close()
threads = [threading.Thread(target=flood, args=(method,)) for method in sys.argv[5:] for _ in range(connections)]
for t in threads:
    t.start()
print("flooding", flush=True)
for t in threads:
    t.join()
"""


@pytest.fixture(scope="module")
def stranger() -> str:
    """Another user of this host (the tests run as root, which may make one)."""
    import os
    import pwd

    if os.getuid() != 0:
        pytest.skip("needs root, to run a stranger's flood as another user")
    try:
        pwd.getpwnam("srtest-intruder")
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                        "srtest-intruder"], check=True, capture_output=True)
    return "srtest-intruder"


def test_one_strangers_flood_costs_only_its_share_of_a_server(leader: tuple[subprocess.Popen[str], int],
                                                              stranger: str) -> None:
    """Another user keeps 600 silent Join and JoinBundled calls open (re-opened as soon as they are
    cut off): more than every slot for calls not yet proven (32) and every call a server takes
    (512). Each caller is held to its share of both, so the job's own calls still get in."""
    import os
    import signal

    _, port = leader
    flood = subprocess.Popen(["runuser", "-u", stranger, "--", "/usr/bin/python3", "-c", FLOOD, str(port), "5",
                              "60", "25", JOIN.method, JOIN.bundled_method], stdout=subprocess.PIPE, text=True,
                             start_new_session=True)
    mine = Authority(AuthMode.SECRET, "a test", secret=b"s" * 24, launch="9.0")
    codes = []
    try:
        assert flood.stdout is not None and flood.stdout.readline().strip() == "flooding"
        time.sleep(3.0)  # every call of the flood is open
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            for count in range(6):
                real = join_call("9.0", Round.barrier("flooded", count), 1, port=port, authority=mine)
                try:
                    channel.unary_unary(JOIN.bundled_method)(pb.Bundle(messages=real).SerializeToString(), timeout=1.5)
                    codes.append("OK")
                except grpc.RpcError as exc:
                    codes.append(exc.code().name if exc.code() != grpc.StatusCode.RESOURCE_EXHAUSTED else
                                 f"{exc.code().name}: {exc.details()}")
    finally:  # runuser passes no signal on: the flood's process group is killed
        os.killpg(flood.pid, signal.SIGKILL)
        flood.wait()
    # The barrier's other tasks never come: a call that got in is answered with who is missing.
    assert codes.count("DEADLINE_EXCEEDED") >= 5, codes  # not RESOURCE_EXHAUSTED (busy)


CROWDED = """
import os, resource, sys, threading, time
port, soft, hard = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
sys.path.insert(0, os.environ["TEST_ROOT"])
from tests.rpc.test_bootstrap import env
from slurm_resolver.rpc.bootstrap import bootstrap
found, files = {}, {"most": 0, "emfile": False}
def count():  # the most files this process held, and whether it ran out
    while True:
        try:
            files["most"] = max(files["most"], len(os.listdir("/proc/self/fd")))
        except OSError:
            files["emfile"] = True
        time.sleep(0.02)
threading.Thread(target=count, daemon=True).start()
def task(rank):
    try:
        environ = {**env(rank, 2, "61"), "SLURM_RESOLVER_RENDEZVOUS_PORTS": str(port), "SLURM_RESOLVER_AUTH": "none"}
        found[rank] = bootstrap(environ=environ, timeout=30, heartbeat=None)
    except Exception as exc:
        found[rank] = exc
first = threading.Thread(target=task, args=(0,))
first.start()
print("ready", flush=True)
sys.stdin.readline()  # a stranger holds hundreds of connections to rank 0 now
second = threading.Thread(target=task, args=(1,))
second.start()
first.join(); second.join()
limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
print(sorted((r, type(b).__name__) for r, b in found.items()), "limit=%d" % limit, "most=%d" % files["most"],
      "emfile=%s" % files["emfile"], flush=True)
sys.stdin.readline()  # the stranger's connections are counted now
for b in found.values():
    if hasattr(b, "stop"):
        b.stop(0)
"""


def _crowded(port: int, soft: int, hard: int) -> subprocess.Popen[str]:
    """The job's two tasks in one process whose limit of open files is ``soft`` (``hard``): rank 0 starts,
    says ``ready``, and rank 1 starts once told (a line on its input); then the outcome in one line."""
    import os

    return subprocess.Popen([sys.executable, "-c", CROWDED, str(port), str(soft), str(hard)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "TEST_ROOT": str(ROOT)})


def test_idle_connections_do_not_use_up_the_open_files_a_leader_needs() -> None:
    """A process started with the common soft limit of open files (here 256) whose leader's port a
    stranger floods with 400 idle connections: the bootstrap raised the limit to the hard one, as
    servers do, and the job's second task still gets in."""
    import resource
    import socket

    from slurm_resolver.rpc.network.ports import rendezvous_ports

    port = rendezvous_ports("spare-61")[0]
    proc = _crowded(port, 256, resource.getrlimit(resource.RLIMIT_NOFILE)[1])
    assert proc.stdout is not None and proc.stdin is not None
    idle = []
    try:
        assert proc.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 20
        while len(idle) < 400 and time.monotonic() < deadline:
            try:
                idle.append(socket.create_connection(("localhost", port), timeout=1))
            except OSError:
                time.sleep(0.05)  # rank 0 is not listening yet
        assert len(idle) == 400
        proc.stdin.write("go\n")
        proc.stdin.flush()
        said = proc.stdout.readline()
    finally:
        for sock in idle:
            sock.close()
        proc.kill()
        proc.wait()
    assert said.startswith("[(0, 'Bootstrapped'), (1, 'Bootstrapped')]") and "limit=256 " not in said, said


HOLD = """
import resource, selectors, socket, sys, threading, time
port, connections = int(sys.argv[1]), int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],) * 2)
preface = b"PRI * HTTP/2.0\\r\\n\\r\\nSM\\r\\n\\r\\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])  # then idle
reopen = threading.Event()
reopen.set()
def told():  # a line on its input: hold what it has, open no more
    sys.stdin.readline()
    reopen.clear()
threading.Thread(target=told, daemon=True).start()
chosen = selectors.DefaultSelector()
def open_one():
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=1)
        sock.sendall(preface)
    except OSError:
        return False
    sock.setblocking(False)
    chosen.register(sock, selectors.EVENT_READ)
    return True
owed = connections - sum(open_one() for _ in range(connections))
print("flooding", flush=True)
while True:  # a connection the server ends is opened again at once
    for key, _ in chosen.select(0.1):
        try:
            if key.fileobj.recv(65536):
                continue
        except BlockingIOError:
            continue
        except OSError:
            pass
        chosen.unregister(key.fileobj)
        key.fileobj.close()
        owed += 1
    while owed and reopen.is_set() and open_one():
        owed -= 1
"""


def _held(pid: int, port: int, uid: int) -> int:
    """Connections to ``port`` that the process ``pid`` accepted from a socket of user ``uid`` of this host."""
    import os

    from slurm_resolver.rpc.network.connections import socket_inode
    from slurm_resolver.rpc.network.sockets import around

    accepted = set()
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            accepted.add(socket_inode(os.readlink(f"/proc/{pid}/fd/{name}")))
        except OSError:
            continue
    sockets = around([port]) or []
    owners = {s.local: s.uid for s in sockets}
    return sum(1 for s in sockets if s.local[1] == port and s.inode in accepted and owners.get(s.remote) == uid)


def test_a_strangers_flood_of_connections_costs_it_only_its_share(stranger: str) -> None:
    """Another user holds 1,100 connections to a leader whose process may open 1,024 files, and opens
    them again as soon as they are cut: the process never runs out of files (gRPC closes connections
    beyond its own bound at once), the stranger's beyond its share are cut, and the job's second
    task still bootstraps. Before, gRPC accepted them all, the process ran out of files, and no
    task of it could open anything."""
    import os
    import pwd
    import signal

    from slurm_resolver.rpc.network.callers import CONNECTIONS_SHARE
    from slurm_resolver.rpc.network.ports import rendezvous_ports

    port = rendezvous_ports("spare-62")[0]
    proc = _crowded(port, 1024, 1024)
    assert proc.stdout is not None and proc.stdin is not None
    flood = None
    try:
        assert proc.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 20
        while not _listening(port) and time.monotonic() < deadline:
            time.sleep(0.05)  # rank 0 is not listening yet
        flood = subprocess.Popen(["runuser", "-u", stranger, "--", "/usr/bin/python3", "-c", HOLD, str(port), "1100"],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True)
        assert flood.stdout is not None and flood.stdin is not None
        assert flood.stdout.readline().strip() == "flooding"
        time.sleep(3.0)  # the leader is flooded
        proc.stdin.write("go\n")
        proc.stdin.flush()
        said = proc.stdout.readline()
        flood.stdin.write("hold\n")  # it keeps what it has, and opens no more
        flood.stdin.flush()
        time.sleep(2.0)
        held = _held(proc.pid, port, pwd.getpwnam(stranger).pw_uid)
    finally:
        if flood is not None:  # runuser passes no signal on: the flood's process group is killed
            os.killpg(flood.pid, signal.SIGKILL)
            flood.wait()
        proc.kill()
        errors = proc.communicate()[1]
    assert said.startswith("[(0, 'Bootstrapped'), (1, 'Bootstrapped')]") and "emfile=False" in said, (said, errors)
    assert held <= CONNECTIONS_SHARE, (held, said, errors[-3000:])
    assert "File descriptor limit reached" not in errors and "held more than" in errors, errors[-2000:]


def _listening(port: int) -> bool:
    import socket

    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


@pytest.mark.parametrize("hard, said", [(1024, True), (1 << 20, False)])
def test_a_hard_limit_of_open_files_too_low_for_the_jobs_size_is_said(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, hard: int, said: bool) -> None:
    """1,100 connections of one stranger used to exhaust a hard limit of 1,024 without a word: a
    leader needs a few files per task of its node and child leader, and each stranger may hold its
    share of calls."""
    import resource

    from slurm_resolver.resolution import resolve
    from slurm_resolver.rpc import start as phases
    from slurm_resolver.rpc.simulation.simulate import srun_environ

    monkeypatch.setattr(resource, "getrlimit", lambda which: (hard, hard))
    cluster = resolve(srun_environ(4, 8), resolves=lambda name: True)
    phases._open_files(cluster, 8)
    assert ("may open only 1024 files; a node leader of this job needs about" in caplog.text) is said, caplog.text
