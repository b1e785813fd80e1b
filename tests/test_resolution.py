"""Resolution of captured launches: every task agrees on the cluster and sits where Slurm put it."""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

import pytest

from slurm_resolver.cluster import Cluster
from slurm_resolver.errors import AddressError, ConfigurationError, PlacementError, ResolutionError
from slurm_resolver.exchange import LocalExchange
from slurm_resolver.resolution import resolve

from .conftest import captured


def always(_: str) -> bool:
    return True


def truth_rank(env: dict[str, str]) -> int:
    return int(env.get("OMPI_COMM_WORLD_RANK", env.get("SLURM_PROCID", "0")))


def resolve_all(envs: list[dict[str, str]], **kwargs: Any) -> list[Cluster]:
    return [resolve(e, resolves=always, **kwargs) for e in envs]


STEP_CASES = ["srun_N3_n6", "srun_N2_n4_cyclic", "srun_N2_ntasks_per_node2", "srun_N2_ntasks_per_node2_cyclic",
              "srun_plane2", "srun_pmi2", "srun_pmix", "srun_het_N1n2_N1n1", "sbatch_srun", "sbatch_hetjob",
              "srun_gpus_per_task1", "srun_cpu_only"]


@pytest.mark.parametrize("case", STEP_CASES)
def test_every_task_is_where_slurm_put_it(case: str) -> None:
    envs = captured(case)
    clusters = resolve_all(envs)
    specs = {c.spec().to_json() for c in clusters}
    assert len(specs) == 1, "tasks disagree on the cluster"
    for env, cluster in zip(envs, clusters):
        me = cluster.me
        assert me is not None
        assert cluster.rank == truth_rank(env)
        assert me.node == env["SLURMD_NODENAME"]
        assert me.address.split(":")[0] == env["SLURMD_NODENAME"]
        assert me.local_rank == int(env["SLURM_LOCALID"])


def test_cyclic_where_tensorflow_is_wrong() -> None:
    clusters = resolve_all(captured("srun_N2_n4_cyclic"))
    assert clusters[0].spec().as_dict() == {"worker": ["node1:8888", "node2:8888", "node1:8889", "node1:8890"]}


def test_node9_node10_keep_slurms_order() -> None:
    # Derived from the capture srun_N2_ntasks_per_node2 with the nodes renamed node[9-10].
    envs = [dict(e, SLURM_STEP_NODELIST="node[9-10]", SLURM_JOB_NODELIST="node[9-10]",
                 SLURMD_NODENAME=e["SLURMD_NODENAME"].replace("node1", "node9").replace("node2", "node10"))
            for e in captured("srun_N2_ntasks_per_node2")]
    clusters = resolve_all(envs)
    assert clusters[0].spec().as_dict() == {"worker": ["node9:8888", "node9:8889", "node10:8888", "node10:8889"]}
    assert [c.me.node for c in clusters if c.me] == ["node9", "node9", "node10", "node10"]


def test_mpirun_ranks_exchange_their_nodes() -> None:
    envs = captured("salloc_mpirun")
    group = LocalExchange.group(len(envs))
    results: list[Cluster | None] = [None] * len(envs)

    def run(i: int) -> None:
        results[i] = resolve(envs[i], exchange=group[i], resolves=always, hostname=lambda: "vm")

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(envs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.rank for r in results if r] == [0, 1, 2, 3]  # not 0, 0, 0, 1 as SLURM_PROCID says
    assert results[0] and results[0].spec().as_dict() == {
        "worker": ["node1:8888", "node1:8889", "node1:8890", "node2:8888"]}


def test_mpirun_without_exchange_says_how_to_fix() -> None:
    with pytest.raises(PlacementError, match="mpirun") as info:
        resolve(captured("salloc_mpirun")[0], exchange="none", resolves=always)
    assert isinstance(info.value, RuntimeError)


def test_arbitrary_distribution_is_never_guessed() -> None:
    env = dict(captured("srun_N2_n4_cyclic")[0], SLURM_DISTRIBUTION="arbitrary")  # and no SLURM_HOSTFILE
    with pytest.raises(PlacementError, match="cannot read its host file .SLURM_HOSTFILE."):
        resolve(env, exchange="none", resolves=always)


def test_wrong_computed_placement_is_caught() -> None:
    env = dict(captured("srun_N2_n4_cyclic")[1], SLURM_DISTRIBUTION="block")  # rank 1 is on node2
    with pytest.raises(PlacementError, match="rank 1 runs on node2"):
        resolve(env, resolves=always)


def test_batch_step_is_the_jobs_view() -> None:
    cluster = resolve(captured("sbatch_batch_step")[0], resolves=always)
    assert cluster.launcher == "batch" and cluster.rank == 0
    assert cluster.spec().as_dict() == {"worker": ["node1:8888", "node1:8889", "node1:8890", "node2:8888"]}


