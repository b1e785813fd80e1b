"""Launchers below srun: torchrun's and DeepSpeed's workers are the launch's tasks, or are refused.

Captured environments (tests/data/env/srun_N2_torchrun_nproc2, srun_N1_torchrun_standalone3) and,
for the learned layout, three emulated nodes on this host (127.0.0.1-3) where torchrun numbered
its agents in another order than Slurm's: the workers learn each other's nodes.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_resolver import SlurmClusterResolver, launchers
from slurm_resolver.errors import EnvironmentVariableError, PlacementError, ResolutionError, SlurmResolverError
from slurm_resolver.resolution import resolve
from slurm_resolver.rpc.bootstrap import bootstrap
from slurm_resolver.rpc.bootstrapped import Bootstrapped

from ..conftest import captured, in_threads, require

TWO_NODES = captured("srun_N2_torchrun_nproc2")
STANDALONE = captured("srun_N1_torchrun_standalone3")


def quiet(**kwargs: Any) -> dict[str, Any]:
    return {"resolves": lambda name: True, "node_addresses": lambda names: {}, **kwargs}


@pytest.mark.parametrize("env", TWO_NODES + STANDALONE, ids=lambda e: f"{e['SLURMD_NODENAME']}-rank{e['RANK']}")
def test_each_worker_is_a_task_of_its_own(env: dict[str, str]) -> None:
    assert launchers.detect(env).name == "torchrun"
    cluster = resolve(env, **quiet())
    me = cluster.me
    assert me is not None and cluster.launch.is_task and cluster.launch.below == "torchrun"
    assert (me.rank, me.local_rank, me.node, cluster.world_size) == \
        (int(env["RANK"]), int(env["LOCAL_RANK"]), env["SLURMD_NODENAME"], int(env["WORLD_SIZE"]))
    assert me.port == 8888 + int(env["LOCAL_RANK"])  # a port of its own on its node
    assert cluster.launch.key.endswith(f"/torchrun.{env['TORCHELASTIC_RUN_ID']}.0")
    assert cluster.launch.key.startswith(env["SLURM_JOB_ID"])


def test_one_node_standalone_is_exact_with_the_node_gpus_split() -> None:
    clusters = [resolve({**env, "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5"}, **quiet()) for env in STANDALONE]
    for rank, cluster in enumerate(clusters):
        assert cluster.placement.exact and cluster.nodes == ("node1",) * 3
        assert cluster.spec().as_dict() == {"worker": ["node1:8888", "node1:8889", "node1:8890"]}
        assert cluster.me is not None and cluster.me.gpus == (str(2 * rank), str(2 * rank + 1))


@pytest.mark.parametrize("binding", [{"SLURM_GPUS_PER_TASK": "3"}, {"SLURMD_TRES_BIND": "gres/gpu:per_task:3"},
                                     {"SLURM_GPU_BIND": "map_gpu:0,1,2"}],
                         ids=["gpus-per-task", "tres-bind", "gpu-bind"])
def test_gpus_slurm_bound_to_the_agent_are_split_among_its_workers(binding: dict[str, str]) -> None:
    """srun --ntasks-per-node=1 --gpus-per-task=3 torchrun --nproc-per-node=3: Slurm bound the GPUs to the
    agent's task, whose workers share them, one each; not all three to every worker."""
    for rank, env in enumerate(STANDALONE):
        cluster = resolve({**env, "CUDA_VISIBLE_DEVICES": "0,1,2", **binding}, **quiet())
        assert cluster.me is not None and cluster.me.gpus == (str(rank),)
        assert cluster.device_env() == {"CUDA_VISIBLE_DEVICES": str(rank)} and cluster.gpu_count(rank) == 1


def test_several_nodes_are_learned_where_resolution_alone_cannot_tell() -> None:
    cluster = resolve(TWO_NODES[0], **quiet())
    assert not cluster.placement.exact  # torchrun chose which node holds which ranks
    with pytest.raises(PlacementError, match="torchrun's workers on several nodes"):
        resolve(TWO_NODES[0], **quiet(exchange="none"))


