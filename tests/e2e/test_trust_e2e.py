"""Trust on the real cluster: peers proven by MUNGE (the test cluster runs munged) or by the job's secret,
against another user's calls and another user's server on a port the tasks probe."""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..conftest import ROOT, json_objects

pytestmark = pytest.mark.slurm

INTRUDER_USER = "srtest-intruder"

TASK = textwrap.dedent("""
    import json, os, sys, time
    from slurm_resolver import bootstrap
    b = bootstrap(timeout=60, auth=os.environ["TEST_AUTH"])
    where = os.environ["TEST_DIR"]
    if b.rank == 0:
        with open(os.path.join(where, "target.json.tmp"), "w") as f:
            json.dump({"address": b.me.address, "key": b.job_key}, f)
        os.rename(os.path.join(where, "target.json.tmp"), os.path.join(where, "target.json"))
    deadline = time.monotonic() + 60
    while not os.path.exists(os.path.join(where, "attacked")) and time.monotonic() < deadline:
        time.sleep(0.1)
    b.barrier("after-the-attack", timeout=30)  # the job still works
    print(json.dumps({"rank": b.rank, "auth": b.authenticated, "spec": b.cluster_spec().as_dict()}), flush=True)
    b.stop()
""")


@pytest.fixture(scope="module")
def intruder() -> str:
    try:
        pwd.getpwnam(INTRUDER_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", INTRUDER_USER],
                       check=True, capture_output=True)
    return INTRUDER_USER


def credential(as_user: str | None, payload: str) -> bytes:
    """A MUNGE credential minted by ``as_user`` (this user where None) with munge's own command."""
    from slurm_resolver.environment import snapshot
    from slurm_resolver.munge import socket_path

    command = ["munge", "-S", socket_path(snapshot()), "-s", payload]
    if as_user:
        command = ["runuser", "-u", as_user, "--", *command]
    return subprocess.run(command, capture_output=True, check=True, timeout=30).stdout.strip()


def attack(target: dict[str, str], as_user: str | None, payload_key: str) -> dict[str, object]:
    """Present the target's key as rank 1 to three rounds, each call sealed with a MUNGE credential
    minted by ``as_user`` for the same call but of launch ``payload_key``; what the server answered."""
    import hashlib

    import grpc

    from slurm_resolver.rpc import coordination_pb2 as pb
    from slurm_resolver.rpc.calls import JOIN
    from slurm_resolver.rpc.messages import Round, RoundKind

    from ..rpc.forge import join_call

    port = int(target["address"].rpartition(":")[2])
    answers = {}
    for round in (Round(RoundKind.TABLE), Round.announce("training-done"), Round(RoundKind.VERIFIED)):
        nonce = b"n" * 16
        sent = join_call(target["key"], round, 1, port=port, nonce=nonce)
        meant = join_call(payload_key, round, 1, port=port, nonce=nonce)
        header = pb.Envelope.FromString(meant[0]).header
        minted = credential(as_user, f"slurm-resolver/4 call {hashlib.sha256(header).hexdigest()}")
        forged = pb.Envelope(header=pb.Envelope.FromString(sent[0]).header, seal=minted).SerializeToString()
        with grpc.insecure_channel(target["address"]) as channel:
            try:
                list(channel.stream_stream(JOIN.method)(iter([forged]), timeout=5))
                answers[round.kind.value] = "ACCEPTED"
            except grpc.RpcError as exc:
                answers[round.kind.value] = f"{exc.code().name}: {exc.details()}"
    # A leader's first-round question "who are you?" (answered under MUNGE with a credential that
    # carries the launch's key, while a task has no table yet), asked of a task that holds the table.
    from slurm_resolver.rpc.calls import WHO

    from ..rpc.forge import who_call

    question = pb.Envelope.FromString(who_call(target["key"], 1, port, early=True))
    minted = credential(as_user, f"slurm-resolver/4 call {hashlib.sha256(question.header).hexdigest()}")
    with grpc.insecure_channel(target["address"]) as channel:
        try:
            channel.unary_unary(WHO.method)(pb.Envelope(header=question.header, seal=minted).SerializeToString(),
                                            timeout=5)
            asked = "ANSWERED"
        except grpc.RpcError as exc:
            asked = f"{exc.code().name}: {exc.details()}"
    return {"uid": pwd.getpwnam(as_user).pw_uid if as_user else os.getuid(), "answers": answers, "asked": asked}


