"""A hung job says where, on the real cluster: a step of 3 nodes whose tasks wait in a barrier while
one sleeps in another function and one is blocked reading a socket. ``slurm-resolver stacks`` from
outside the job (the login node), from inside its allocation (``srun --overlap``) and ``b.stacks()``
in a task name those ranks, their functions and nodes; another user is refused, and the job logs it."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..conftest import ROOT
from .test_trust_e2e import _free_port, intruder, strangers_python  # noqa: F401 (fixtures)

pytestmark = pytest.mark.slurm

TASK = textwrap.dedent("""
    import json, socket, time
    import slurm_resolver

    def sleep_elsewhere():
        time.sleep(120)

    def read_a_socket():
        mine, other = socket.socketpair()
        mine.recv(1)  # nothing ever comes (other stays open)

    b = slurm_resolver.bootstrap(timeout=60)
    if b.rank == 4:
        sleep_elsewhere()
    elif b.rank == 5:
        read_a_socket()
    elif b.rank == 1:
        time.sleep(1.0)  # the others reach the barrier
        found = b.stacks()
        print(json.dumps({"inside": str(found), "odd": [[list(c.ranks), c.frames[-1].function]
                                                        for c in found.odd()]}), flush=True)
    b.barrier("never-complete", timeout=300)
