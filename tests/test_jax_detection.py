"""What a bare ``jax.distributed.initialize()`` takes from a task's environment, mirrored release by release in
``slurm_resolver.jax_detection``: a table of its answers per range of JAX releases, and the installed JAX's own
detection code run over every captured launch (``noxfile.py`` runs this file on the oldest and newest JAX)."""

from __future__ import annotations

import glob
import importlib.machinery
import importlib.metadata
import inspect
import os
import sys
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from slurm_resolver import adapters
from slurm_resolver.errors import ConfigurationError
from slurm_resolver.jax_detection import RULES, Jax, installed, jax_sees, refusal, rules_for
from slurm_resolver.resolution import resolve
from slurm_resolver.rpc.bootstrapped import Bootstrapped

from .conftest import DATA, captured, require

ORTE = {"OMPI_MCA_orte_hnp_uri": "2077294592.0;tcp://192.0.2.2:33187;tcp6://[fd00::2]:56493"}
"""What Open MPI 4's mpirun adds (not captured: the capture keeps slurm_resolver's own variables)."""

MPICH_IN_SLURM = {  # mpiexec.hydra inside an allocation: srun started one proxy a node
    "PMI_RANK": "3", "PMI_SIZE": "4", "MPI_LOCALRANKID": "1", "SLURM_JOB_ID": "9", "SLURM_STEP_ID": "0",
    "SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_LOCALID": "0", "SLURM_STEP_NODELIST": "node[1-2]",
}

NONE = (None, None, None)
# (what, environment, rank, world size, [(from release, (cluster, count, id))]): the mirror's answer in each
# range of releases, the last entry at or before a release being its answer there.
TABLE = [
    ("an srun step", captured("srun_N3_n6")[5], 5, 6, [((0, 4, 30), ("slurm", 6, 5))]),
    ("the batch step", captured("sbatch_batch_step")[0], 0, 4,
     [((0, 4, 30), ("slurm", 4, 0)), ((0, 8, 1), NONE)]),  # before 0.8.1, SLURM_JOB_ID alone was Slurm
    ("an salloc shell", captured("salloc_shell")[0], 0, 4,
     [((0, 4, 30), ("slurm", None, None)), ((0, 8, 1), NONE)]),  # SLURM_PROCID unset: JAX raised
    ("Open MPI 4 mpirun", {**captured("salloc_mpirun")[3], **ORTE}, 3, 4, [((0, 4, 30), ("ompi", 4, 3))]),
    ("Open MPI 5 mpirun in an allocation", captured("salloc_mpirun")[3], 3, 4,  # its prted step's, then MPI's
     [((0, 4, 30), ("slurm", 2, 1)), ((0, 11, 2), ("ompi", 4, 3))]),
    ("Open MPI 5 naming itself", {**captured("salloc_mpirun")[3], **ORTE, "OMPI_VERSION": "5.0.6"}, 3, 4,
     [((0, 4, 30), ("ompi", 4, 3))]),
    ("MPICH/Hydra in an allocation", MPICH_IN_SLURM, 3, 4, [((0, 4, 30), ("slurm", 2, 1))]),
    ("MPICH/Hydra outside Slurm", {"PMI_RANK": "1", "PMI_SIZE": "2"}, 1, 2, [((0, 4, 30), NONE)]),
    ("a Kubernetes pod", {"KUBERNETES_SERVICE_HOST": "192.0.2.1", "JOB_COMPLETION_INDEX": "1"}, 1, 2,
     [((0, 4, 30), NONE), ((0, 4, 34), ("k8s", None, None))]),
    ("a count that is no number", {**captured("srun_N3_n6")[5], "SLURM_NTASKS": "six"}, 5, 6,
     [((0, 4, 30), ("slurm", None, None))]),
]

CASES = sorted(Path(p).stem for p in glob.glob(str(DATA / "env" / "*.jsonl")))
RELEASES = [rules.release for rules in RULES]


def _expected(answers: list[tuple[tuple[int, ...], tuple[Any, ...]]], release: str) -> tuple[Any, ...]:
    return [answer for since, answer in answers if since <= rules_for(release).since][-1]


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize(("env", "rank", "world", "answers"), [c[1:] for c in TABLE], ids=[c[0] for c in TABLE])
def test_the_mirror_answers_as_each_range_of_releases(release: str, env: dict[str, str], rank: int, world: int,
                                                      answers: list[tuple[tuple[int, ...], tuple[Any, ...]]]) -> None:
    sees = jax_sees(env, Jax(release))
    assert (sees.cluster, sees.num_processes, sees.process_id) == _expected(answers, release)
    agrees = (sees.num_processes, sees.process_id) == (world, rank)
    assert (refusal(env, rank, world, "mpi", Jax(release)) is None) is agrees


