"""GPUs per task, starting from what the task can see and respecting what Slurm bound.

Rules, in order:

1. The GPUs a task may use are ``CUDA_VISIBLE_DEVICES`` when set (indices, ``GPU-`` and
   ``MIG-`` UUIDs; ``''`` and ``NoDevFiles`` mean none), else ``SLURM_STEP_GPUS``,
   ``SLURM_JOB_GPUS`` or ``GPU_DEVICE_ORDINAL``, else NVML's devices, else none.
2. A task that Slurm bound to its own GPUs (``--gpus-per-task``, ``--gpu-bind``) keeps
   exactly those.
3. Otherwise the node's visible GPUs are split among its local tasks in local-rank order:
   ``gpus_per_task`` each (an int, or per job name, e.g. ``{'ps': 0, 'worker': 2}``), by
   default an even split. A task never receives another task's GPUs; asking for more
   than the node has is an error stating both numbers.
4. Where an even split gives each task none: GPUs that nobody asked for (NVML's, where no
   variable names any: a job that asked Slurm for no GPU, on a node whose GPUs it can see)
   go to no task, and the job runs on its CPUs; GPUs that Slurm gave (``--gres=gpu:1 -n4``)
   or that ``gpus_per_node`` declares are an error that says how to ask for enough.
   `GpuPlan.decision()` says which rule held.

Ids keep the form Slurm used: indices stay Slurm's indices, UUIDs stay UUIDs.
"""

from __future__ import annotations

import enum
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from functools import cache, cached_property

from .errors import ConfigurationError, EnvironmentVariableError, ResolutionError
from .packing import Packing
from .placement import Placement
from .values import PublicValue, fill

__all__ = ["Visible", "Share", "GpuPlan", "SOURCES", "ASK_SLURM", "parse_devices", "format_devices", "visible",
           "local", "split", "bound_per_task", "check_count", "ordinals"]

_NONE = {"", "NoDevFiles"}
_ID = r"^([0-9]{1,4}|GPU-[0-9A-Za-z-]{1,64}|MIG-[0-9A-Za-z/-]{1,96})$"  # compiled where a GPU is named
SOURCES = ("CUDA_VISIBLE_DEVICES", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "GPU_DEVICE_ORDINAL")
"""The variables that tell a task's GPUs, in the order they are believed; NVML's devices come after them."""

log = logging.getLogger("slurm_resolver")


class Visible(PublicValue):
    """The GPUs a task can see, where that came from, whether Slurm bound them to it, and whether
    anyone asked for them (``asked``: a variable, Slurm's or the user's, names them; NVML's are
    devices the node has, which a job that asked Slurm for none sees where no cgroup hides them)."""

    ids: tuple[str, ...]
    source: str
    bound: bool = False
    asked: bool = True

    def __init__(self, ids: tuple[str, ...], source: str, bound: bool = False, asked: bool = True) -> None:
        fill(self, ids, source, bound, asked)

    def describe(self) -> str:
        """``0,1 (from CUDA_VISIBLE_DEVICES, bound by Slurm)``, or why the task sees none."""
        if self.ids and not self.asked:
            return f"{format_devices(self.ids)} (from {self.source}: no variable names a GPU)"
        if self.ids:
            return f"{format_devices(self.ids)} (from {self.source}{', bound by Slurm' if self.bound else ''})"
        if self.source != "none":
            return f"none visible ({self.source} names none)"
        return "none visible (no CUDA_VISIBLE_DEVICES or Slurm GPU variable, and no NVML device)"


def parse_devices(text: str, variable: str = "CUDA_VISIBLE_DEVICES") -> tuple[str, ...]:
    """Parse a device list; the inverse of [`format_devices()`][slurm_resolver.gpus.format_devices].

    >>> parse_devices("0,2")
    ('0', '2')
    >>> parse_devices("GPU-8d1e3f3a-1c2b-4c5d-9e8f-0a1b2c3d4e5f")
    ('GPU-8d1e3f3a-1c2b-4c5d-9e8f-0a1b2c3d4e5f',)
    >>> parse_devices("NoDevFiles"), parse_devices("")
    ((), ())
    """
    if text.strip() in _NONE:
        return ()
    ids = tuple(part.strip() for part in text.split(","))
    bad = [i for i in ids if not re.match(_ID, i)]
    if bad or len(set(ids)) != len(ids):
        raise EnvironmentVariableError(
            variable, text, "GPU indices or GPU-/MIG- UUIDs separated by commas, each once, or '' for none",
            f"fix or unset {variable}")
    return ids


