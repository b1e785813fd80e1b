"""Bootstrap in one process: N tasks as threads on localhost, through the rendezvous or an exchange."""

from __future__ import annotations

import threading
from typing import Any

import grpc
import pytest

from slurm_resolver import adapters
from slurm_resolver.bootstrapping import Bootstrapped, bootstrap, job_key, rendezvous_ports
from slurm_resolver.errors import ConfigurationError, ResolutionError
from slurm_resolver.exchange import LocalExchange
from slurm_resolver.proto import coordination_pb2 as pb
from slurm_resolver.proto import coordination_pb2_grpc as rpc
from slurm_resolver.server import CoordinationState, Server, credentials


def env(rank: int, size: int, step: str = "0") -> dict[str, str]:
    return {"SLURM_JOB_ID": "77", "SLURM_STEP_ID": step, "SLURM_PROCID": str(rank), "SLURM_LOCALID": str(rank),
            "SLURMD_NODENAME": "localhost", "SLURM_STEP_NUM_TASKS": str(size), "SLURM_STEP_NODELIST": "localhost",
            "SLURM_STEP_TASKS_PER_NODE": str(size), "CUDA_VISIBLE_DEVICES": ""}


def run_all(size: int, ranks: list[int] | None = None, **kwargs: Any) -> list[Any]:
    results: list[Any] = [None] * size
    per_rank = kwargs.pop("per_rank", lambda rank: {})

    def task(rank: int) -> None:
        try:
            results[rank] = bootstrap(environ=env(rank, size, kwargs.get("step", "0")),
                                      **{k: v for k, v in kwargs.items() if k != "step"}, **per_rank(rank))
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
        specs = {str(r.cluster_spec().as_dict()) for r in results}
        assert len(specs) == 1
        ports = [r.me.port for r in results]
        assert len(set(ports)) == 3 and all(p > 0 for p in ports)
        assert results[0].me.port in rendezvous_ports(job_key(env(0, 3)))
        assert results[1].master() == f"grpc://localhost:{ports[1]}"
    finally:
        stop(results)


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
    taken, other = free.port, rendezvous_ports("spare")[0]
    free.stop(0)
    foreign = Server({"worker": [f"localhost:{taken}"]}, "worker", 0, state=CoordinationState("another.0", "t"))
    try:
        results = run_all(3, timeout=20, rendezvous=[taken, other])
        try:
            assert all(isinstance(r, Bootstrapped) for r in results), results
            assert results[0].me.port == other
        finally:
            stop(results)
    finally:
        foreign.stop(0)


def test_token_guards_every_call_but_health() -> None:
    state = CoordinationState("k.0", "secret", world_size=1)
    server = Server({"worker": ["localhost:0"]}, "worker", 0, state=state)
    try:
        with grpc.insecure_channel(f"localhost:{server.port}") as channel:
            stub = rpc.CoordinationStub(channel)
            with pytest.raises(grpc.RpcError) as info:
                stub.Set(pb.KeyValue(key="a", value=b"1"), timeout=5)
            assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
            stub.Set(pb.KeyValue(key="a", value=b"1"), timeout=5, metadata=credentials("secret"))
            assert stub.Get(pb.GetRequest(key="a", timeout=1), timeout=5, metadata=credentials("secret")).value == b"1"
            with pytest.raises(grpc.RpcError) as info:
                stub.Get(pb.GetRequest(key="b", timeout=0.2), timeout=5, metadata=credentials("secret"))
            assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            stub.Barrier(pb.BarrierRequest(name="b", rank=0, count=1, timeout=1), timeout=5,
                         metadata=credentials("secret"))
            with pytest.raises(grpc.RpcError) as info:
                stub.Register(pb.RegisterRequest(job_key="other.0", world_size=1), timeout=5)
            assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    finally:
        server.stop(0)


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


def test_adapters() -> None:
    results = run_all(2, timeout=20, step="3")
    try:
        b = results[1]
        torch = adapters.torch_env(b)
        assert torch["MASTER_ADDR"] == "localhost" and torch["MASTER_PORT"] == str(results[0].me.spare_port)
        assert (torch["RANK"], torch["WORLD_SIZE"], torch["LOCAL_RANK"], torch["LOCAL_WORLD_SIZE"]) == ("1", "2", "1", "2")
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
    """Passes rows through, but claims rank 1 runs on another node."""

    def __init__(self, inner: LocalExchange) -> None:
        self.inner, self.rank, self.size = inner, inner.rank, inner.size

    def allgather(self, value: Any) -> list[Any]:
        rows = self.inner.allgather(value)
        if isinstance(rows[1], dict) and "peer" in rows[1]:
            rows[1] = {**rows[1], "peer": {**rows[1]["peer"], "node": "elsewhere"}}
        return rows


def test_a_peer_that_is_not_where_the_table_says_is_caught() -> None:
    group = LocalExchange.group(2)
    results = run_all(2, per_rank=lambda rank: {"exchange": TamperedExchange(group[rank])}, timeout=10)
    stop(results)
    assert isinstance(results[0], ResolutionError) and "on localhost, but the table has worker:1 on elsewhere" in \
        str(results[0])