""")


@pytest.fixture(params=["munge", "secret"])
def hung_step(request: pytest.FixtureRequest, slurm_cluster: dict[str, str], tmp_path: Path
              ) -> Iterator[tuple[str, str, subprocess.Popen[str]]]:
    """A running step of 6 tasks on node1-3 (2 a node), hung; its id, what rank 1 printed of it, and srun.
    Its tasks prove themselves with MUNGE, or with a secret of the job's (as the templates' jobs do: the
    job's user asks from outside without it, by MUNGE)."""
    script = tmp_path / "task.py"
    script.write_text(TASK)
    secret = {"SLURM_RESOLVER_SECRET": os.urandom(24).hex()} if request.param == "secret" else {}
    job = subprocess.Popen(["srun", "-w", "node[1-3]", "-N3", "--ntasks-per-node=2", "--job-name", "hung-stacks",
                            sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env={**os.environ, "PYTHONPATH": str(ROOT), **secret}, start_new_session=True)
    try:
        assert job.stdout is not None
        line = job.stdout.readline()  # rank 1's, once bootstrapped and asked
        assert line.startswith("{"), (line, job.stderr.read() if job.poll() is not None and job.stderr else "")
        ids = subprocess.run(["squeue", "-h", "-n", "hung-stacks", "-o", "%i"], capture_output=True, text=True,
                             check=True).stdout.split()
        assert len(ids) == 1, ids
        yield ids[0], line, job
    finally:
        with contextlib.suppress(Exception):
            subprocess.run(["scancel", "-n", "hung-stacks"], timeout=30)
        job.kill()
        job.wait()


def _stacks(*args: str, user: str | None = None, python: str = sys.executable, path: str = str(ROOT),
            timeout: float = 60) -> subprocess.CompletedProcess[str]:
    command = [python, "-m", "slurm_resolver", "stacks", *args]
    if user is not None:
        command = ["runuser", "-u", user, "--", "env", f"PYTHONPATH={path}",
                   f"SLURM_CONF={os.environ['SLURM_CONF']}", *command]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONPATH": path})


def _odd_lines(text: str) -> dict[str, str]:
    """The lone ranks' lines: 'rank N (node)' -> the line."""
    return {line.split("    ")[-1]: line for line in text.splitlines() if "    rank " in line}


def test_stacks_name_the_odd_ranks_functions_and_nodes_from_outside_and_inside(
        hung_step: tuple[str, str, subprocess.Popen[str]], tmp_path: Path) -> None:
    job, inside, _ = hung_step
    told = json.loads(inside)
    odd = {tuple(ranks): function for ranks, function in told["odd"]}
    assert odd[(4,)] == "sleep_elsewhere" or "sleep" in told["inside"], told  # a C call (time.sleep) answers
    assert "rank 4 (node3)" in told["inside"] and "sleep_elsewhere" in told["inside"], told["inside"]
    assert "rank 5 (node3)" in told["inside"] and "read_a_socket" in told["inside"], told["inside"]

    picture = tmp_path / "stacks.svg"
    outside = _stacks(job, "--svg", str(picture))
    assert outside.returncode == 0, outside.stderr
    lines = _odd_lines(outside.stdout)
    assert "rank 4 (node3)" in lines and "rank 5 (node3)" in lines, outside.stdout
    assert "sleep_elsewhere" in outside.stdout and "read_a_socket" in outside.stdout
    assert "ranks 0-3 (4 tasks)" in outside.stdout, outside.stdout  # the barrier (rank 1 too, once it asked)
    assert "6 tasks, 6 answered" in outside.stdout
    assert picture.read_text().startswith("<svg") and "sleep_elsewhere" in picture.read_text()

    allocation = subprocess.run(["srun", "--overlap", "--jobid", job, "-n1", sys.executable, "-m", "slurm_resolver",
                                 "stacks", f"{job}.0"], capture_output=True, text=True, timeout=60,
                                env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert allocation.returncode == 0 and "rank 4 (node3)" in allocation.stdout, allocation.stderr


def test_another_user_is_refused_and_the_job_logs_it(
        hung_step: tuple[str, str, subprocess.Popen[str]], intruder: str,  # noqa: F811
        strangers_python: tuple[str, Path]) -> None:  # noqa: F811
    python, site = strangers_python
    import hostlist

    shutil.copy(hostlist.__file__, site)
    subprocess.run(["chmod", "-R", "a+rX", str(site)], check=True)
    job, _, srun = hung_step
    start = time.monotonic()
    refused = _stacks(job, user=intruder, python=python, path=str(site))
    assert refused.returncode != 0 and "refused to show its stacks" in refused.stderr, (refused.stdout,
                                                                                         refused.stderr)
    assert "not the job's uid 0" in refused.stderr and refused.stdout == "", refused.stderr
    assert time.monotonic() - start < 30
    subprocess.run(["scancel", job], timeout=30)
    _, errors = srun.communicate(timeout=60)
    assert "rank 0 refused an ask for stacks claiming to be the job's user outside it: uid" in errors, errors[-3000:]


HANGING = textwrap.dedent("""
    import os, time
    import slurm_resolver

    def stuck_in_loader():
        time.sleep(300)

    first = os.environ.get("SLURM_RESOLVER_ATTEMPT", "1") == "1"
    rank = int(os.environ["SLURM_PROCID"])
    for step in range(1, 100000):
        slurm_resolver.progress(step)
        if first and rank == 2 and step == 3:
            stuck_in_loader()
        if not first and step == 15:
            break
        time.sleep(0.2)
    print(f"rank {rank} done", flush=True)
""")


def test_run_hang_after_says_where_once_and_restarts(slurm_cluster: dict[str, str], tmp_path: Path) -> None:
    """Under ``run --hang-after``: in the first attempt rank 2 stops marking (stuck in its loader) while the
    others go on; the root prints every task's stacks once, naming rank 2 and its function, the step
    ends, and the second attempt completes."""
    script = tmp_path / "train.py"
    script.write_text(HANGING)
    start = time.monotonic()
    done = subprocess.run(["salloc", "-w", "node[1-2]", "-N2", "--ntasks-per-node=2", sys.executable, "-m",
                           "slurm_resolver", "run",
                           "--restarts", "1", "--hang-after", "8s", "--", sys.executable, str(script)],
                          capture_output=True, text=True, timeout=240, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          cwd=tmp_path)
    text = done.stdout + done.stderr
    assert done.returncode == 0, text[-4000:]
    assert text.count("the job hung") >= 1 and text.count("every task's stacks") == 1, text[-4000:]
    assert "rank 2 stayed at progress mark 3" in text, text[-4000:]
    stacks = text[text.index("every task's stacks"):]
    assert "stuck_in_loader" in stacks and "rank 2 (node2)" in stacks, stacks[:3000]
    assert sorted(line for line in done.stdout.splitlines() if line.endswith(" done")) == \
        [f"rank {r} done" for r in range(4)], text[-3000:]
    assert time.monotonic() - start < 180


WAITING = textwrap.dedent("""
    import os, time
    import slurm_resolver
    b = slurm_resolver.bootstrap(timeout=60, auth=os.environ["TEST_AUTH"])
    print(f"ready {b.rank} {b.me.port}", flush=True)
    deadline = time.monotonic() + 120
    while not os.path.exists(os.environ["TEST_DONE"]) and time.monotonic() < deadline:
        time.sleep(0.2)
    b.stop()
""")


@pytest.mark.parametrize("mode", ["munge", "secret"])
def test_an_ask_kept_by_a_squatter_is_good_for_no_other_server(
        slurm_cluster: dict[str, str], tmp_path: Path, intruder: str,  # noqa: F811
        strangers_python: tuple[str, Path], mode: str) -> None:  # noqa: F811
    """Another uid binds node1's first rendezvous port before the job and keeps the ask that the user's
    ``slurm-resolver stacks`` sends there (the command goes on to the root on the next port and gets every
    task's stacks); replayed at node2's leader, which listens on the same port number on its own address,
    and at the root, the ask is refused both times, and the job logs who was refused."""
    python, site = strangers_python
    first, second = _free_port("127.0.1.1"), _free_port("127.0.1.1")
    log = site / f"squatter-stacks-{mode}.log"
    for made in (log, Path(f"{log}.ask")):
        made.touch()
        made.chmod(0o666)
    squatter = subprocess.Popen(["runuser", "-u", intruder, "--", "env", f"PYTHONPATH={site}", python,
                                 str(site / "squatter.py"), "127.0.1.1", str(first), "4", str(log)],
                                stdout=subprocess.PIPE, text=True, start_new_session=True)
    script, done = tmp_path / "task.py", tmp_path / "done"
    script.write_text(WAITING)
    secret = {"SLURM_RESOLVER_SECRET": os.urandom(24).hex()} if mode == "secret" else {}
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TEST_AUTH": mode, "TEST_DONE": str(done),
           "SLURM_RESOLVER_RENDEZVOUS_PORTS": f"{first},{second}", **secret}
    job = None
    try:
        assert squatter.stdout is not None and squatter.stdout.readline().strip() == "ready"
        job = subprocess.Popen(["srun", "-w", "node[1-2]", "-N2", "-n4", "--job-name", "squatted-stacks",
                                sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=env, start_new_session=True)
        assert job.stdout is not None
        ports = dict(job.stdout.readline().split()[1:] for _ in range(4))
        leader = next(rank for rank, port in ports.items() if port == str(first))  # node2's: the same number
        assert ports["0"] == str(second) and int(leader) >= 2, ports
        ids = subprocess.run(["squeue", "-h", "-n", "squatted-stacks", "-o", "%i"], capture_output=True, text=True,
                             check=True).stdout.split()
        # The user asks as the templates' jobs do: by MUNGE, or with the job's secret set here too.
        user = subprocess.run([sys.executable, "-m", "slurm_resolver", "stacks", ids[0], "--ports",
                               f"{first},{second}"], capture_output=True, text=True, timeout=60, env=env)
        assert user.returncode == 0 and "4 tasks, 4 answered" in user.stdout, user.stderr
        assert Path(f"{log}.ask").stat().st_size > 0, "the squatter never got the user's ask"
        replayed = {target: subprocess.run(["runuser", "-u", intruder, "--", "env", f"PYTHONPATH={site}", python,
                                            str(site / "squatter.py"), "replay", *target.split(":"), f"{log}.ask"],
                                           capture_output=True, text=True, timeout=60).stdout.strip()
                    for target in (f"127.0.1.2:{first}", f"127.0.1.1:{second}")}
        assert all(answer.startswith("UNAUTHENTICATED") for answer in replayed.values()), replayed
        assert "taken by the step's root alone" in replayed[f"127.0.1.2:{first}"], replayed
        assert "made for another server" in replayed[f"127.0.1.1:{second}"], replayed
        done.touch()
        _, errors = job.communicate(timeout=60)
    finally:
        done.touch()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(squatter.pid, 9)
        squatter.wait()
        if job is not None and job.poll() is None:
            job.kill()
            job.wait()
    assert f"rank {leader} refused an ask for stacks claiming to be the job's user outside it: an ask from outside " \
           "the job is taken by the step's root alone (rank 0 on node1)" in errors, errors[-3000:]