@pytest.mark.parametrize("mode", ["munge", "secret"])
def test_strangers_are_refused_and_named_and_the_job_still_works(slurm_cluster: dict[str, str], tmp_path: Path,
                                                                  intruder: str, mode: str) -> None:
    tmp_path.chmod(0o777)
    script = tmp_path / "task.py"
    script.write_text(TASK)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TEST_DIR": str(tmp_path), "TEST_AUTH": mode}
    if mode == "secret":
        env["SLURM_RESOLVER_SECRET"] = os.urandom(24).hex()
    job = subprocess.Popen(["srun", "-N2", "-n3", sys.executable, str(script)], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, env=env)
    target_file = tmp_path / "target.json"
    deadline = time.monotonic() + 60
    while not target_file.exists() and time.monotonic() < deadline and job.poll() is None:
        time.sleep(0.1)
    target = json.loads(target_file.read_text())
    # Another user, who read the job's key (squeue shows it), presents it with a credential of its own uid.
    stranger = attack(target, intruder, target["key"])
    # A process of this user but not of this launch: its credential names its own launch.
    other_job = attack(target, None, "999.0")
    (tmp_path / "attacked").touch()
    out, err = job.communicate(timeout=120)
    assert job.returncode == 0, err
    assert stranger["uid"] == pwd.getpwnam(intruder).pw_uid
    for answers in (stranger["answers"], other_job["answers"]):
        assert all(a.startswith("UNAUTHENTICATED") for a in answers.values()), answers  # type: ignore[union-attr]
        assert not any(target["key"] in a for a in answers.values())  # type: ignore[union-attr]  # no key told
    for asked in (stranger["asked"], other_job["asked"]):  # no first-round answer once the table is out
        assert asked.startswith("UNAUTHENTICATED" if mode == "secret" else "INVALID_ARGUMENT"), asked  # type: ignore[union-attr]
        assert "past the first round" in asked or mode == "secret", asked  # type: ignore[operator]
    if mode == "munge":
        assert f"({intruder}), not the job's uid 0 (root)" in err and "claiming rank 1" in err  # in rank 0's log
        assert "presented a credential made for another message" in err
    else:
        assert "claiming rank 1: a seal not made with this launch's key" in err
    rows = json_objects(out)
    assert len(rows) == 3 and all(r["auth"].startswith("MUNGE through" if mode == "munge" else "a secret")
                                  for r in rows)
    assert len({json.dumps(r["spec"], sort_keys=True) for r in rows}) == 1  # the table did not change


@pytest.fixture(scope="module")
def strangers_python() -> Iterator[tuple[str, Path]]:
    """Debian's python3 and a folder another user can read, with grpcio, protobuf, the generated
    messages and the squatter: what a stranger on the cluster can run."""
    import shutil
    import tempfile

    import google.protobuf
    import grpc
    import typing_extensions

    site = Path(tempfile.mkdtemp(prefix="sr-stranger-", dir="/tmp"))
    try:
        shutil.copytree(Path(grpc.__file__).parent, site / "grpc")
        shutil.copytree(Path(google.protobuf.__file__).parent.parent, site / "google")
        shutil.copy(typing_extensions.__file__, site)
        shutil.copytree(ROOT / "slurm_resolver", site / "slurm_resolver")
        shutil.copy(Path(__file__).parent / "squatter.py", site)
        subprocess.run(["chmod", "-R", "a+rX", str(site)], check=True)
        python = shutil.which("python3", path="/usr/bin:/bin")
        assert python, "Debian's python3 is missing: scripts/testcluster up installs it"
        yield python, site
    finally:
        shutil.rmtree(site, ignore_errors=True)


def _free_port(host: str) -> int:
    """A port free on ``host``, in the range rendezvous ports come from."""
    import random
    import socket

    while True:
        port = random.randint(20000, 32000)
        with socket.socket() as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
        return port


SQUATTED = textwrap.dedent("""
    import json, os
    from slurm_resolver import bootstrap
    b = bootstrap(timeout=60, auth=os.environ["TEST_AUTH"])
    print(json.dumps({"rank": b.rank, "port": b.me.port, "spec": b.cluster_spec().as_dict(),
                      "auth": b.authenticated}), flush=True)
    b.stop()
""")