NODES = ("127.0.0.1", "127.0.0.2", "127.0.0.3")
GROUP_OF_NODE = (2, 0, 1)  # torchrun's agent on the first node joined its rendezvous last


def worker(rank: int, step: str, launcher: str = "torchrun") -> dict[str, str]:
    group, local = divmod(rank, 2)
    position = GROUP_OF_NODE.index(group)
    env = {"SLURM_JOB_ID": "77", "SLURM_STEP_ID": step, "SLURM_PROCID": str(position), "SLURM_LOCALID": "0",
           "SLURM_NODEID": str(position), "SLURM_GTIDS": str(position), "SLURMD_NODENAME": NODES[position],
           "SLURM_STEP_NODELIST": ",".join(NODES), "SLURM_STEP_NUM_TASKS": "3", "SLURM_STEP_TASKS_PER_NODE": "1(x3)",
           "RANK": str(rank), "LOCAL_RANK": str(local), "WORLD_SIZE": "6", "CUDA_VISIBLE_DEVICES": ""}
    if launcher == "torchrun":
        return {**env, "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": str(group), "TORCHELASTIC_RUN_ID": "none",
                "TORCHELASTIC_RESTART_COUNT": "0"}
    return {**env, "LOCAL_SIZE": "2", "CROSS_RANK": str(group), "CROSS_SIZE": "3"}