def test_open_mpi_5_without_mpi4py_fails_in_jaxs_detection() -> None:
    env = captured("salloc_mpirun")[3]
    sees = jax_sees(env, Jax("0.11.2", mpi4py=False))
    assert sees.cluster == "ompi" and sees.num_processes is None and "needs mpi4py" in sees.describe()
    assert "no process count from JAX's ompi detection (Open MPI 5 needs mpi4py" in str(
        refusal(env, 3, 4, "mpi", Jax("0.11.2", mpi4py=False)))


@pytest.mark.parametrize(("version", "release"), [
    ("0.4.30", "0.4.30"), ("0.4.31", "0.4.30"), ("0.4.33", "0.4.33"), ("0.4.38", "0.4.34"), ("0.7.0", "0.6.0"),
    ("0.8.0", "0.7.1"), ("0.8.1", "0.8.1"), ("0.10.2", "0.8.1"), ("0.11.1", "0.8.1"), ("0.11.2", "0.11.2"),
    ("0.12.0.1", "0.11.2"), ("0.11.2rc1", "0.11.2"), ("0.9.0.dev20260101+cuda", "0.8.1"), (" 0.4.35 ", "0.4.34"),
    ("0.4.1", "0.4.30"), ("garbage", "0.4.30"), (None, "0.11.2"),
])
def test_each_release_follows_its_rows_rules(version: str | None, release: str) -> None:
    assert rules_for(version).release == release


def test_the_installed_release_is_read_from_its_metadata_without_importing_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.metadata, "version", lambda name: {"jax": "0.4.30"}[name])
    monkeypatch.delitem(sys.modules, "jax", raising=False)
    assert installed().rules is RULES[0] and "jax" not in sys.modules

    def missing(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    assert installed().version is None and installed().rules is RULES[-1] and installed().named() == "JAX"
    monkeypatch.setitem(sys.modules, "mpi4py", None)  # what find_spec reads as not installed
    assert installed().mpi4py is False


def _tasks(case: str) -> list[tuple[dict[str, str], int, int, str, bool]]:
    """Each task of a captured launch with its rank, world size and launcher, as slurm_resolver resolves it
    (where a unit test can: an MPI launch needs its exchange, a shell is no task), and whether it is a task."""
    if case in ("salloc_mpirun", "salloc_shell", "srun_gres2_n4"):  # an exchange; no task; too few GPUs to split
        return []
    found = []
    for env in captured(case):
        cluster = resolve(env, resolves=lambda n: True, gpus_per_task=0)
        task = cluster.launch.is_task or cluster.launch.standalone
        found.append((env, cluster.rank or 0, cluster.world_size, cluster.launcher, task))
    return found


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("case", CASES)
def test_a_bare_initialize_is_right_in_every_srun_step_and_nowhere_else(case: str, release: str) -> None:
    for env, rank, world, launcher, task in _tasks(case):
        assert (refusal(env, rank, world, launcher, Jax(release), task=task) is None) is (launcher == "srun"), \
            (case, rank, jax_sees(env, Jax(release)))


@pytest.mark.parametrize("release", RELEASES)
def test_before_0_4_33_a_bare_initialize_takes_the_local_id_for_the_gpu(release: str) -> None:
    """``srun --gpus-per-task=1``: every task sees its one GPU as ordinal 0, ``SLURM_LOCALID`` is 0 or 1."""
    jax = Jax(release)
    reads = "JAX_LOCAL_DEVICE_IDS" in jax.rules.reads
    for rank, env in enumerate(captured("srun_gpus_per_task1")):
        b = Bootstrapped.from_cluster(resolve(env, resolves=lambda n: True))
        if not reads and env["SLURM_LOCALID"] != "0":
            with pytest.raises(ConfigurationError, match=r"reads no JAX_LOCAL_DEVICE_IDS.* would take local_device_ids "
                               rf"\[{env['SLURM_LOCALID']}\] from JAX's slurm detection \(.*SLURM_LOCALID="):
                adapters.jax_env(b, env, jax)
            continue
        exported = adapters.jax_env(b, env, jax)
        assert exported.get("JAX_LOCAL_DEVICE_IDS") == ("0" if reads else None), rank
        assert set(exported) - {"grpc_proxy"} <= set(jax.rules.reads)  # nothing JAX does not read


def test_the_refusal_says_what_jax_would_take_and_the_call_that_is_right() -> None:
    error = refusal(MPICH_IN_SLURM, 3, 4, "mpich", Jax("0.10.2"))
    assert error is not None and "would take 2 processes and process id 1 from JAX's slurm detection" in str(error)
    assert "SLURM_NTASKS=2, SLURM_PROCID=1, SLURM_LOCALID=0; JAX 0.10.2)" in str(error)
    assert "jax_arguments(slurm_resolver.bootstrap())" in str(error)
    assert "no process count from no cluster" in str(refusal({"PMI_RANK": "1", "PMI_SIZE": "2"}, 1, 2, "mpich"))
    batch = refusal(captured("sbatch_batch_step")[0], 0, 4, "batch", Jax("0.4.30"), task=False)
    assert "would take 4 processes and process id 0 from JAX's slurm detection" in str(batch)
    assert "this batch step is one process, none of the job's 4 tasks" in str(batch)
    assert "JAX looks for Open MPI's OMPI_MCA_orte_hnp_uri or an Open MPI 5 launch, then SLURM_JOB_ID, " \
        "SLURM_STEP_NODELIST, SLURM_NTASKS, SLURM_PROCID and SLURM_LOCALID together, then Kubernetes" \
        in str(refusal({}, 0, 2, "mpich"))


class _World:
    """MPI's world as Open MPI's mpirun gives it to each rank: what its ``OMPI_COMM_WORLD_*`` say."""

    def Get_size(self) -> int:  # noqa: N802 (mpi4py's names)
        return int(os.environ["OMPI_COMM_WORLD_SIZE"])

    def Get_rank(self) -> int:  # noqa: N802
        return int(os.environ["OMPI_COMM_WORLD_RANK"])

    def Split_type(self, kind: int) -> Any:  # noqa: N802
        return types.SimpleNamespace(Get_rank=lambda: int(os.environ["OMPI_COMM_WORLD_LOCAL_RANK"]))


def _mpi4py(monkeypatch: pytest.MonkeyPatch, present: bool) -> None:
    """mpi4py as the launch of each environment would answer (this process is no MPI launch), or none."""
    if not present:
        monkeypatch.setitem(sys.modules, "mpi4py", None)  # find_spec: not installed
        return
    fake = types.ModuleType("mpi4py")
    fake.__spec__ = importlib.machinery.ModuleSpec("mpi4py", None)
    fake.MPI = types.SimpleNamespace(COMM_WORLD=_World(), COMM_TYPE_SHARED=1)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "mpi4py", fake)
    monkeypatch.setitem(sys.modules, "mpi4py.MPI", fake.MPI)