@pytest.mark.parametrize("mode", ["munge", "secret"])
def test_a_squatter_on_the_first_rendezvous_port_is_named_and_its_table_refused(
        slurm_cluster: dict[str, str], tmp_path: Path, intruder: str, strangers_python: tuple[str, Path],
        mode: str) -> None:
    """Another user binds the first rendezvous port on node1 before the job, and answers every
    call with a table naming itself as every task. The tasks meet it first, refuse its answer
    (no seal of this job), name it, and bootstrap with the real leader on the next port."""
    python, site = strangers_python
    first, second = _free_port("127.0.1.1"), _free_port("127.0.1.1")
    log = site / f"squatter-{mode}.log"
    log.touch()
    log.chmod(0o666)
    squatter = subprocess.Popen(["runuser", "-u", intruder, "--", "env", f"PYTHONPATH={site}", python,
                                 str(site / "squatter.py"), "127.0.1.1", str(first), "4", str(log)],
                                stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert squatter.stdout is not None and squatter.stdout.readline().strip() == "ready"
        script = tmp_path / "task.py"
        script.write_text(SQUATTED)
        env = {**os.environ, "PYTHONPATH": str(ROOT), "TEST_AUTH": mode,
               "SLURM_RESOLVER_RENDEZVOUS_PORTS": f"{first},{second}"}
        if mode == "secret":
            env["SLURM_RESOLVER_SECRET"] = os.urandom(24).hex()
        out = subprocess.run(["srun", "-w", "node[1-2]", "-N2", "-n4", sys.executable, str(script)], env=env,
                             capture_output=True, text=True, timeout=120)
    finally:  # runuser passes no signal on: the squatter itself, in runuser's process group, is killed
        with contextlib.suppress(ProcessLookupError):
            os.killpg(squatter.pid, signal.SIGKILL)
        squatter.wait()
    assert out.returncode == 0, out.stderr
    rows = json_objects(out.stdout)
    assert len(rows) == 4, out.stderr
    assert {r["rank"]: r["port"] for r in rows}[0] == second  # the leader took the next port
    assert all(a != f"node1:{first}" for r in rows for a in r["spec"]["worker"])  # nobody took the squatter's table
    met = log.read_text()
    assert "for table" in met, "the tasks never met the squatter"
    assert f"skipped port {first} on node1: what answers there is not a task of this job" in out.stderr
    assert "Address already in use" not in out.stderr  # the leader passed the squatted port over quietly


LATE_LEADER = textwrap.dedent("""
    import json, os, time
    from slurm_resolver import bootstrap
    if os.environ["SLURM_PROCID"] == "0":
        time.sleep(3)  # the leader comes late: the squatter has the tasks to itself for a while
    b = bootstrap(timeout=30, auth="secret")
    print(json.dumps({"rank": b.rank, "port": b.me.port}), flush=True)
    b.stop()
""")


@pytest.mark.parametrize("mode", ["invalid", "deadline", "unauthenticated", "silent"])
def test_a_squatters_refusal_or_silence_sends_the_tasks_on_to_the_leader(
        slurm_cluster: dict[str, str], tmp_path: Path, intruder: str, strangers_python: tuple[str, Path],
        mode: str) -> None:
    """Another user on the first rendezvous port refuses every call as a leader would (``invalid``,
    ``deadline: ... still waited for ranks 2``, ``unauthenticated``) or holds it without a word; the
    leader comes 3 s late on the next port. A refusal counts only from a server that proved itself,
    and a silent one is left after a few seconds: every task bootstraps with the real leader."""
    python, site = strangers_python
    first, second = _free_port("127.0.1.1"), _free_port("127.0.1.1")
    log = site / f"squatter-{mode}.log"
    log.touch()
    log.chmod(0o666)
    squatter = subprocess.Popen(["runuser", "-u", intruder, "--", "env", f"PYTHONPATH={site}", python,
                                 str(site / "squatter.py"), "127.0.1.1", str(first), "4", str(log), mode],
                                stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert squatter.stdout is not None and squatter.stdout.readline().strip() == "ready"
        script = tmp_path / "task.py"
        script.write_text(LATE_LEADER)
        env = {**os.environ, "PYTHONPATH": str(ROOT), "SLURM_RESOLVER_SECRET": os.urandom(24).hex(),
               "SLURM_RESOLVER_RENDEZVOUS_PORTS": f"{first},{second}"}
        started = time.monotonic()
        out = subprocess.run(["srun", "-w", "node[1-2]", "-N2", "-n4", sys.executable, str(script)], env=env,
                             capture_output=True, text=True, timeout=120)
        took = time.monotonic() - started
    finally:  # runuser passes no signal on: the squatter itself, in runuser's process group, is killed
        with contextlib.suppress(ProcessLookupError):
            os.killpg(squatter.pid, signal.SIGKILL)
        squatter.wait()
    assert out.returncode == 0, out.stderr
    rows = json_objects(out.stdout)
    assert len(rows) == 4 and {r["rank"]: r["port"] for r in rows}[0] == second, out.stderr
    assert "for table" in log.read_text(), "the tasks never met the squatter"
    assert took < 25, took  # not the bootstrap's timeout (30 s)
