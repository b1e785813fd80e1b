"""The bootstrap's start: how a task proves itself, and its server built whole once with every part it will
ever have (what they learn later comes through the values they were made with)."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from slurm_resolver.exchange import ExchangeMode, LocalExchange
from slurm_resolver.resolution import resolve
from slurm_resolver.rpc import calls
from slurm_resolver.rpc.diagnosis.stacks_call import StacksHandler
from slurm_resolver.rpc.exchanges import MpiExchange, TreeRendezvous
from slurm_resolver.rpc.network.in_process import LocalNetwork
from slurm_resolver.rpc.options import BootstrapOptions
from slurm_resolver.rpc.simulation.simulate import srun_environ
from slurm_resolver.rpc.start import proof_of, start
from slurm_resolver.rpc.transport import Refusal, Refused
from slurm_resolver.rpc.trust.seals import AuthMode

CLUSTER = resolve(srun_environ(2, 2), resolves=lambda name: True)


def test_an_in_process_network_proves_nothing_unless_asked_and_a_job_without_proof_says_so_once(
        caplog: pytest.LogCaptureFixture) -> None:
    assert proof_of(None, {}, LocalNetwork(), CLUSTER).mode is AuthMode.NONE
    with caplog.at_level(logging.WARNING, logger="slurm_resolver"):
        proof_of(None, {"SLURM_RESOLVER_AUTH": "none"}, None, CLUSTER.as_rank(1))  # rank 1: not the one to say
        assert "do not prove who they are" not in caplog.text
        proof_of(None, {"SLURM_RESOLVER_AUTH": "none"}, None, CLUSTER.as_rank(0))
    assert caplog.text.count("do not prove who they are") == 1


@pytest.mark.parametrize("mpi", [False, True])
def test_a_tasks_server_is_started_whole_with_a_part_for_every_call(mpi: bool) -> None:
    """Every row's part is there from the start (Stacks refuses ``unready`` until the bootstrap settles); the
    leader binds a rendezvous port in the tree, any port under MPI; the exchange is chosen once."""
    async def scenario() -> tuple[set[type], object, int, str]:
        network = LocalNetwork()
        mode = LocalExchange.group(1)[0] if mpi else ExchangeMode.RENDEZVOUS
        options = BootstrapOptions(timeout=5)
        candidates = options.candidates({}, CLUSTER.launch.key)
        task = await start(CLUSTER.as_rank(0), options, mode, network, proof_of(None, {}, network, CLUSTER),
                           candidates)
        try:
            parts = {type(part) for part in task.handlers.parts}
            with pytest.raises(Refused) as early:
                await task.handlers.parts.of(StacksHandler).stacks(b"", time.monotonic() + 1)
            return parts, type(task.exchange), task.served.port in candidates, early.value.code.value
        finally:
            await task.served.stop()

    parts, exchange, on_a_candidate, early = asyncio.run(scenario())
    assert parts == {call.part for call in calls.CALLS}
    assert exchange is (MpiExchange if mpi else TreeRendezvous)
    assert on_a_candidate is not mpi and early == Refusal.UNREADY.value