TRUTH = tuple(NODES[GROUP_OF_NODE.index(rank // 2)] for rank in range(6))


@pytest.mark.parametrize("launcher", ["torchrun", "deepspeed"])
def test_the_workers_learn_each_other_nodes_in_the_bootstrap(launcher: str) -> None:
    step = "1" if launcher == "torchrun" else "2"
    results = in_threads(lambda rank: bootstrap(environ=worker(rank, step, launcher), timeout=30), 6)
    try:
        assert all(isinstance(r, Bootstrapped) for r in results), results
        for rank, r in enumerate(results):
            assert r.rank == rank and r.cluster.placement.exact and r.cluster.nodes == TRUTH
            assert r.me.node == TRUTH[rank] and r.cluster.launcher == launcher
        assert len({str(r.cluster_spec().as_dict()) for r in results}) == 1
        assert len({r.me.address for r in results}) == 6
    finally:
        for r in results:
            if isinstance(r, Bootstrapped):
                r.stop(0)


def test_the_resolver_learns_them_too() -> None:
    results = in_threads(lambda rank: SlurmClusterResolver(environ=worker(rank, "3"), check_port=False,
                                                           auto_set_gpu=False), 6)
    assert all(isinstance(r, SlurmClusterResolver) for r in results), results
    for rank, r in enumerate(results):
        assert r.cluster.nodes == TRUTH and r.get_task_info() == ("worker", rank)
    assert results[0].cluster_spec().as_dict() == {"worker": [f"{TRUTH[r]}:{8888 + r % 2}" for r in range(6)]}


def two_agents_a_node(env: dict[str, str]) -> dict[str, str]:
    return {**env, "SLURM_STEP_TASKS_PER_NODE": "2", "SLURM_STEP_NODELIST": "node1", "SLURM_STEP_NUM_TASKS": "2"}


# the environment, the error's type, what its message says
REFUSED: list[tuple[str, dict[str, str], type[Exception], str]] = [
    ("two torchrun agents on one node", two_agents_a_node(TWO_NODES[0]), ResolutionError,
     "torchrun runs 2 times on node1"),
    ("torchrun's nodes are not srun's", {**TWO_NODES[0], "WORLD_SIZE": "6"}, ResolutionError,
     "torchrun started 6 workers"),
    ("several hosts outside Slurm", {k: v for k, v in TWO_NODES[0].items() if not k.startswith("SLURM")},
     ResolutionError, "outside an srun step"),
    ("nodes with 1, 2 and 3 workers: 6 = 2 x 3 nodes", {**worker(1, "9"), "SLURM_NODEID": "1", "RANK": "1",
                                                         "LOCAL_RANK": "0", "WORLD_SIZE": "6"},
     ResolutionError, "the nodes do not all run 2"),
    ("a rank past the world", {**TWO_NODES[0], "RANK": "4"}, EnvironmentVariableError, "RANK='4'"),
    ("a local rank that is not this node's", {**TWO_NODES[0], "LOCAL_RANK": "2"}, EnvironmentVariableError,
     "LOCAL_RANK='2'"),
    ("a worker spawned below the task", {k: v for k, v in TWO_NODES[1].items() if k != "TORCHELASTIC_RUN_ID"},
     ResolutionError, "a launcher below the Slurm task started this process (RANK=1, but SLURM_PROCID=0"),
    ("Lightning spawning its devices", {**captured("srun_cpu_only")[0], "LOCAL_RANK": "1"}, ResolutionError,
     "LOCAL_RANK=1, but SLURM_LOCALID=0"),
    ("torchrun below mpirun", {**captured("salloc_mpirun")[0], **{k: v for k, v in TWO_NODES[1].items()
                                                                  if not k.startswith("SLURM")}},
     ResolutionError, "torchrun started this worker below the openmpi rank OMPI_COMM_WORLD_RANK=0"),
    ("DeepSpeed's launcher below mpirun", {**captured("salloc_mpirun")[1], "CROSS_RANK": "0", "LOCAL_SIZE": "2",
                                           "RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "4"},
     ResolutionError, "DeepSpeed's launcher started this worker below the openmpi rank"),
    ("a worker of an unknown launcher outside Slurm", {"RANK": "1", "WORLD_SIZE": "2"}, ResolutionError,
     "RANK=1, WORLD_SIZE=2: a launcher started this process as one of several workers"),
    ("Lightning's device outside Slurm", {"LOCAL_RANK": "1", "WORLD_SIZE": "2", "NODE_RANK": "0"},
     ResolutionError, "LOCAL_RANK=1, WORLD_SIZE=2"),
    ("rank 0 of a world outside Slurm", {"RANK": "0", "WORLD_SIZE": "4"}, ResolutionError, "WORLD_SIZE=4"),
]


@pytest.mark.parametrize(("env", "kind", "said"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_what_cannot_be_told_right_is_refused_in_one_line_with_the_fix(env: dict[str, str], kind: type[Exception],
                                                                       said: str) -> None:
    with pytest.raises(kind) as info:
        resolve(env, **quiet())
    error = info.value
    assert said in str(error) and "\n" not in getattr(error, "message", str(error))
    assert "srun" in str(getattr(error, "hint", "")) and "--ntasks-per-node" in str(getattr(error, "hint", ""))


def test_slurm_own_rank_variables_are_no_launcher_below() -> None:
    env = {**captured("srun_N3_n6")[4], "RANK": "4", "LOCAL_RANK": "0", "WORLD_SIZE": "6"}  # env --format torch
    assert launchers.detect(env).name == "srun" and resolve(env, **quiet()).rank == 4


def test_variables_env_wrote_in_the_batch_step_are_leftovers_not_a_spawner() -> None:
    """`eval "$(slurm-resolver env --format torch)"` in a batch script, then srun: every task gets the batch
    step's RANK=0 and LOCAL_RANK=0; the task resolves by Slurm's own variables (bootstrap refuses them by name)."""
    batch = '{"launcher": "batch", "rank": 0, "world_size": 6}'
    env = {**captured("srun_N3_n6")[4], "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "6", "SLURM_RESOLVER_TASK": batch}
    assert launchers.detect(env).name == "srun" and resolve(env, **quiet()).rank == 4
    with pytest.raises(ResolutionError, match="RANK=0, but SLURM_PROCID=4"):  # not slurm_resolver's: a spawner's
        resolve({**env, "SLURM_RESOLVER_TASK": '{"launcher": "srun", "rank": 0}'}, **quiet())


def test_leftovers_are_told_by_their_writers_capability_not_its_name() -> None:
    """Any plugin whose process sees the job but is none of its tasks (`Launcher.outside`) wrote leftovers."""
    from collections.abc import Mapping

    from slurm_resolver.launchers.below import written_in_batch_step

    class Alloc(launchers.Launcher):
        name, description, outside = "test-alloc", "a test's allocation shell", "test shell"

        @classmethod
        def detect(cls, env: Mapping[str, str]) -> bool:
            return False

        @classmethod
        def resolve(cls, env: Mapping[str, str]) -> launchers.Launch:
            raise NotImplementedError

    task = {**captured("srun_N3_n6")[4], "RANK": "0"}
    assert written_in_batch_step({**task, "SLURM_RESOLVER_TASK": '{"launcher": "test-alloc"}'}) == ["RANK"]
    assert written_in_batch_step({**task, "SLURM_RESOLVER_TASK": '{"launcher": "srun"}'}) == []
    assert written_in_batch_step({**task, "SLURM_RESOLVER_TASK": '{"launcher": ["batch"]}'}) == []


def test_a_process_alone_may_say_so_with_the_worker_variables() -> None:
    cluster = resolve({"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1"}, **quiet())
    assert cluster.launch.standalone and (cluster.rank, cluster.world_size) == (0, 1)


def test_two_torchrun_runs_beside_each_other_are_launches_of_their_own() -> None:
    """Two ``torchrun --standalone`` in one batch script (or on one workstation) at once: each run's
    workers bootstrap apart (a launch key, so rendezvous ports and proofs, of their own)."""
    worker = {**captured("sbatch_batch_step")[0], "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "2",
              "LOCAL_WORLD_SIZE": "2", "TORCHELASTIC_RESTART_COUNT": "0"}
    runs = ["3f6c9a1e-8d2b-4c5e-9f01-23456789abcd", "7b1d0e44-1a2b-4c3d-8e9f-0123456789ef", "x" * 500, "a b/c"]
    keys = [resolve({**worker, "TORCHELASTIC_RUN_ID": run}, **quiet()).launch.key for run in runs]
    assert len(set(keys)) == len(runs) and all(len(k) < 80 and " " not in k for k in keys), keys
    restarted = resolve({**worker, "TORCHELASTIC_RUN_ID": runs[0], "TORCHELASTIC_RESTART_COUNT": "1"}, **quiet())
    assert restarted.launch.key not in keys


def test_two_torchrun_runs_with_the_run_id_none_meeting_apart_are_launches_of_their_own() -> None:
    """Two non-standalone torchrun runs in one allocation at once, without --rdzv-id (run id ``none``) and each
    with its --master-port: each run's workers bootstrap apart (a launch key, so rendezvous ports and proofs, of
    their own); the workers of one run share theirs."""
    worker = {**TWO_NODES[0], "MASTER_ADDR": "node1"}
    keys = {resolve({**worker, "MASTER_PORT": port}, **quiet()).launch.key for port in ("29500", "29501")}
    assert len(keys) == 2 and all(len(k) < 80 and " " not in k for k in keys), keys
    elsewhere = resolve({**worker, "MASTER_ADDR": "node2", "MASTER_PORT": "29500"}, **quiet()).launch.key
    odd = resolve({**worker, "MASTER_ADDR": "n" * 300 + " x", "MASTER_PORT": "29500"}, **quiet()).launch.key
    assert elsewhere not in keys and odd not in keys and len(odd) < 80 and " " not in odd
    one_run = {resolve({**env, "MASTER_ADDR": "node1", "MASTER_PORT": "29500"}, **quiet()).launch.key
               for env in TWO_NODES}
    assert len(one_run) == 1 and one_run < keys


TWO_RUNS_WORKER = """
import json, os
import slurm_resolver
b = slurm_resolver.bootstrap(timeout=90)
print(json.dumps({"run": os.environ["MASTER_PORT"], "rank": b.rank, "world_size": b.world_size,
                  "key": b.cluster.launch.key, "cluster": b.cluster_spec().as_dict()}), flush=True)
b.stop()
"""


@pytest.mark.slurm
def test_two_torchrun_runs_on_other_master_ports_bootstrap_apart_on_the_real_cluster(run_tasks: Any) -> None:
    """Two torchrun runs at once in one allocation's shell, run id ``none`` and each its --master-port: before
    their launch keys told them apart, a worker of one run joined the other's bootstrap ('a second process
    claims it') and the rest waited out the timeout."""
    require("torch")
    torchrun = Path(sys.executable).with_name("torchrun")
    one = f'{torchrun} --nnodes=1 --nproc-per-node=2 --master-port={{}} --no-python "$@"'
    first = _free_port()
    second = next(port for port in iter(_free_port, None) if port != first)
    script = f"{one.format(first)} & first=$!; {one.format(second)} & second=$!; " \
             "wait $first && wait $second"
    rows = run_tasks(["salloc", "-N1", "-n1", "bash", "-c", script, "torchrun"], TWO_RUNS_WORKER, timeout=240)
    runs = {row["run"]: [r for r in rows if r["run"] == row["run"]] for row in rows}
    assert len(runs) == 2 and len({row["key"] for row in rows}) == 2, rows
    for workers in runs.values():
        assert sorted(r["rank"] for r in workers) == [0, 1] and {r["world_size"] for r in workers} == {2}, rows
        assert len({str(r["cluster"]) for r in workers}) == 1 and len({r["key"] for r in workers}) == 1, rows


def _free_port() -> int:
    """A port free now below the ephemeral range: one bound and released there may become the source
    port of a connection of the first torchrun run before the second binds it (EADDRINUSE)."""
    from slurm_resolver.rpc.network.grpc_network import spare_port

    return spare_port("")


def torchrun_vars(rank: int, local: int, world: int, here: int) -> dict[str, str]:
    return {"TORCHELASTIC_RUN_ID": "none", "RANK": str(rank), "LOCAL_RANK": str(local), "WORLD_SIZE": str(world),
            "LOCAL_WORLD_SIZE": str(here)}


# mixed launches: the captured Slurm environment torchrun ran in, its worker's variables, and what comes out:
# (rank, world, this worker's node, exact) or the start of the refusal
MIXED: list[tuple[str, dict[str, str], tuple[int, int, str, bool] | str]] = [
    ("a het step, one torchrun a node", {**captured("sbatch_hetjob")[1], **torchrun_vars(2, 0, 6, 2)},
     (2, 6, "node2", False)),
    ("a het step with two tasks on a node", {**captured("srun_het")[1], **torchrun_vars(2, 0, 6, 2)},
     "torchrun runs 2 times on node2"),
    ("an salloc shell (one host)", {**captured("salloc_shell")[0], **torchrun_vars(1, 1, 2, 2)},
     (1, 2, "localhost", True)),
    ("a het job's batch step", {**captured("sbatch_hetjob_batch_step")[0], **torchrun_vars(1, 1, 2, 2)},
     (1, 2, "node1", True)),
]


@pytest.mark.parametrize(("env", "expected"), [c[1:] for c in MIXED], ids=[c[0] for c in MIXED])
def test_torchrun_in_every_slurm_launch_mode(env: dict[str, str], expected: tuple[int, int, str, bool] | str) -> None:
    if isinstance(expected, str):
        with pytest.raises(ResolutionError, match=expected):
            resolve(env, **quiet())
        return
    cluster = resolve(env, **quiet())
    assert cluster.me is not None and cluster.launch.below == "torchrun"
    assert (cluster.rank, cluster.world_size, cluster.me.node, cluster.placement.exact) == expected


def test_torchrun_in_a_batch_script_is_on_the_batch_node() -> None:
    env = {**captured("sbatch_batch_step")[0], "TORCHELASTIC_RUN_ID": "x", "RANK": "1", "LOCAL_RANK": "1",
           "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2"}
    cluster = resolve(env, **quiet())
    assert cluster.spec().as_dict() == {"worker": ["node1:8888", "node1:8889"]} and cluster.rank == 1
    element = resolve({**env, "SLURM_ARRAY_JOB_ID": "40", "SLURM_ARRAY_TASK_ID": "3"}, **quiet())
    assert element.launch.array == "40_3"  # an element of a job array, as the batch step itself says


@pytest.mark.parametrize("env", [
    {**captured("sbatch_batch_step")[0], "TORCHELASTIC_RUN_ID": "x", "RANK": "0", "LOCAL_RANK": "0",
     "WORLD_SIZE": "999999999999", "LOCAL_WORLD_SIZE": "999999999999"},
    {**TWO_NODES[0], "WORLD_SIZE": "999999999998", "LOCAL_WORLD_SIZE": "499999999999"},
], ids=["alone", "below srun"])
def test_a_huge_count_of_workers_is_refused_before_anything_is_built_for_them(env: dict[str, str]) -> None:
    with pytest.raises(EnvironmentVariableError, match=r"LOCAL_WORLD_SIZE=.[49]9+.* at most 65535"):
        resolve(env, **quiet())


READ = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RESTART_COUNT", "SLURM_NODEID",
        "SLURM_STEP_TASKS_PER_NODE", "SLURM_STEP_NODELIST", "SLURM_STEP_NUM_TASKS", "LOCAL_SIZE"]


@settings(max_examples=200, deadline=None)
@given(rank=st.integers(0, 3), name=st.sampled_from(READ),
       value=st.one_of(st.text(max_size=12), st.from_regex(r"-?[0-9]{0,12}(\(x[0-9]{0,3}\))?", fullmatch=True)),
       deepspeed=st.booleans())
def test_malformed_launcher_variables_give_only_our_errors(rank: int, name: str, value: str,
                                                           deepspeed: bool) -> None:
    env = dict(TWO_NODES[rank], **{name: value})
    if deepspeed:
        env = {**{k: v for k, v in env.items() if not k.startswith("TORCHELASTIC")}, "CROSS_RANK": "0",
               "LOCAL_SIZE": env.get("LOCAL_WORLD_SIZE", "2")}
    try:
        resolve(env, **quiet(exchange="none"))
    except SlurmResolverError as exc:
        assert isinstance(exc, (ValueError, RuntimeError))


COUNT = st.one_of(st.integers(0, 10**12 - 1).map(str), st.sampled_from(["", " 2", "2.0", "-1", "1e3", "٣", "x"]))


@settings(max_examples=300, deadline=None)
@given(base=st.sampled_from(TWO_NODES + STANDALONE + [captured("sbatch_batch_step")[0], {}]),
       values=st.fixed_dictionaries({}, optional={name: COUNT for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE",
                                                                           "LOCAL_WORLD_SIZE", "LOCAL_SIZE")}),
       marker=st.sampled_from(["TORCHELASTIC_RUN_ID", "CROSS_RANK"]))
def test_workers_counts_malformed_together_give_our_errors_with_the_fix(base: dict[str, str], values: dict[str, str],
                                                                        marker: str) -> None:
    """Several of a launcher's counts wrong at once (a huge world and node, a rank past them): an error of
    ours that says how to fix it, at once, never a traceback from deep inside or a long wait."""
    env = {**{k: v for k, v in base.items() if not k.startswith("TORCHELASTIC")}, "RANK": "0", marker: "x",
           "LOCAL_SIZE": "2", **values}
    try:
        resolve(env, **quiet(exchange="none"))
    except SlurmResolverError as exc:
        assert exc.hint, exc