def parse_reported(reported: Mapping[int, str]) -> Mapping[int, tuple[str, ...]]:
    """Every rank's GPUs as the bootstrap's table carries them (where Slurm bound them per task, each
    task reports its own), parsed by `parse_devices()`; a malformed list is an error naming them.

    One table object is parsed once per process, and its parse shared (treat it as read-only): the
    tasks of a simulation share one table, and each parsing every peer's GPUs made its work and memory
    grow as the square of its size (16,384 simulated tasks of 8 a node: 387 s and 24 GB).

    >>> table = {0: "0", 1: "1"}
    >>> parse_reported(table), parse_reported(table) is parse_reported(table)
    ({0: ('0',), 1: ('1',)}, True)
    """
    global _last_parsed
    last = _last_parsed
    if last is not None and last[0] is reported:
        return last[1]
    parsed = {rank: parse_devices(text, "GPUs reported by a peer") for rank, text in reported.items()}
    _last_parsed = (reported, parsed)
    return parsed


_last_parsed: tuple[Mapping[int, str], Mapping[int, tuple[str, ...]]] | None = None
"""The table `parse_reported()` parsed last, and its parse."""


def format_devices(ids: Sequence[str]) -> str:
    """``'0,1'`` from ``('0', '1')``; ``''`` for none."""
    return ",".join(ids)


def ordinals(mine: Sequence[str], seen: Sequence[str], where: str = "CUDA_VISIBLE_DEVICES") -> tuple[int, ...]:
    """The task's GPUs ``mine`` as the process numbers them: their positions in the list it sees (``seen``,
    ``CUDA_VISIBLE_DEVICES`` where set: CUDA, PyTorch and JAX count devices from 0 along it). Slurm's ids are
    not ordinals: with ``CUDA_VISIBLE_DEVICES=2,3`` the GPU ``3`` is ordinal 1, and a task that Slurm bound
    to GPU ``1`` alone (``--gpus-per-task=1``) sees one device, ordinal 0.

    >>> ordinals(("3",), ("2", "3")), ordinals(("1",), ("1",)), ordinals(("2", "3"), ("0", "1", "2", "3"))
    ((1,), (0,), (2, 3))

    Raises:
        ConfigurationError: one of ``mine`` is not among the devices the process sees (``where`` names them).
    """
    position = {gpu: index for index, gpu in enumerate(seen)}
    unseen = [gpu for gpu in mine if gpu not in position]
    if unseen:
        raise ConfigurationError(
            f"the task's GPU {format_devices(unseen)} is not among the devices this process sees "
            f"({where}={format_devices(seen) or 'none'}), so it has no ordinal here",
            "leave CUDA_VISIBLE_DEVICES as Slurm set it (or as slurm_resolver narrowed it to the task's own GPUs), "
            "or resolve again after changing it")
    return tuple(position[gpu] for gpu in mine)


def bound_per_task(env: Mapping[str, str]) -> bool:
    """Whether Slurm bound GPUs to each task itself (``--gpus-per-task``, ``--gpu-bind``)."""
    tres = env.get("SLURMD_TRES_BIND", "") + "," + env.get("SLURM_GPU_BIND", "")
    return "per_task" in tres or "single" in tres or "map_gpu" in tres or "mask_gpu" in tres \
        or bool(env.get("SLURM_GPUS_PER_TASK"))


def visible(env: Mapping[str, str], nvml_ids: Sequence[str] | None = None) -> Visible:
    """The GPUs this task can see (rule 1), from ``env`` and, last, NVML's device ids."""
    for name in SOURCES:
        if name in env:
            return Visible(parse_devices(env[name], name), name, bound_per_task(env))
    if nvml_ids:
        return Visible(tuple(nvml_ids), "NVML", asked=False)
    return Visible((), "none")


def local(env: Mapping[str, str], nvml_ids: Callable[[], Sequence[str] | None] | None = None) -> Visible:
    """The GPUs this process sees (rule 1): from its variables, else NVML's devices, asked only then
    (``nvml_ids``: a seam for tests; NVML's own device ids by default)."""
    if any(name in env for name in SOURCES):
        return visible(env)
    if nvml_ids is None:
        from .nvml import device_ids

        return visible(env, device_ids())
    return visible(env, nvml_ids())


def _wanted(per_task: int | Mapping[str, int] | None, job: str) -> int | None:
    if per_task is None or isinstance(per_task, int):
        return per_task
    return per_task.get(job)


