"""bootstrap() over real gRPC: N tasks as threads on localhost, each with its own event loop."""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest

from slurm_resolver import adapters
from slurm_resolver.errors import ConfigurationError, EnvironmentVariableError, ResolutionError
from slurm_resolver.exchange import LocalExchange
from slurm_resolver.layout import launch_key
from slurm_resolver.rpc.bootstrap import bootstrap
from slurm_resolver.rpc.bootstrapped import Bootstrapped
from slurm_resolver.rpc.calls import TABLE
from slurm_resolver.rpc.handlers import TaskHandlers
from slurm_resolver.rpc.messages import Identity, Source
from slurm_resolver.rpc.network.ports import rendezvous_ports
from slurm_resolver.rpc.network.server import Server
from slurm_resolver.rpc.tree import ONCE, checked_peers
from slurm_resolver.rpc.trust.seals import AuthMode, Authority

JOB = os.environ.setdefault("SLURM_RESOLVER_TEST_JOB", str(10_000 + os.getpid() % 80_000))
"""This test run's job id (its launches' rendezvous ports follow from it): two runs on one machine at once
(two checkouts) do not meet; a process the tests start reads the same from the environment."""


def env(rank: int, size: int, step: str = "0", nodes: int = 1) -> dict[str, str]:
    """Task ``rank`` of ``size`` tasks on ``nodes`` emulated nodes that all resolve to this host."""
    per = size // nodes
    names = ["localhost", "ip6-localhost", "127.0.0.1"][:nodes]
    return {"SLURM_JOB_ID": JOB, "SLURM_STEP_ID": step, "SLURM_PROCID": str(rank), "SLURM_LOCALID": str(rank % per),
            "SLURMD_NODENAME": names[rank // per], "SLURM_STEP_NUM_TASKS": str(size),
            "SLURM_STEP_NODELIST": ",".join(names), "SLURM_STEP_TASKS_PER_NODE": f"{per}(x{nodes})",
            "CUDA_VISIBLE_DEVICES": ""}


def run_all(size: int, ranks: list[int] | None = None, step: str = "0", then: Any = None,
            extra: dict[str, str] | None = None, **kwargs: Any) -> list[Any]:
    results: list[Any] = [None] * size
    per_rank = kwargs.pop("per_rank", lambda rank: {})

    def task(rank: int) -> None:
        try:
            b = bootstrap(environ={**env(rank, size, step), **(extra or {})}, **kwargs, **per_rank(rank))
            results[rank] = then(b) if then else b
            if then:
                b.stop(1)
        except Exception as exc:  # noqa: BLE001 - collected for the assertions
            results[rank] = exc

    threads = [threading.Thread(target=task, args=(r,)) for r in (ranks if ranks is not None else range(size))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results


def stop(results: list[Any]) -> None:
    for r in results:
        if isinstance(r, Bootstrapped):
            r.stop(0)


def test_rendezvous_agrees_on_bound_ports() -> None:
    results = run_all(3, timeout=20)
    try:
        assert all(isinstance(r, Bootstrapped) for r in results), results
        assert len({str(r.cluster_spec().as_dict()) for r in results}) == 1
        ports = [r.me.port for r in results]
        assert len(set(ports)) == 3 and all(p > 0 for p in ports)
        assert results[0].me.port in rendezvous_ports(launch_key(env(0, 3)))  # the leader's port
        assert results[1].master() == f"grpc://localhost:{ports[1]}"
        assert set(results[0].timings) == {"resolve", "grpc", "server", "exchange"}  # verified in the exchange
        assert results[0].exchanged == "tree"
    finally:
        stop(results)


def test_barriers_after_the_bootstrap_meet_in_order() -> None:
    def twice(b: Bootstrapped) -> int:
        b.barrier("step", timeout=10)
        b.barrier("step", timeout=10)
        return b.rank

    assert run_all(4, then=twice, timeout=20, step="4") == [0, 1, 2, 3]


def test_a_barrier_nobody_else_reaches_names_the_missing() -> None:
    def alone(b: Bootstrapped) -> str:
        if b.rank == 1:
            try:
                b.barrier("lonely", timeout=1.5)
            except ResolutionError as exc:
                return str(exc)
        else:
            b.barrier("lonely-other", timeout=3)  # also fails: rank 1 never comes
        return ""

    results = run_all(3, then=alone, timeout=20, step="5")
    assert "not every task reached 'lonely' within 1.5 s: worker:0 (rank 0) on localhost" in str(results[1])
    assert "had not reached it itself" in str(results[1])


def test_exchange_object_path() -> None:
    group = LocalExchange.group(2)
    results = run_all(2, per_rank=lambda rank: {"exchange": group[rank]}, timeout=20)
    try:
        assert [r.rank for r in results] == [0, 1]
        assert results[0].cluster_spec() == results[1].cluster_spec()
    finally:
        stop(results)


def test_missing_rank_is_named_within_the_timeout() -> None:
    results = run_all(3, ranks=[0, 1], timeout=2, step="9")
    assert all(isinstance(r, ResolutionError) for r in results[:2]), results
    assert "worker:2 (rank 2) on localhost" in str(results[0]) and "worker:2 (rank 2)" in str(results[1])


def test_foreign_server_on_a_candidate_port_is_skipped() -> None:
    free = Server.create_local_server()
    taken = free.port
    free.stop(0)
    other = rendezvous_ports("spare")[0]
    foreign = Server({"worker": [f"localhost:{taken}"]}, "worker", 0, calls=TABLE, handlers=lambda port: TaskHandlers(
        Identity("another.0", 0, "localhost", "worker", 0), 4, Authority(AuthMode.NONE, "a test"), port,
        map(Source.task, [1, 2, 3]), True))
    try:
        results = run_all(3, timeout=20, rendezvous=[taken, other])
        try:
            assert all(isinstance(r, Bootstrapped) for r in results), results
            assert results[0].me.port == other
        finally:
            stop(results)
    finally:
        foreign.stop(0)


def test_server_like_tf_train_server() -> None:
    server = Server.create_local_server()
    assert server.target.startswith("grpc://localhost:") and server.port > 0
    assert server.server_def["job_name"] == "localhost"
    joined = threading.Thread(target=server.join)
    joined.start()
    server.stop(0)
    joined.join(10)
    assert not joined.is_alive()
    with pytest.raises(ValueError, match="job_name"):
        Server({"a": ["localhost:0"], "b": ["localhost:0"]}, start=False)
    with pytest.raises(ConfigurationError, match="protocol"):
        Server({"a": ["localhost:0"]}, protocol="grpc+verbs")


def test_not_from_the_batch_step() -> None:
    batch = {"SLURM_JOB_ID": "5", "SLURM_PROCID": "0", "SLURMD_NODENAME": "localhost",
             "SLURM_JOB_NODELIST": "localhost", "SLURM_TASKS_PER_NODE": "2", "CUDA_VISIBLE_DEVICES": ""}
    with pytest.raises(ConfigurationError, match="srun"):
        bootstrap(environ=batch)


def test_bad_options_fail_before_anything_starts() -> None:
    with pytest.raises(ConfigurationError, match="verify='sometimes'"):
        bootstrap(environ=env(0, 1), verify="sometimes")
    with pytest.raises(ConfigurationError, match="exchange='none'"):
        bootstrap(environ=env(0, 1), exchange="none")
    with pytest.raises(ConfigurationError, match="SLURM_RESOLVER_EXCHANGE='tcp'"):
        bootstrap(environ={**env(0, 1), "SLURM_RESOLVER_EXCHANGE": "tcp"})
    with pytest.raises(EnvironmentVariableError, match="SLURM_RESOLVER_RENDEZVOUS_PORTS"):
        bootstrap(environ={**env(0, 1), "SLURM_RESOLVER_RENDEZVOUS_PORTS": "80,http"})
    with pytest.raises(ConfigurationError, match="heartbeat=-1"):
        bootstrap(environ=env(0, 1), heartbeat=-1)
    with pytest.raises(ConfigurationError, match=r"patience=0.5 must be at least twice the heartbeat \(1.0 s\)"):
        bootstrap(environ=env(0, 1), patience=0.5)


@pytest.mark.parametrize(("verify", "step"), [("all", "31"), (2, "32"), ("none", "33")])
def test_every_verify_mode_bootstraps(verify: str | int, step: str) -> None:
    results = run_all(5, step=step, timeout=20, verify=verify, heartbeat=None)
    try:
        assert all(isinstance(b, Bootstrapped) for b in results), results
        assert {b.cluster.ports[3] for b in results} == {results[3].server.port}
    finally:
        stop(results)


def test_every_server_is_checked_by_exactly_one_peer_in_the_ring_after_an_mpi_exchange() -> None:
    for size in range(1, 40):
        checked = [p for rank in range(size) for p in checked_peers(rank, size, ONCE)]
        assert sorted(checked) == (list(range(size)) if size > 1 else [])


def test_adapters() -> None:
    results = run_all(2, timeout=20, step="3")
    try:
        b = results[1]
        torch = adapters.torch_env(b)
        assert torch["MASTER_ADDR"] == "localhost" and torch["MASTER_PORT"] == str(results[0].me.spare_port)
        local = (torch["RANK"], torch["WORLD_SIZE"], torch["LOCAL_RANK"], torch["LOCAL_WORLD_SIZE"])
        assert local == ("1", "2", "1", "2")
        assert adapters.jax_arguments(b) == {"coordinator_address": f"localhost:{results[0].me.spare_port}",
                                             "num_processes": 2, "process_id": 1, "local_device_ids": None}
        assert '"index": 1' in adapters.tensorflow_env(b)["TF_CONFIG"]
        assert adapters.shell({"A": "x y"}) == "export A='x y'\n"
        target = {"RANK": "0"}
        with pytest.raises(ConfigurationError, match="RANK"):
            adapters.export(torch, environ=target)
    finally:
        stop(results)


class TamperedExchange:
    """Passes rows through, but swaps the ports of ranks 0 and 1."""

    def __init__(self, inner: LocalExchange) -> None:
        self.inner, self.rank, self.size = inner, inner.rank, inner.size

    def allgather(self, value: Any) -> list[Any]:
        rows = self.inner.allgather(value)
        if isinstance(rows[0], list) and len(rows[0]) == 4:
            rows[0], rows[1] = [rows[1][0], *rows[0][1:]], [rows[0][0], *rows[1][1:]]
        return rows


def test_a_peer_that_is_not_where_the_table_says_is_caught() -> None:
    group = LocalExchange.group(2)
    results = run_all(2, per_rank=lambda rank: {"exchange": TamperedExchange(group[rank])}, timeout=10)
    stop(results)
    assert all(isinstance(r, ResolutionError) for r in results), results
    assert "rank 1 at localhost:" in str(results[0]) and "says it is worker:0 (rank 0)" in str(results[0])
    assert "but the table has worker:1" in str(results[0]) and str(results[0]) == str(results[1])  # both learn it


def test_an_announcement_reaches_every_waiting_task() -> None:
    import time

    def done_by(announcer: int, announced: list[float]) -> Any:
        def run(b: Bootstrapped) -> float:
            if b.rank == announcer:
                time.sleep(0.3)  # the others wait for it meanwhile
                announced.append(time.monotonic())
                b.announce("done")
            b.wait_for("done", timeout=10)  # the announcer too: its own tasks may wait on it
            return time.monotonic()

        return run

    for announcer, step in ((2, "6"), (0, "7")):
        announced: list[float] = []
        ended = run_all(4, then=done_by(announcer, announced), timeout=20, step=step)
        assert len(announced) == 1 and all(isinstance(e, float) for e in ended), ended
        assert all(0 <= e - announced[0] < 5 for e in ended), (announced, ended)  # none before the news


def test_nobody_announcing_is_an_error_not_a_hang() -> None:
    def wait(b: Bootstrapped) -> str:
        try:
            b.wait_for("never", timeout=1.0)
        except ResolutionError as exc:
            return str(exc)
        return ""

    results = run_all(3, then=wait, timeout=20, step="8")
    assert all("nobody announced 'never' within 1 s" in r for r in results), results


def test_any_task_may_wait_for_a_notice_its_leader_does_not_wait_for() -> None:
    """Rank 0 leads the node; only rank 2 waits, rank 1 announces: rank 0 passes the notice on by itself."""
    import time

    def run(b: Bootstrapped) -> str:
        if b.rank == 2:
            b.wait_for("only-rank-2-waits", timeout=10)
            return "heard"
        if b.rank == 1:
            time.sleep(0.3)
            b.announce("only-rank-2-waits")
        time.sleep(1.0)  # rank 0 keeps serving; it never waits for the notice itself
        return "done"

    assert run_all(3, then=run, timeout=20, step="10") == ["done", "done", "heard"]


def test_a_job_whose_tasks_prove_nothing_says_so_once(caplog: pytest.LogCaptureFixture) -> None:
    """No secret and no munged: the bootstrap still runs (auto), and rank 0 alone says, once and
    loudly, that the tasks prove nothing; with a secret nobody warns. (munged pinned away: on a
    Slurm node it answers at its default socket, and auto would take MUNGE.)"""
    caplog.set_level("WARNING", logger="slurm_resolver")
    stop(run_all(3, step="51", timeout=20, heartbeat=None,
                 extra={"SLURM_RESOLVER_MUNGE_SOCKET": "/nonexistent/munge.socket.2"}))
    warned = [r for r in caplog.records if "do not prove who they are" in r.getMessage()]
    assert len(warned) == 1 and "SLURM_RESOLVER_SECRET" in warned[0].getMessage()
    caplog.clear()
    results = run_all(3, step="52", timeout=20, heartbeat=None, extra={"SLURM_RESOLVER_SECRET": "s" * 32})
    try:
        assert all(isinstance(r, Bootstrapped) and r.authenticated.startswith("a secret") for r in results), results
        assert not [r for r in caplog.records if "do not prove who they are" in r.getMessage()]
    finally:
        stop(results)


def test_what_env_wrote_in_the_batch_step_is_refused_with_its_cause() -> None:
    """``eval "$(slurm-resolver env --format torch)"`` in the batch script, then ``srun python train.py``: every
    task holds the batch step's RANK=0; bootstrap() names where it came from, at once, said once for the job."""
    from slurm_resolver.rpc.simulation.simulate import srun_environ

    task = dict(srun_environ(2, 2, rank=3), RANK="0", WORLD_SIZE="4", LOCAL_RANK="0", LOCAL_WORLD_SIZE="3",
                SLURM_RESOLVER_TASK='{"launcher": "batch", "rank": 0, "world_size": 4}')
    with pytest.raises(ConfigurationError, match=r"^RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE came from the "
                                                 r"batch step: `slurm-resolver env` wrote them there") as info:
        bootstrap(environ=task, timeout=5)
    assert not info.value.said_by(3) and info.value.said_by(0)
