"""What a bare ``jax.distributed.initialize()`` takes from a process's environment: JAX's own cluster
detection (``jax/_src/clusters/``, JAX 0.4.30 to 0.11), mirrored as one pure function.

``initialize()`` reads ``JAX_COORDINATOR_ADDRESS``, ``JAX_LOCAL_DEVICE_IDS``,
``JAX_COORDINATOR_BIND_ADDRESS`` and ``JAX_PARTITION_INDEX`` itself; the number of processes and
this process's id it takes only from the first cluster environment whose variables are present, in
JAX's order: Open MPI (``OMPI_MCA_orte_hnp_uri``, set by Open MPI 4's ``mpirun``; then
``OMPI_COMM_WORLD_SIZE``/``_RANK``/``_LOCAL_RANK``), Slurm (``SLURM_JOB_ID``, ``SLURM_STEP_NODELIST``,
``SLURM_NTASKS``, ``SLURM_PROCID`` and ``SLURM_LOCALID`` all set; it reads the last three), then
Kubernetes (``KUBERNETES_SERVICE_HOST``, counts from the API server). mpi4py's is opt-in
(``cluster_detection_method='mpi4py'``) and Cloud TPU's needs a TPU VM: neither is taken by a bare
call. No variable of JAX's own carries the count or the id, so ``--format jax`` can make a bare
``initialize()`` right only where this detection already sees the task's rank and world size
(`slurm_resolver.adapters.jax_env` checks it with [`jax_sees()`][slurm_resolver.jax_detection.jax_sees]).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .errors import ConfigurationError
from .speakers import Speaker

__all__ = ["JaxSees", "jax_sees", "refusal", "READ"]

READ = ("JAX_COORDINATOR_ADDRESS", "JAX_LOCAL_DEVICE_IDS", "JAX_COORDINATOR_BIND_ADDRESS", "JAX_PARTITION_INDEX")
"""The variables ``initialize()`` reads itself, whatever cluster it detects."""

_SLURM = ("SLURM_JOB_ID", "SLURM_STEP_NODELIST", "SLURM_NTASKS", "SLURM_PROCID", "SLURM_LOCALID")
_OMPI = ("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK")


@dataclass(frozen=True)
class JaxSees:
    """What JAX's cluster detection takes from an environment.

    Attributes:
        cluster: the name JAX gives the cluster it detects (``ompi``, ``slurm``, ``k8s``), or None.
        num_processes, process_id: the count and id it reads there; None where it reads none (no cluster,
            Kubernetes' API, a value that is not a number).
        read: the variables they come from, for messages.
    """

    cluster: str | None
    num_processes: int | None = None
    process_id: int | None = None
    read: tuple[str, ...] = ()

    def describe(self, env: Mapping[str, str]) -> str:
        """``JAX's slurm detection (SLURM_NTASKS=2, SLURM_PROCID=0)``, or that it detects no cluster."""
        if self.cluster is None:
            return ("no cluster in JAX's detection (it looks for Open MPI's OMPI_MCA_orte_hnp_uri, then SLURM_JOB_ID, "
                    "SLURM_STEP_NODELIST, SLURM_NTASKS, SLURM_PROCID and SLURM_LOCALID together, then Kubernetes)")
        shown = ", ".join(f"{name}={env[name][:16]}" for name in self.read[:2])
        return f"JAX's {self.cluster} detection ({shown or 'the Kubernetes API'})"


def _number(env: Mapping[str, str], name: str) -> int | None:
    text = env.get(name, "").strip()
    return int(text) if text.isascii() and text.isdigit() else None


def jax_sees(env: Mapping[str, str]) -> JaxSees:
    """The cluster, process count and process id a bare ``jax.distributed.initialize()`` takes from ``env``.

    >>> step = {"SLURM_JOB_ID": "7", "SLURM_STEP_NODELIST": "n1", "SLURM_NTASKS": "2", "SLURM_PROCID": "1",
    ...         "SLURM_LOCALID": "1"}
    >>> sees = jax_sees(step); sees.cluster, sees.num_processes, sees.process_id
    ('slurm', 2, 1)
    >>> jax_sees({"SLURM_JOB_ID": "7", "SLURM_NTASKS": "4", "SLURM_PROCID": "0"}).cluster is None  # a batch step
    True
    """
    if "OMPI_MCA_orte_hnp_uri" in env:
        return JaxSees("ompi", _number(env, _OMPI[0]), _number(env, _OMPI[1]), _OMPI[:2])
    if all(name in env for name in _SLURM):
        return JaxSees("slurm", _number(env, "SLURM_NTASKS"), _number(env, "SLURM_PROCID"), _SLURM[2:4])
    if "KUBERNETES_SERVICE_HOST" in env:
        return JaxSees("k8s")
    return JaxSees(None)


def refusal(env: Mapping[str, str], rank: int, world_size: int, launcher: str) -> ConfigurationError | None:
    """Why a bare ``jax.distributed.initialize()`` in ``env`` would not be task ``rank`` of ``world_size``
    (started by ``launcher``), as one error said once for the job; None where JAX's detection agrees.

    >>> step = {"SLURM_JOB_ID": "7", "SLURM_STEP_NODELIST": "n1", "SLURM_NTASKS": "2", "SLURM_PROCID": "1",
    ...         "SLURM_LOCALID": "1"}
    >>> refusal(step, 1, 2, "srun") is None, refusal(step, 3, 4, "torchrun") is None
    (True, False)
    """
    sees = jax_sees(env)
    if (sees.num_processes, sees.process_id) == (world_size, rank):
        return None
    taken = "no process count" if sees.num_processes is None else \
        f"{sees.num_processes} processes and process id {sees.process_id}"
    return ConfigurationError(
        f"a bare jax.distributed.initialize() would take {taken} from {sees.describe(env)}, but this task is rank "
        f"{rank} of {world_size} ({launcher}): JAX reads the count and the id only through its own cluster "
        "detection, and no variable of JAX's can carry them",
        "give them to JAX in the script, right in every launch: jax.distributed.initialize("
        "**slurm_resolver.adapters.jax_arguments(slurm_resolver.bootstrap())) (see docs/jax.md)",
        speaker=Speaker.FIRST)