def split(
    node: str,
    gpus: Sequence[str],
    local_jobs: Sequence[str],
    per_task: int | Mapping[str, int] | None = None,
    asked: bool = True,
) -> list[tuple[str, ...]]:
    """Split a node's ``gpus`` among its tasks (their job names, in local-rank order); GPUs nobody
    ``asked`` for (NVML's) that an even split cannot share go to no task (rule 4).

    >>> split("n1", ["0", "1", "2", "3"], ["worker", "worker"])
    [('0', '1'), ('2', '3')]
    >>> split("n1", ["0", "1"], ["ps", "worker"], {"ps": 0})
    [(), ('0', '1')]
    >>> split("n1", ["GPU-1"], ["worker"] * 4, asked=False)
    [(), (), (), ()]

    Raises:
        ResolutionError: more GPUs wanted than ``gpus`` holds, or asked-for GPUs fewer than the tasks
            that share them evenly.
    """
    wanted = [_wanted(per_task, job) for job in local_jobs]
    if any(w is not None and (isinstance(w, bool) or not isinstance(w, int) or w < 0) for w in wanted):
        raise ConfigurationError(f"gpus_per_task={per_task!r} must give whole numbers >= 0")
    fixed = sum(w for w in wanted if w is not None)
    even = [i for i, w in enumerate(wanted) if w is None]
    share = (len(gpus) - fixed) // len(even) if even and len(gpus) > fixed else 0
    if even and gpus and share == 0 and asked:
        raise ResolutionError(
            f"{len(even)} tasks on {node} share {len(gpus) - fixed if len(gpus) > fixed else 0} GPUs: an even "
            "split gives each task none",
            "request at least one GPU per task (--gpus-per-task=1 or --gres=gpu:N), or pass gpus_per_task=0 "
            "(or {'ps': 0, ...}) for the tasks that should run without a GPU",
        )
    counts = [share if w is None else w for w in wanted]
    if sum(counts) > len(gpus):
        raise ResolutionError(
            f"the {len(local_jobs)} tasks on {node} request {sum(counts)} GPUs, but {node} has "
            f"{len(gpus)} visible ({format_devices(gpus) or 'none'})",
            "lower gpus_per_task / gpus_per_node, or ask Slurm for more GPUs (--gres=gpu:N)",
        )
    result, first = [], 0
    for count in counts:
        result.append(tuple(gpus[first:first + count]))
        first += count
    return result


class Share(enum.Enum):
    """How the GPUs of the calling task's node go to its tasks: the rule that held (`GpuPlan.decision()`)."""

    NONE_VISIBLE = "none visible"
    """No GPU visible, none declared: nothing to split."""
    BOUND = "bound by Slurm"
    """Slurm bound each task its own GPUs (rule 2): each keeps them."""
    SPLIT = "split"
    """The node's GPUs split among its tasks, evenly or by ``gpus_per_task`` (rule 3)."""
    UNASKED = "unasked, fewer than the tasks"
    """NVML's GPUs, which nobody asked for, fewer than the tasks that would share them: none to any task
    (rule 4); the job runs on its CPUs."""


ASK_SLURM = "to give the tasks GPUs, ask Slurm for them: --gres=gpu:N (N at least the tasks a node), --gpus-per-task=1"
"""What to do where the node's GPUs go to no task because the job asked for none (`Share.UNASKED`)."""

_said: set[str] = set()
"""The decisions said already in this process: each is logged once, however often a cluster is resolved."""


def _say_once(text: str) -> None:
    if text not in _said:
        _said.add(text)
        log.info("GPUs: %s", text)


