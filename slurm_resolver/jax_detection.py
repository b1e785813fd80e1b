"""What a bare ``jax.distributed.initialize()`` takes from a process's environment: JAX's own cluster
detection (``jax/_src/clusters/``) mirrored as pure functions, release by release from JAX 0.4.30 (the oldest
this package supports) to 0.12, with the rules of each range of releases one row of `RULES`.

``initialize()`` reads a few ``JAX_*`` variables itself (`Rules.reads`: ``JAX_COORDINATOR_ADDRESS`` in every
release, ``JAX_LOCAL_DEVICE_IDS`` from 0.4.33); the number of processes and this process's id it takes only
from the first cluster environment it detects, in JAX's order: Open MPI (``OMPI_MCA_orte_hnp_uri``, set by
Open MPI 4's ``mpirun``, then ``OMPI_COMM_WORLD_SIZE``/``_RANK``; from 0.11.2 also an Open MPI 5 launch,
whose count and id it asks mpi4py), Slurm (``SLURM_JOB_ID`` alone before 0.8.1; from 0.8.1 ``SLURM_JOB_ID``,
``SLURM_STEP_NODELIST``, ``SLURM_NTASKS``, ``SLURM_PROCID`` and ``SLURM_LOCALID`` all set; it reads the last
three), then Kubernetes (from 0.4.34: ``KUBERNETES_SERVICE_HOST``, counts from the API server). mpi4py's own
is opt-in (``cluster_detection_method='mpi4py'``) and Cloud TPU's needs a TPU VM: neither is taken by a bare
call. The mirror takes the coordinator's address as given (``--format jax`` exports it), as JAX then does.

The installed release is read from its metadata ([`installed()`][slurm_resolver.jax_detection.installed]):
JAX is never imported. No variable of JAX's own carries the count or the id, so ``--format jax`` can make a
bare ``initialize()`` right only where this detection already sees the task's rank and world size
(`slurm_resolver.adapters.jax_env` checks it with [`refusal()`][slurm_resolver.jax_detection.refusal]).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .errors import ConfigurationError
from .speakers import Speaker

__all__ = ["Rules", "RULES", "Jax", "installed", "rules_for", "JaxSees", "jax_sees", "refusal"]

_ORTE = "OMPI_MCA_orte_hnp_uri"
_OMPI = ("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK")
_SLURM = ("SLURM_JOB_ID", "SLURM_STEP_NODELIST", "SLURM_NTASKS", "SLURM_PROCID", "SLURM_LOCALID")
_READ = ("SLURM_NTASKS", "SLURM_PROCID", "SLURM_LOCALID")
_ADDRESS, _BIND, _IDS = "JAX_COORDINATOR_ADDRESS", "JAX_COORDINATOR_BIND_ADDRESS", "JAX_LOCAL_DEVICE_IDS"


@dataclass(frozen=True)
class Rules:
    """What ``initialize()`` reads and detects in the JAX releases from ``since`` to the next row's.

    Attributes:
        since: the first release of these rules.
        change: what changed in it, for people (docs/jax.md's table).
        reads: the variables ``initialize()`` (and its detection) reads itself, whatever it detects.
        slurm: the variables whose presence is JAX's Slurm detection.
        kubernetes: whether ``KUBERNETES_SERVICE_HOST`` is a cluster (its counts come from the API server).
        open_mpi_5: whether an Open MPI 5 launch is one (the three ``OMPI_COMM_WORLD_*`` set, with
            ``OMPI_VERSION`` 5 or later, or without it and without Open MPI 4's URI): count and id from mpi4py.
    """

    since: tuple[int, ...]
    change: str
    reads: tuple[str, ...]
    slurm: tuple[str, ...] = _SLURM[:1]
    kubernetes: bool = True
    open_mpi_5: bool = False

    @property
    def release(self) -> str:
        """``since`` as JAX writes it (``0.4.30``)."""
        return ".".join(map(str, self.since))

    def looks_for(self) -> str:
        """The clusters a bare call looks for, in JAX's order, for messages."""
        mpi = "Open MPI's OMPI_MCA_orte_hnp_uri" + (" or an Open MPI 5 launch" if self.open_mpi_5 else "")
        slurm = f"{', '.join(self.slurm[:-1])} and {self.slurm[-1]} together" if len(self.slurm) > 1 \
            else self.slurm[0]
        return f"{mpi}, then {slurm}" + (", then Kubernetes" if self.kubernetes else "")


RULES = (
    Rules((0, 4, 30), "the oldest release this package supports: Slurm is SLURM_JOB_ID alone",
          (_ADDRESS, _BIND), kubernetes=False),
    Rules((0, 4, 33), "reads JAX_LOCAL_DEVICE_IDS (before: only the detection's local id)",
          (_ADDRESS, _BIND, _IDS), kubernetes=False),
    Rules((0, 4, 34), "detects Kubernetes (KUBERNETES_SERVICE_HOST, with the kubernetes package)",
          (_ADDRESS, _BIND, _IDS)),
    Rules((0, 6, 0), "reads JAX_SLICE_INDEX", (_ADDRESS, _BIND, _IDS, "JAX_SLICE_INDEX")),
    Rules((0, 7, 1), "reads JAX_PARTITION_INDEX",
          (_ADDRESS, _BIND, _IDS, "JAX_SLICE_INDEX", "JAX_PARTITION_INDEX")),
    Rules((0, 8, 1), "Slurm needs all five of its variables (a batch step is none); reads JAX_COORDINATOR_PORT",
          (_ADDRESS, _BIND, _IDS, "JAX_SLICE_INDEX", "JAX_PARTITION_INDEX", "JAX_COORDINATOR_PORT"), _SLURM),
    Rules((0, 11, 2), "detects Open MPI 5 launches, and asks mpi4py their count and id",
          (_ADDRESS, _BIND, _IDS, "JAX_SLICE_INDEX", "JAX_PARTITION_INDEX", "JAX_COORDINATOR_PORT"), _SLURM,
          open_mpi_5=True),
)
"""The rules of every range of JAX releases, oldest first; checked against JAX's code up to 0.12.0.1."""


def rules_for(version: str | None) -> Rules:
    """The rules of JAX ``version`` (as its metadata writes it); the newest where JAX is not installed (None),
    the oldest for a release older than this package supports.

    >>> [rules_for(v).release for v in ("0.4.30", "0.8.0", "0.8.1", "0.11.1", "0.12.0.1", "0.5.0.dev20250101")]
    ['0.4.30', '0.7.1', '0.8.1', '0.8.1', '0.11.2', '0.4.34']
    >>> rules_for(None) is RULES[-1], rules_for("0.4.20") is RULES[0]
    (True, True)
    """
    if version is None:
        return RULES[-1]
    numbers = re.match(r"\d+(?:\.\d+)*", version.strip())
    release = tuple(int(n) for n in numbers.group().split(".")) if numbers else ()
    return next((rules for rules in reversed(RULES) if rules.since <= release), RULES[0])


@dataclass(frozen=True)
class Jax:
    """A JAX installation, as far as what its detection takes depends on it.

    Attributes:
        version: the release installed (``0.10.2``); None where JAX is not installed beside slurm_resolver
            (then the newest rules are followed).
        mpi4py: whether mpi4py can be imported there (JAX 0.11.2's Open MPI 5 detection asks it).
    """

    version: str | None = None
    mpi4py: bool = True

    @property
    def rules(self) -> Rules:
        """The rules of this release (`rules_for`)."""
        return rules_for(self.version)

    def named(self) -> str:
        """``JAX 0.10.2``, or ``JAX`` where none is installed, for messages."""
        return f"JAX {self.version}" if self.version else "JAX"


def installed() -> Jax:
    """This Python's JAX and mpi4py, read from their metadata and the import system: neither is imported."""
    try:
        version: str | None = importlib.metadata.version("jax")
    except importlib.metadata.PackageNotFoundError:
        version = None
    try:
        mpi4py = importlib.util.find_spec("mpi4py") is not None
    except ValueError:  # imported without a spec (a test's stand-in): it is there
        mpi4py = True
    return Jax(version, mpi4py)


@dataclass(frozen=True)
class JaxSees:
    """What JAX's cluster detection takes from an environment.

    Attributes:
        cluster: the name JAX gives the cluster it detects (``ompi``, ``slurm``, ``k8s``), or None.
        num_processes, process_id: the count and id it takes there; None where it takes none (no cluster,
            or its detection fails: ``failure``).
        local_device_ids: the devices it restricts the process to: ``JAX_LOCAL_DEVICE_IDS`` where the release
            reads it and it is set, else the detection's local id; None where neither.
        source: what they come from, for messages (``SLURM_NTASKS=2, SLURM_PROCID=1``).
        failure: why the detection raises (a variable unset or not a number, mpi4py missing, the Kubernetes
            API); None where it does not.
        jax: the installation whose rules it followed.
    """

    cluster: str | None
    num_processes: int | None = None
    process_id: int | None = None
    local_device_ids: tuple[int, ...] | None = None
    source: str = ""
    failure: str | None = None
    jax: Jax = field(default=Jax(), repr=False)

    def describe(self) -> str:
        """``JAX's slurm detection (SLURM_NTASKS=2, SLURM_PROCID=0; JAX 0.10.2)``, or that it detects no cluster."""
        if self.cluster is None:
            return f"no cluster in JAX's detection ({self.jax.named()} looks for {self.jax.rules.looks_for()})"
        return f"JAX's {self.cluster} detection ({self.failure or self.source}; {self.jax.named()})"


def _number(env: Mapping[str, str], name: str) -> int | str:
    """The number ``int()`` reads in ``env[name]`` as JAX's detection does, or why there is none."""
    if name not in env:
        return f"{name} is not set"
    try:
        return int(env[name])
    except ValueError:
        return f"{name}={env[name][:16]!r} is not a number"


def _local_ids(env: Mapping[str, str], rules: Rules) -> tuple[int, ...] | str | None:
    """``JAX_LOCAL_DEVICE_IDS`` as ``initialize()`` reads it (where it does, and it is not empty)."""
    text = env.get(_IDS, "") if _IDS in rules.reads else ""
    if not text:
        return None
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        return f"{_IDS}={text[:16]!r} is not a list of numbers"


def _taken(cluster: str, env: Mapping[str, str], names: Sequence[str], jax: Jax, source: str = "") -> JaxSees:
    """The count, id and (unless ``JAX_LOCAL_DEVICE_IDS`` gives them) local id read from ``names``, in JAX's
    order, where JAX raises at the first that is unset or no number."""
    given = _local_ids(env, jax.rules)
    if isinstance(given, str):  # initialize() fails before it detects anything
        return JaxSees(cluster, failure=given, jax=jax)
    values, read = [], names if given is None else names[:2]
    for name in read:
        value = _number(env, name)
        if isinstance(value, str):
            return JaxSees(cluster, failure=value, jax=jax)
        values.append(value)
    shown = ", ".join(f"{name}={env[name][:16]}" for name in read)
    return JaxSees(cluster, values[0], values[1], given or (values[2],), f"{source}{shown}", jax=jax)


def _open_mpi_5(env: Mapping[str, str]) -> bool:
    """JAX 0.11.2's ``OmpiCluster._is_ompi_5``: the three world variables, and ``OMPI_VERSION`` 5 or later
    (without a readable one: no Open MPI 4 URI)."""
    if not all(name in env for name in _OMPI):
        return False
    try:
        return int(env.get("OMPI_VERSION", "").split(".", 1)[0]) >= 5
    except ValueError:
        return _ORTE not in env


def jax_sees(env: Mapping[str, str], jax: Jax = Jax()) -> JaxSees:
    """The cluster, process count, process id and local devices a bare ``jax.distributed.initialize()`` of
    ``jax`` (the newest rules, with mpi4py, by default) takes from ``env``, its coordinator's address given.

    >>> step = {"SLURM_JOB_ID": "7", "SLURM_STEP_NODELIST": "n1", "SLURM_NTASKS": "2", "SLURM_PROCID": "1",
    ...         "SLURM_LOCALID": "1"}
    >>> sees = jax_sees(step); sees.cluster, sees.num_processes, sees.process_id, sees.local_device_ids
    ('slurm', 2, 1, (1,))
    >>> batch = {"SLURM_JOB_ID": "7", "SLURM_NTASKS": "4", "SLURM_PROCID": "0", "SLURM_LOCALID": "0"}
    >>> jax_sees(batch).cluster, jax_sees(batch, Jax("0.8.0")).num_processes  # a batch step, before 0.8.1
    (None, 4)
    """
    rules = jax.rules
    if rules.open_mpi_5 and _open_mpi_5(env):  # MPI's world, which Open MPI also writes in OMPI_COMM_WORLD_*
        if not jax.mpi4py:
            return JaxSees("ompi", failure="Open MPI 5 needs mpi4py, which is not installed", jax=jax)
        return _taken("ompi", env, _OMPI, jax, "Open MPI 5, through mpi4py: ")
    if _ORTE in env:
        return _taken("ompi", env, _OMPI, jax)
    if all(name in env for name in rules.slurm):
        return _taken("slurm", env, _READ, jax)
    if rules.kubernetes and "KUBERNETES_SERVICE_HOST" in env:
        return JaxSees("k8s", failure="the count from the Kubernetes API server", jax=jax)
    return JaxSees(None, jax=jax)


def refusal(env: Mapping[str, str], rank: int, world_size: int, launcher: str, jax: Jax = Jax(),
            devices: Sequence[int] = (), task: bool = True) -> ConfigurationError | None:
    """Why a bare ``jax.distributed.initialize()`` of ``jax`` in ``env`` (with the variables ``--format jax``
    exports) would not be task ``rank`` of ``world_size`` (started by ``launcher``) on its GPUs ``devices``;
    None where JAX's detection agrees. ``task``: the process is one of the launch's tasks (a batch step is not).

    >>> step = {"SLURM_JOB_ID": "7", "SLURM_STEP_NODELIST": "n1", "SLURM_NTASKS": "2", "SLURM_PROCID": "1",
    ...         "SLURM_LOCALID": "1"}
    >>> refusal(step, 1, 2, "srun") is None, refusal(step, 3, 4, "torchrun") is None
    (True, False)
    >>> refusal(step, 1, 2, "srun", Jax("0.4.30"), devices=[0]) is None  # it reads no JAX_LOCAL_DEVICE_IDS
    False
    """
    sees = jax_sees(env, jax)
    fix = ("give them to JAX in the script, right in every launch: jax.distributed.initialize("
           "**slurm_resolver.adapters.jax_arguments(slurm_resolver.bootstrap())) (see docs/jax.md)")
    taken = "no process count" if sees.num_processes is None else \
        f"{sees.num_processes} processes and process id {sees.process_id}"
    said = f"a bare jax.distributed.initialize() would take {taken} from {sees.describe()}"
    if not task:
        return ConfigurationError(f"{said}, but this {launcher} step is one process, none of the job's "
                                  f"{world_size} tasks", fix, speaker=Speaker.FIRST)
    if (sees.num_processes, sees.process_id) != (world_size, rank):
        return ConfigurationError(
            f"{said}, but this task is rank {rank} of {world_size} ({launcher}): JAX reads the count and the id "
            "only through its own cluster detection, and no variable of JAX's can carry them", fix,
            speaker=Speaker.FIRST)
    if devices and sees.local_device_ids != tuple(devices):
        reads = "" if _IDS in jax.rules.reads else f" (it reads no {_IDS}: 0.4.33 and later do)"
        return ConfigurationError(
            f"a bare jax.distributed.initialize() of {jax.named()}{reads} would take local_device_ids "
            f"{list(sees.local_device_ids or ())} from {sees.describe()}, but this task's GPUs are "
            f"{list(devices)} as its process numbers them", f"upgrade JAX, or {fix}")
    return None
