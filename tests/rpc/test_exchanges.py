"""The two ways to exchange: MPI's allgather (rank 0's key learned by all, every verdict gathered) and the
settled cluster (the ports every task bound, and a layout learned where Slurm's did not tell it)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from slurm_resolver.errors import ResolutionError, Speaker
from slurm_resolver.exchange import LocalExchange
from slurm_resolver.resolution import resolve
from slurm_resolver.rpc.exchanges import MpiExchange, _MpiRecord, settle
from slurm_resolver.rpc.messages import Failure, Table
from slurm_resolver.rpc.simulation.simulate import srun_environ
from slurm_resolver.rpc.trust.seals import AuthMode, Authority

CLUSTER = resolve(srun_environ(1, 2), resolves=lambda name: True)


def _in_threads(run: Any, size: int) -> list[Any]:
    results: list[Any] = [None] * size

    def one(rank: int) -> None:
        try:
            results[rank] = asyncio.run(run(rank))
        except Exception as exc:  # noqa: BLE001 - collected for the assertions
            results[rank] = exc

    threads = [threading.Thread(target=one, args=(rank,)) for rank in range(size)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    return results


def test_mpi_gathers_every_record_and_rank_0s_key() -> None:
    group = LocalExchange.group(2)
    authorities = [Authority(AuthMode.NONE, "a test") for _ in range(2)]

    async def table(rank: int) -> Table:
        cluster = CLUSTER.as_rank(rank)
        return await MpiExchange(group[rank], authorities[rank]).table(cluster, cluster.task(rank), 30000 + rank,
                                                                        31000 + rank, 5)

    tables = _in_threads(table, 2)
    assert tables[0] == tables[1] and tables[0].ports == (30000, 30001) and tables[0].spares == (31000, 31001)
    assert all(a.past_first_round for a in authorities)  # both learned rank 0's key


def test_mpi_agrees_or_every_rank_fails_naming_the_first_failure() -> None:
    group = LocalExchange.group(2)

    async def agree(rank: int) -> None:
        failure = Failure.of("rank 1 could not verify a peer") if rank == 1 else Failure()
        await MpiExchange(group[rank], Authority(AuthMode.NONE, "a test")).agree(None, failure, 5)  # type: ignore[arg-type]

    errors = _in_threads(agree, 2)
    assert all(isinstance(e, ResolutionError) and "rank 1 could not verify a peer" in str(e) for e in errors)
    assert all(e.speaker is Speaker.FIRST for e in errors)


@pytest.mark.parametrize("row", [["1", "2"], "text", [1, 2, 3, 4, 5]])
def test_a_record_of_another_version_is_said_not_misread(row: object) -> None:
    with pytest.raises(ResolutionError, match="not a task's record"):
        _MpiRecord.read(row)


def test_the_settled_cluster_holds_every_port_and_a_told_layout_must_add_up() -> None:
    settled = settle(CLUSTER, Table((30000, 30001), (31000, 31001), {}))
    assert settled.bound_ports == (30000, 30001)
    with pytest.raises(ResolutionError, match="do not add up"):
        settle(CLUSTER, Table((30000, 30001), (31000, 31001), {}, (0, 1)))  # two nodes, where Slurm says one