def check_count(name: str, value: object) -> None:
    """Fail unless ``value`` is None or a whole number >= 0 (a GPU count argument)."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise ConfigurationError(f"{name}={value!r} must be a whole number >= 0 (0 means no GPU)")


class GpuPlan:
    """GPUs of every task of a cluster, computed per node on demand.

    The caller's node is exact (and checked when the plan is made). Other nodes are taken
    to look like the caller's (a homogeneous allocation); where Slurm bound GPUs per task,
    another task's ids are unknown (None) and only its count is given.
    """

    def __init__(self, seen: Visible | Callable[[], Visible], caller: int | None, placement: Placement,
                 packing: Packing, per_task: int | Mapping[str, int] | None = None,
                 per_node: int | None = None) -> None:
        check_count("gpus_per_node", per_node)
        if not isinstance(per_task, Mapping):
            check_count("gpus_per_task", per_task)
        self._seen = seen if isinstance(seen, Visible) else cache(seen)  # NVML read once, for every caller
        self._told = False
        self.caller = caller
        self._placement = placement
        self._packing = packing
        self.per_task = per_task
        self.per_node = per_node
        self._cache: dict[tuple[str, ...], list[tuple[str, ...] | None]] = {}
        if isinstance(seen, Visible) and caller is not None:
            self.ids(caller)  # the caller's own split is exact: an impossible request fails here

    def for_caller(self, caller: int, placement: Placement | None = None) -> GpuPlan:
        """The same plan as task ``caller`` sees it (assuming it sees what this caller sees), on
        ``placement`` where the tasks learned a better one."""
        return GpuPlan(self._seen, caller, placement or self._placement, self._packing, self.per_task, self.per_node)

    @cached_property
    def visible(self) -> Visible:
        """The GPUs the calling task can see (rule 1); asked of NVML on first use only."""
        return self._seen if isinstance(self._seen, Visible) else self._seen()

    @cached_property
    def node_gpus(self) -> tuple[str, ...]:
        """The GPUs of the caller's node that the plan splits (``gpus_per_node`` of them)."""
        return self._node_gpus(self.per_node)

    def _node_gpus(self, per_node: int | None) -> tuple[str, ...]:
        ids = self.visible.ids
        if per_node is None or self.visible.bound:
            return ids
        if not ids:
            return tuple(str(i) for i in range(per_node))  # declared by the caller, as TensorFlow
        if per_node > len(ids):
            raise ResolutionError(
                f"gpus_per_node={per_node}, but this node has {len(ids)} GPUs visible: {self.visible.describe()}",
                f"lower gpus_per_node to {len(ids)} or ask Slurm for more (--gres=gpu:{per_node})")
        return ids[:per_node]

    def _job(self, rank: int) -> str:
        return self._packing.job_of(rank)[0]

    @property
    def _asked(self) -> bool:
        """Whether the node's GPUs were asked for: named by a variable, or declared by ``gpus_per_node``."""
        return self.visible.asked or self.per_node is not None

    def share(self) -> Share:
        """The rule that gives the caller's node's GPUs to its tasks (of rules 2 to 4)."""
        if not self.node_gpus and not self.per_task:
            return Share.NONE_VISIBLE
        if self.visible.bound:
            return Share.BOUND
        if self.caller is None or self._asked or not self.node_gpus:
            return Share.SPLIT
        node, group = self._placement.group(self.caller)
        try:
            split(node, self.node_gpus, tuple(map(self._job, group)), self.per_task)  # as if they were asked for
        except ResolutionError:
            return Share.UNASKED
        return Share.SPLIT

    def decision(self) -> tuple[Share, str]:
        """The rule that held and, in words, what the caller's GPUs are and why: ``slurm-resolver check``
        prints them, and the log says them once a process (at INFO: ``-v``) when the caller's are computed.

        Raises:
            ResolutionError: as `ids()` for the caller (asked-for GPUs fewer than the tasks).
        """
        share, seen = self.share(), self.visible.describe()
        if share is Share.NONE_VISIBLE or self.caller is None:
            return share, seen
        if share is Share.BOUND:
            return share, f"{seen}: the task keeps the GPUs Slurm bound to it"
        node, group = self._placement.group(self.caller)
        tasks = f"{node}'s {len(group)} task{'s' * (len(group) != 1)}"
        if share is Share.UNASKED:
            return share, f"{seen}, fewer than {tasks}: no task gets one (CUDA_VISIBLE_DEVICES=''), it runs on CPUs"
        mine = format_devices(self.ids(self.caller) or ()) or "none"
        how = "an even split" if self.per_task is None else f"gpus_per_task={self.per_task!r}"
        return share, f"{seen}: this task gets {mine}, {how} among {tasks}"

    def ids(self, rank: int) -> tuple[str, ...] | None:
        """The GPU ids of ``rank``; None where only the count is known. The caller's own, once worked
        out, are said once a process where the log says INFO (``-v``): which rule gave them, and why."""
        if not self.node_gpus and not self.per_task:  # no GPU, none asked for: nothing to split (nor to say)
            self._placement.node_index(rank)  # a rank outside the job is still an error
            return ()
        job = self._job(rank)
        if self.visible.bound:
            if _wanted(self.per_task, job) == 0:
                return ()
            if rank != self.caller:
                return None
            if not self._told:
                self._tell()
            return self.visible.ids
        node, group = self._placement.group(rank)
        jobs = tuple(map(self._job, group))
        if jobs not in self._cache:
            try:
                self._cache[jobs] = list(split(node, self.node_gpus, jobs, self.per_task, self._asked))
            except ResolutionError:
                if self.caller is not None and self.caller in group:
                    raise  # the caller's own node is exact
                self._cache[jobs] = [None] * len(jobs)  # another node that does not look like the caller's
            if not self._told and self.caller is not None and self.caller in group:
                self._tell()
        return self._cache[jobs][self._placement.local_rank(rank)]

    def _tell(self) -> None:
        """Say the caller's GPUs and the rule that gave them, once (the words made only where they are said)."""
        self._told = True
        if log.isEnabledFor(logging.INFO):
            share, words = self.decision()
            _say_once(f"{words} ({ASK_SLURM})" if share is Share.UNASKED else words)

    def count(self, rank: int) -> int:
        """How many GPUs ``rank`` has; where unknown, as many as the calling task."""
        ids = self.ids(rank)
        if ids is not None:
            return len(ids)
        mine = self.ids(self.caller) if self.caller is not None else None
        return len(mine) if mine is not None else len(self.visible.ids)
