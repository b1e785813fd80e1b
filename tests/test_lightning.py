"""The Lightning environment answers right in every captured launch, and Fabric and Trainer take it."""

from __future__ import annotations

import glob
import os
from pathlib import Path
from typing import Any

import pytest

from slurm_resolver.cluster import Cluster
from slurm_resolver.errors import ConfigurationError
from slurm_resolver.exchange import LocalExchange
from slurm_resolver.lightning import LightningAnswers
from slurm_resolver.placement import Placement
from slurm_resolver.resolution import resolve

from .conftest import DATA, captured, in_threads, require

CASES = sorted(Path(p).stem for p in glob.glob(str(DATA / "env" / "*.jsonl")))
NO_TASK = {"salloc_shell", "sbatch_batch_step", "sbatch_hetjob_batch_step"}
PORT = 29511


def _truth(env: dict[str, str], name: str) -> int:
    """What the launcher itself says of a task: its MPI rank, else torchrun's, else Slurm's."""
    for prefix in ("OMPI_COMM_WORLD_", "", "SLURM_"):
        key = prefix + ({"rank": "RANK", "local": "LOCAL_RANK"}[name] if prefix != "SLURM_" else
                        {"rank": "PROCID", "local": "LOCALID"}[name])
        if key in env:
            return int(env[key])
    raise AssertionError(f"no {name} in {env}")


def clusters_of(case: str) -> list[Cluster]:
    """Every task's cluster, as its bootstrap ends: an MPI launch exchanged in-process, a layout the
    environment does not tell as the tasks learn it (each task's node, from the capture)."""
    envs = captured(case)
    group = LocalExchange.group(len(envs))
    found = in_threads(lambda i: resolve(envs[i], resolves=lambda n: True, exchange=group[i], gpus_per_task=0,
                                         hostname=lambda: envs[i].get("SLURMD_NODENAME", "vm")), len(envs), 30)
    hosts = [env["SLURMD_NODENAME"] for env in sorted(envs, key=lambda e: _truth(e, "rank"))]
    learned = []
    for cluster in found:
        assert isinstance(cluster, Cluster), cluster
        if not cluster.placement.exact:
            p = cluster.placement
            cluster = cluster.with_placement(Placement(p.nodes, p.counts, tuple(hosts)))
        learned.append(cluster)
    return learned


@pytest.mark.parametrize("case", [c for c in CASES if c not in NO_TASK])
def test_the_answers_are_right_in_every_captured_launch(case: str) -> None:
    envs = captured(case)
    rank0 = next(env for env in envs if _truth(env, "rank") == 0)
    node_ranks: dict[str, set[int]] = {}
    for env, cluster in zip(envs, clusters_of(case)):
        answers = LightningAnswers(cluster, main_port=PORT)
        assert answers.world_size() == len(envs)
        assert answers.global_rank() == _truth(env, "rank")
        assert answers.local_rank() == _truth(env, "local")
        node_ranks.setdefault(env["SLURMD_NODENAME"], set()).add(answers.node_rank())
        if "SLURM_NODEID" in env:
            assert answers.node_rank() == int(env["SLURM_NODEID"])  # Slurm's own index, as SLURMEnvironment's
        assert answers.main_address == rank0["SLURMD_NODENAME"]  # where rank 0 runs, not the list's first
        assert answers.main_port == PORT and answers.creates_processes_externally
    assert sorted(r for ranks in node_ranks.values() for r in ranks) == list(range(len(node_ranks)))  # one a node


@pytest.mark.parametrize("case", sorted(NO_TASK - {"salloc_shell"}))
def test_a_batch_script_is_no_task(case: str) -> None:
    with pytest.raises(ConfigurationError, match="(?s)no task of the batch launch.*srun"):
        LightningAnswers(resolve(captured(case)[0], resolves=lambda n: True), main_port=PORT)


def test_a_resolved_cluster_needs_a_port() -> None:
    with pytest.raises(ConfigurationError, match="main_port"):
        LightningAnswers(resolve(captured("srun_cpu_only")[0], resolves=lambda n: True))


SETTINGS = [  # (case, devices, num_nodes, refused with)
    ("srun_N2_ntasks_per_node2", 2, 2, None),
    ("srun_N2_n4_cyclic", 3, 2, None),  # srun -N2 -n4 without --ntasks-per-node: 3 and 1 on 4-CPU nodes
    ("srun_N3_n6", 4, 3, None),  # 4,1,1
    ("srun_N2_ntasks_per_node2", 1, 2, "HINT: set devices=2, num_nodes=2"),
    ("srun_N2_ntasks_per_node2", 2, 1, "HINT: set devices=2, num_nodes=2"),
    ("srun_N2_n4_cyclic", 2, 2, "at most 3 tasks on one \\(node\\[1-2\\] tasks 3,1\\). HINT: set devices=3"),
]