def _jaxs_own(clusters: Any, env: Mapping[str, str]) -> tuple[int | None, int | None, tuple[int, ...] | None]:
    """What the installed JAX's ``ClusterEnv.auto_detect_unset_distributed_params`` takes from ``env`` for a
    bare call, the coordinator's address given (as ``--format jax`` exports it); nothing where it raises."""
    detect = clusters.ClusterEnv.auto_detect_unset_distributed_params
    given = {"coordinator_address": "node1:8888", "num_processes": None, "process_id": None,
             "local_device_ids": None, "cluster_detection_method": None, "initialization_timeout": 300}
    accepted = inspect.signature(detect).parameters  # 0.4.30 has no cluster_detection_method
    try:
        _, count, process, local = detect(**{k: v for k, v in given.items() if k in accepted})
    except Exception:  # a variable unset (KeyError), no number (ValueError), no mpi4py, no Kubernetes API
        return None, None, None
    return count, process, None if local is None else tuple(local)


@pytest.mark.parametrize("mpi4py", [True, False], ids=["mpi4py", "no mpi4py"])
def test_the_mirror_is_jaxs_own_detection(monkeypatch: pytest.MonkeyPatch, mpi4py: bool) -> None:
    """The installed JAX's detection code over every environment above takes the count, id and local devices
    that `jax_sees()` says it takes with the rules of that release (its code, not our reading of it)."""
    require("jax")
    from jax._src import clusters

    jax = Jax(importlib.metadata.version("jax"), mpi4py)
    _mpi4py(monkeypatch, mpi4py)
    environments = [env for case in CASES for env in captured(case)] + [c[1] for c in TABLE]
    for env in environments:
        monkeypatch.setattr(os, "environ", dict(env))
        sees = jax_sees(env, jax)
        assert _jaxs_own(clusters, env) == (sees.num_processes, sees.process_id, sees.local_device_ids), \
            (jax, sees, env)
