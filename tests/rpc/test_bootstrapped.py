"""What bootstrap() returns: a resolver-shaped view of the verified cluster, its rounds, and what it refuses."""

from __future__ import annotations

import asyncio
import json

import pytest

from slurm_resolver.errors import ConfigurationError
from slurm_resolver.resolution import resolve
from slurm_resolver.rpc.bootstrap import bootstrap_async
from slurm_resolver.rpc.bootstrapped import Bootstrapped, Exchanged
from slurm_resolver.rpc.network.in_process import LocalNetwork
from slurm_resolver.rpc.simulation.simulate import srun_environ

CLUSTER = resolve(srun_environ(2, 2, rank=2), resolves=lambda name: True, port_base=29500)


def test_a_resolved_cluster_answers_a_resolvers_questions_without_a_server() -> None:
    view = Bootstrapped.from_cluster(CLUSTER)
    assert (view.rank, view.world_size, view.task_type, view.task_id) == (2, 4, "worker", 2)
    assert view.master() == f"grpc://{CLUSTER.hosts['node2']}:29500" and view.server is None
    assert view.cluster_spec() == CLUSTER.spec() and view.exchanged is None and view.failures() == {}
    assert view.num_accelerators() == {} and view.peers[3].node == "node2"


def test_rounds_need_a_bootstrapped_cluster_with_its_loop() -> None:
    view = Bootstrapped.from_cluster(CLUSTER)
    with pytest.raises(ConfigurationError, match="no event loop of its own"):
        view.barrier("step")
    with pytest.raises(ConfigurationError, match="not made by bootstrap"):
        asyncio.run(view.aio.barrier("step"))
    with pytest.raises(ConfigurationError, match="failure detection is off"):
        view.on_failure(lambda rank, why: None)
    view.stop()  # nothing runs: nothing to stop


@pytest.mark.parametrize("name", ["", "x" * 201, 3])
def test_a_round_name_that_cannot_be_is_refused_before_anything_is_sent(name: object) -> None:
    async def scenario() -> str:
        task = await _alone()
        try:
            with pytest.raises(ConfigurationError) as caught:
                await task.aio.barrier(name)  # type: ignore[arg-type]
            return caught.value.message
        finally:
            await task.aio.stop(0)

    assert "cannot name a barrier, a vote or a notice" in asyncio.run(scenario())


async def _alone() -> Bootstrapped:
    """A one-task launch, bootstrapped in this process."""
    alone = resolve(srun_environ(1, 1), resolves=lambda name: True)
    return await bootstrap_async(alone, exchange="rendezvous", environ={}, network=LocalNetwork(), heartbeat=None,
                                 timeout=5)


def test_how_the_tasks_exchanged_is_a_type_that_still_reads_as_its_word() -> None:
    assert Exchanged.TREE == "tree" and str(Exchanged.MPI) == "mpi"
    assert json.dumps({"exchanged": Exchanged.TREE}) == '{"exchanged": "tree"}'