@pytest.mark.parametrize(("case", "devices", "nodes", "refused"), SETTINGS)
def test_settings_lightnings_ddp_cannot_run_right_are_refused_with_the_fix(case: str, devices: int, nodes: int,
                                                                            refused: str | None) -> None:
    answers = LightningAnswers(clusters_of(case)[1], main_port=PORT)
    if refused is None:
        answers.validate_settings(devices, nodes)
    else:
        with pytest.raises(ValueError, match=refused):
            answers.validate_settings(devices, nodes)


def test_rank_0_says_once_that_lightnings_sampler_does_not_fit_an_uneven_layout(caplog: Any) -> None:
    clusters = clusters_of("srun_N3_n6")
    for cluster in clusters:
        LightningAnswers(cluster, main_port=PORT).validate_settings(4, 3)
    said = [r.getMessage() for r in caplog.records if "DistributedSampler" in r.getMessage()]
    assert len(said) == 1 and "12 ways for 6 tasks" in said[0] and "use_distributed_sampler=False" in said[0]


def test_gpus_slurm_bound_to_each_task_are_refused_lightning_takes_cuda_local_rank() -> None:
    env = captured("srun_gpus_per_task1")[1]  # local rank 1, its one GPU is cuda:0
    answers = LightningAnswers(resolve(env, resolves=lambda n: True), main_port=PORT)
    with pytest.raises(ValueError, match="cuda:1 here.*cuda:0.*--gres=gpu:N"):
        answers.validate_settings(3, 2)


def test_fabric_and_trainer_take_it_and_keep_its_ranks() -> None:
    """srun -N2 -n4 -m cyclic (3 and 1 a node): Lightning's own node_rank * devices + local_rank would make rank 1
    rank 3."""
    require("lightning")
    from lightning.fabric import Fabric
    from lightning.fabric.plugins.environments import ClusterEnvironment
    from lightning.pytorch import Trainer

    from slurm_resolver.lightning import SlurmResolverEnvironment, environment_class

    cluster = clusters_of("srun_N2_n4_cyclic")[1]  # rank 1 on node2, local rank 0
    environment = SlurmResolverEnvironment(cluster, main_port=PORT)
    assert isinstance(environment, ClusterEnvironment) and environment_class() is SlurmResolverEnvironment
    fabric = Fabric(accelerator="cpu", strategy="ddp", devices=3, num_nodes=2, plugins=[environment])
    assert (fabric.global_rank, fabric.world_size, fabric.local_rank, fabric.node_rank) == (1, 4, 0, 1)
    trainer = Trainer(accelerator="cpu", strategy="ddp", devices=3, num_nodes=2, plugins=[environment],
                      logger=False, enable_checkpointing=False, enable_progress_bar=False)
    assert (trainer.global_rank, trainer.world_size, trainer.local_rank, trainer.node_rank) == (1, 4, 0, 1)


@pytest.mark.filterwarnings("ignore:The .srun. command is available")
def test_lightnings_own_slurm_environment_in_the_same_launches(monkeypatch: pytest.MonkeyPatch) -> None:
    """What docs/lightning.md says of Lightning's own: it refuses every step launched with srun -n (no
    --ntasks-per-node), and names as main address the job's first node, where rank 0 may not run."""
    require("lightning")
    from lightning.fabric.plugins.environments import SLURMEnvironment

    refused, taken, elsewhere = [], [], set()
    for case in CASES:
        if case in NO_TASK:
            continue
        for env, cluster in zip(captured(case), clusters_of(case)):
            monkeypatch.setattr(os, "environ", dict(env))
            try:
                SLURMEnvironment()
                taken.append(case)
            except RuntimeError as exc:
                assert "but this variable is not supported" in str(exc)  # --ntasks without --ntasks-per-node
                refused.append(case)
            ours = LightningAnswers(cluster, main_port=PORT).main_address
            if SLURMEnvironment.resolve_root_node_address(env["SLURM_NODELIST"]) != ours:  # its main address
                elsewhere.add(case)
    assert len(refused) == 69 and len(taken) == 25  # of the 94 task environments captured here
    assert {"srun_N3_n6", "srun_N2_n4_cyclic", "srun_arbitrary_nodelist", "srun_gpus_per_task1"} <= set(refused)
    assert elsewhere == {"srun_arbitrary_hostfile", "srun_arbitrary_nodelist", "srun_het_N1n2_N1n1"}