def test_salloc_shell_is_no_task() -> None:
    cluster = resolve(captured("salloc_shell")[0], resolves=always)
    assert cluster.me is None and cluster.world_size == 4
    assert cluster.describe()["task_type"] is None


def test_single_process() -> None:
    cluster = resolve({})
    assert cluster.launcher == "single" and cluster.spec().as_dict() == {"worker": ["localhost:8888"]}


def exchanged(envs: list[dict[str, str]], **kwargs: Any) -> list[Cluster]:
    """Every task resolved at once, learning what the environment does not tell through an exchange."""
    group = LocalExchange.group(len(envs))
    results: list[Any] = [None] * len(envs)

    def run(i: int) -> None:
        results[i] = resolve(envs[i], exchange=group[i], resolves=always, **kwargs)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(envs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_het_components_map_onto_jobs() -> None:
    clusters = exchanged(captured("srun_het"), jobs=["ps", "worker"])
    assert clusters[0].spec().as_dict() == {"ps": ["node1:8888"],
                                            "worker": ["node2:8888", "node2:8889", "node3:8888"]}
    assert [(c.me.job, c.me.index) for c in clusters if c.me] == [("ps", 0), ("worker", 0), ("worker", 1),
                                                                   ("worker", 2)]
    batch = resolve(captured("sbatch_hetjob_batch_step")[0], jobs=["ps", "worker"], resolves=always)
    assert batch.spec().as_dict() == {"ps": ["node1:8888"], "worker": ["node2:8888", "node3:8888"]}


def test_jobs_packing_and_counts() -> None:
    cluster = resolve(captured("srun_N3_n6")[4], jobs={"worker": 4, "ps": 1, "chief": 1}, resolves=always)
    assert cluster.spec().as_dict() == {"chief": ["node1:8888"], "ps": ["node1:8889"],
                                        "worker": ["node1:8890", "node1:8891", "node2:8888", "node3:8888"]}
    assert (cluster.me.job, cluster.me.index) == ("worker", 2)  # type: ignore[union-attr]
    with pytest.raises(ResolutionError, match="ask for 8 tasks, but the job has 6"):
        resolve(captured("srun_N3_n6")[0], jobs={"ps": 2, "worker": 6}, resolves=always)


def test_precedence_argument_over_variable_over_default() -> None:
    env = dict(captured("srun_cpu_only")[0], SLURM_RESOLVER_PORT_BASE="9000", SLURM_RESOLVER_JOBS="ps=1,worker=1")
    assert resolve(env, resolves=always).spec().as_dict() == {"ps": ["node1:9000"], "worker": ["node2:9000"]}
    assert resolve(env, port_base=7000, jobs={"worker": 2}, resolves=always).me.address == "node1:7000"  # type: ignore[union-attr]


def test_tasks_per_node_override() -> None:
    env = captured("srun_N2_ntasks_per_node2")[0]
    assert resolve(env, tasks_per_node={"node1": 3, "node2": 1}, resolves=always).spec().as_dict() == {
        "worker": ["node1:8888", "node1:8889", "node1:8890", "node2:8888"]}
    with pytest.raises(ConfigurationError, match="places 6 tasks, but the job has 4"):
        resolve(env, tasks_per_node=3, resolves=always)


@pytest.mark.parametrize("env", [
    {"OMPI_COMM_WORLD_RANK": "1"},  # an MPI rank without its world size
    {"SLURM_PROCID": "5", "SLURM_STEP_NODELIST": "a,b"},  # a partial srun environment, its counts from the argument
], ids=["mpi", "partial-srun"])
def test_tasks_per_node_that_leaves_out_this_task_says_so(env: dict[str, str]) -> None:
    with pytest.raises(ConfigurationError, match=r"tasks_per_node=1 places \d tasks, but this task's rank is [15]"):
        resolve(env, tasks_per_node=1, exchange="none", resolves=always, node_addresses=lambda n: {},
                hostname=lambda: "a")


def test_unresolvable_names_use_nodeaddr_with_one_lookup() -> None:
    calls: list[list[str]] = []

    def node_addresses(names: list[str]) -> dict[str, str]:
        calls.append(list(names))
        return {"node1": "10.0.0.1", "node2": "10.0.0.2", "node3": "10.0.0.3"}

    cluster = resolve(captured("srun_N3_n6")[0], resolves=lambda n: False, node_addresses=node_addresses)
    assert cluster.spec().as_dict()["worker"][0] == "10.0.0.1:8888"
    assert cluster.spec().as_dict()["worker"][-1] == "10.0.0.3:8888"
    assert calls == [["node1", "node2", "node3"]]


def test_resolvable_names_make_no_slurmctld_call() -> None:
    def forbidden(names: list[str]) -> dict[str, str]:
        raise AssertionError("slurmctld must not be asked")

    resolve(captured("srun_N3_n6")[0], resolves=always, node_addresses=forbidden)


def test_node_without_any_address_is_named() -> None:
    with pytest.raises(AddressError, match="node node1 has no reachable address"):
        resolve(captured("srun_N3_n6")[0], resolves=lambda n: False, node_addresses=lambda names: {})


@pytest.mark.parametrize("case", ["srun_het_N1n2_N1n1", "sbatch_hetjob"])
def test_het_components_each_on_their_own_nodes(case: str) -> None:
    """One node, or one task per node, in each component: the layout is the same whatever the distribution."""
    envs = captured(case)
    truth = tuple(e["SLURMD_NODENAME"] for e in envs)
    for env in envs:
        cluster = resolve(env, exchange="none", resolves=always)
        assert cluster.nodes == truth and cluster.me is not None and cluster.me.node == env["SLURMD_NODENAME"]


@pytest.mark.parametrize("case", ["srun_het", "srun_het_cyclic", "srun_het_mixed", "sbatch_hetjob_multi"])
def test_an_ambiguous_het_layout_is_refused_without_an_exchange_and_provisional_for_the_bootstrap(case: str) -> None:
    for env in captured(case):
        with pytest.raises(PlacementError, match=r"het component \d of this step runs several tasks"):
            resolve(env, exchange="none", resolves=always)
        provisional = resolve(env, resolves=always)
        assert not provisional.placement.exact
        mine = [r for r in range(provisional.world_size) if provisional.nodes[r] == env["SLURMD_NODENAME"]]
        assert mine == sorted(int(r) for r in env["SLURM_GTIDS"].split(","))  # this node's ranks are Slurm's


@pytest.mark.parametrize("case", ["srun_het", "srun_het_cyclic", "srun_het_mixed", "sbatch_hetjob_multi"])
def test_an_ambiguous_het_layout_is_learned_from_every_task(case: str) -> None:
    envs = captured(case)
    truth = tuple(e["SLURMD_NODENAME"] for e in envs)
    assert all(c.nodes == truth and c.placement.exact for c in exchanged(envs))


@pytest.mark.slurm
def test_a_lone_task_of_an_ambiguous_het_layout_is_told_why_it_cannot_learn_it(slurm_cluster: dict[str, str]) -> None:
    """Only one task resolves (the others never do): the error is the layout's, not a bare timeout."""
    env = {**captured("srun_het")[0], "SLURM_STEP_ID": str(1000 + os.getpid() % 50_000)}  # a launch of this run's
    started = time.monotonic()  # own: another checkout's suite running this test at once never meets it
    from slurm_resolver.rpc.learn import learn_layout

    with pytest.raises(PlacementError) as info:
        learn_layout(resolve(env, exchange="rendezvous", timeout=2.0, resolves=always), env, timeout=2.0)
    assert time.monotonic() - started < 10
    assert "learning it from the step's other tasks failed: bootstrap:" in info.value.message
    assert "resolve in every task of the step at once" in (info.value.hint or "")


# what the caller gave, and the lines -v shows for the settings, one a decision
SETTINGS: list[tuple[dict[str, Any], dict[str, str], list[str]]] = [
    ({}, {}, ["jobs: not set (one job 'worker')", "port_base: 8888 (default)", "exchange: auto (default)"]),
    ({"jobs": {"ps": 1, "worker": 5}, "port_base": 9000, "exchange": "none"}, {},
     ["jobs: ps=1,worker=5 (argument)", "port_base: 9000 (argument)", "exchange: none (argument)"]),
    ({}, {"SLURM_RESOLVER_JOBS": "ps=2,worker=4", "SLURM_RESOLVER_PORT_BASE": "9100", "SLURM_RESOLVER_EXCHANGE": "mpi"},
     ["jobs: ps=2,worker=4 (SLURM_RESOLVER_JOBS)", "port_base: 9100 (SLURM_RESOLVER_PORT_BASE)",
      "exchange: mpi (SLURM_RESOLVER_EXCHANGE)"]),
]


@pytest.mark.parametrize(("given", "variables", "lines"), SETTINGS)
def test_verbose_says_each_setting_in_a_readable_line(given: dict[str, Any], variables: dict[str, str],
                                                       lines: list[str], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="slurm_resolver")
    resolve({**captured("srun_N3_n6")[5], **variables}, resolves=lambda name: True,
            node_addresses=lambda names: {}, gpu_devices=lambda: None, **given)
    said = [r.getMessage() for r in caplog.records if r.name == "slurm_resolver"]
    assert said[:3] == lines, said
    assert said[3] == "launcher srun: rank 5 of 6 on node3 (local rank 0); 3 nodes, distribution block", said
    assert not any("None" in line or "'auto'" in line or "=" in line.split(":")[0] for line in said), said
