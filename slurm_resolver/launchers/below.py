"""Launchers below srun (torchrun, DeepSpeed's): one srun task per node starts the node's workers itself.

``srun -N2 --ntasks-per-node=1 torchrun --nproc-per-node=2 ...`` runs four workers, each with the
Slurm variables of its agent's task (two share ``SLURM_PROCID``) and the launcher's own: a rank,
a local rank, the number of workers and of workers on the node. The workers are the launch's
tasks. Slurm's step tells the nodes and which one is this worker's (``SLURM_NODEID``); the
launcher tells this node's ranks (they are consecutive: ``RANK - LOCAL_RANK`` onwards); which
node holds another node's ranks is the launcher's choice (torchrun numbers its agents in the order
they joined its rendezvous), so it is learned from the workers themselves, as for a het step.

A launch that cannot be told right (several agents on a node, workers on several nodes outside a
Slurm step, a launcher below srun that gives no rank) is refused on every worker with one line
naming the launcher and the fix.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import ClassVar

from ..errors import ConfigurationError, EnvironmentVariableError, ResolutionError
from ..layout import BLOCK, Distribution, Spread, array_element, in_srun_step, launch_key, step_layout
from ..parsing import optional_int, read_int
from ..speakers import Speaker
from .base import Launch, Launcher

__all__ = ["WorkersBelow", "Torchrun", "DeepSpeed", "SpawnedBelow", "written_in_batch_step", "from_batch_step",
           "refuse_written_in_batch_step"]

_RUN_ID = r"[A-Za-z0-9_-]{1,40}"
"""The shape of a run id shown as it is in a launch key (a UUID, ``none``, a job's own name); others are digested."""

_MASTER = r"[A-Za-z0-9_.:\[\]-]{1,48}"
"""The shape of where a run's workers meet (``MASTER_ADDR:MASTER_PORT``) shown as it is in a launch key; others
are digested."""

_MOST_WORKERS_A_NODE = 65535
"""A node's workers each take a port of their own (``port_base`` + local rank): no more can be told."""


class WorkersBelow(Launcher):
    """Workers started by a launcher of their own (below an srun task, or alone on one host).

    A subclass names the launcher's variables; ``detect`` looks for its marker.
    """

    rank_variable: ClassVar[str] = "RANK"
    local_variable: ClassVar[str] = "LOCAL_RANK"
    world_variable: ClassVar[str] = "WORLD_SIZE"
    per_node_variable: ClassVar[str]
    """The number of workers on this node (``LOCAL_WORLD_SIZE`` for torchrun)."""
    fix: ClassVar[str]
    """How to start the launcher so that every node runs one agent: shown in refusals."""

    @classmethod
    def attempt(cls, env: Mapping[str, str]) -> str:
        """What tells this start of the workers from the next (a restart starts new ones) and from
        another run of the launcher beside it in the same Slurm step: part of the launch's key."""
        return "0"

    @classmethod
    def resolve(cls, env: Mapping[str, str]) -> Launch:
        """The worker's place from its launcher's numbers, on its srun step's nodes or alone on its host."""
        rank = read_int(env, cls.rank_variable, hint=cls.fix)
        local = read_int(env, cls.local_variable, hint=cls.fix)
        world = read_int(env, cls.world_variable, minimum=1, hint=cls.fix)
        here = read_int(env, cls.per_node_variable, minimum=1, hint=cls.fix)
        if here > _MOST_WORKERS_A_NODE:  # before a tuple of this node's ranks is built
            raise EnvironmentVariableError(cls.per_node_variable, env[cls.per_node_variable],
                                           f"at most {_MOST_WORKERS_A_NODE} workers on a node, each with a port of "
                                           "its own", cls.fix)
        if rank >= world:
            raise EnvironmentVariableError(cls.rank_variable, env[cls.rank_variable],
                                           f"a rank below {cls.world_variable}={world}", cls.fix)
        if local >= here or rank < local or rank - local + here > world:
            raise EnvironmentVariableError(
                cls.local_variable, env[cls.local_variable], f"a rank among this node's {here} workers "
                f"({cls.per_node_variable}), consecutive from {cls.rank_variable}-{cls.local_variable}", cls.fix)
        worker = Launch(launcher=cls.name, world_size=world, rank=rank, local_rank=local,
                        gtids=tuple(range(rank - local, rank - local + here)), job_id=env.get("SLURM_JOB_ID"),
                        array=array_element(env), key=f"{launch_key(env)}/{cls.name}.{cls.attempt(env)}{_meeting(env)}",
                        is_task=True, below=cls.name)
        return cls._in_step(env, worker) if in_srun_step(env) else cls._alone(env, worker)

    @classmethod
    def _in_step(cls, env: Mapping[str, str], worker: Launch) -> Launch:
        """The workers below an srun step's tasks, one agent a node: this node's ranks exact, the others'
        nodes to be learned (one node: all exact)."""
        (nodes, agents), missing = step_layout(env)
        if missing:
            raise EnvironmentVariableError(missing[0], None, f"the srun step's layout, below which {cls.name} "
                                           "started this worker", cls.fix)
        crowded = next((n for n, c in zip(nodes, agents) if c > 1), None)
        if crowded is not None:
            raise ResolutionError(
                f"{cls.name} runs {max(agents)} times on {crowded} (srun started {max(agents)} tasks there), so its "
                "workers there cannot be told apart by node", cls.fix)
        world, here, first = worker.world_size or 0, len(worker.gtids), worker.gtids[0]
        # as many workers on every node, so this node's ranks start at a multiple of their count
        if world != here * len(nodes) or first % here:
            raise ResolutionError(
                f"{cls.name} started {world} workers ({cls.world_variable}) over the srun step's {len(nodes)} nodes, "
                f"{here} on this node ({cls.per_node_variable}): the nodes do not all run {here}, or {cls.name}'s "
                "node count is not srun's", cls.fix)
        node = env.get("SLURMD_NODENAME")
        position = optional_int(env, "SLURM_NODEID")
        if position is None and node in nodes:
            position = nodes.index(node)
        if position is None or position >= len(nodes):
            raise EnvironmentVariableError("SLURM_NODEID", env.get("SLURM_NODEID"),
                                           f"this node's position among the step's {len(nodes)} nodes", cls.fix)
        return replace(worker, nodes=nodes, counts=(here,) * len(nodes), node=node, node_index=position,
                       distribution=BLOCK if len(nodes) == 1 else Distribution(Spread.UNKNOWN))

    @classmethod
    def _alone(cls, env: Mapping[str, str], worker: Launch) -> Launch:
        """The workers outside an srun step (a batch script, a workstation): right where they all run here."""
        here = len(worker.gtids)
        if worker.world_size != here:
            raise ResolutionError(
                f"{cls.name} started {worker.world_size} workers on several hosts ({here} here) outside an srun "
                "step: the other hosts are not known", cls.fix)
        node = env.get("SLURMD_NODENAME") or "localhost"
        return replace(worker, nodes=(node,), counts=(here,), node=node, node_index=0)


class Torchrun(WorkersBelow):
    """A worker started by torchrun's agent: ``TORCHELASTIC_RUN_ID`` marks it; ``RANK``, ``LOCAL_RANK``,
    ``WORLD_SIZE`` and ``LOCAL_WORLD_SIZE`` place it; each run (``TORCHELASTIC_RUN_ID``: ``--rdzv-id``, a
    fresh one at each ``--standalone`` run) and each restart of the agent's workers
    (``TORCHELASTIC_RESTART_COUNT``) is a launch of its own, and so is each run that meets elsewhere
    (``MASTER_ADDR``, ``MASTER_PORT``: two runs beside each other with the run id ``none``)."""

    name = "torchrun"
    description = "workers of torchrun, below an srun task or alone on one host (TORCHELASTIC_RUN_ID)"
    per_node_variable = "LOCAL_WORLD_SIZE"
    fix = ("start one torchrun per node with srun and give every node the same number of workers: "
           "srun -N<nodes> --ntasks-per-node=1 torchrun --nnodes=<nodes> --nproc-per-node=<workers> "
           "--rdzv-backend=c10d --rdzv-endpoint=<first node>:29500 ... (or --standalone on one node)")

    @classmethod
    def detect(cls, env: Mapping[str, str]) -> bool:
        return "TORCHELASTIC_RUN_ID" in env and "RANK" in env

    @classmethod
    def attempt(cls, env: Mapping[str, str]) -> str:
        run = _shown(env.get("TORCHELASTIC_RUN_ID", ""), _RUN_ID)  # long or odd: a short digest of it
        restart = env.get("TORCHELASTIC_RESTART_COUNT", "0").strip()
        return f"{run}.{restart if restart.isascii() and restart.isdigit() and len(restart) < 10 else '0'}"


class DeepSpeed(WorkersBelow):
    """A worker started by DeepSpeed's launcher on its node: ``CROSS_RANK`` (the node's rank) and
    ``LOCAL_SIZE`` mark it; ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE`` and ``LOCAL_SIZE`` place it.
    (``deepspeed --launcher slurm`` runs an srun task per worker instead: an srun step.)"""

    name = "deepspeed"
    description = "workers of DeepSpeed's launcher, below an srun task or alone on one host (CROSS_RANK)"
    per_node_variable = "LOCAL_SIZE"
    fix = ("start DeepSpeed's launcher once per node with srun (srun -N<nodes> --ntasks-per-node=1 python -m "
           "deepspeed.launcher.launch --node_rank=$SLURM_NODEID ...), every node with as many workers; or let "
           "srun start every worker (deepspeed --launcher slurm)")

    @classmethod
    def detect(cls, env: Mapping[str, str]) -> bool:
        return "CROSS_RANK" in env and "LOCAL_SIZE" in env and "RANK" in env


class SpawnedBelow(Launcher):
    """A worker that a launcher below the Slurm task spawned without telling enough to place it
    (Lightning spawning its devices, ``torch.multiprocessing.spawn``...): its ``RANK`` or
    ``LOCAL_RANK`` is not Slurm's. Refused: its peers cannot be known."""

    name = "spawned"
    description = "a worker spawned below a Slurm task (RANK or LOCAL_RANK not Slurm's): refused"

    @classmethod
    def detect(cls, env: Mapping[str, str]) -> bool:
        return "SLURM_PROCID" in env and (_differs(env, "RANK", "SLURM_PROCID")
                                          or _differs(env, "LOCAL_RANK", "SLURM_LOCALID")) \
            and not written_in_batch_step(env)

    @classmethod
    def resolve(cls, env: Mapping[str, str]) -> Launch:
        ours, slurms = ("RANK", "SLURM_PROCID") if _differs(env, "RANK", "SLURM_PROCID") \
            else ("LOCAL_RANK", "SLURM_LOCALID")
        raise ResolutionError(
            f"a launcher below the Slurm task started this process ({ours}={env[ours]}, but {slurms}="
            f"{env.get(slurms, '0')}: Lightning spawning its devices, torch.multiprocessing, or another), and it "
            "does not tell where its other workers run",
            "let srun start every worker (srun --ntasks-per-node=<workers a node>, as Lightning expects under "
            "Slurm), or start them with torchrun (srun --ntasks-per-node=1 torchrun --nnodes=<nodes> ...)")


WRITTEN = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE")
"""What ``env --format torch`` writes that launchers below srun are told apart by (a ``RANK`` not Slurm's)."""


def written_in_batch_step(env: Mapping[str, str]) -> list[str]:
    """The variables of ``env`` that ``slurm-resolver env`` wrote in the batch step or an salloc shell
    (its ``SLURM_RESOLVER_TASK`` says so) and srun passed on to this task: the batch step's ``RANK=0``,
    which is no task's rank and no sign of a launcher below srun. A task's resolution leaves them out.

    >>> task = {"SLURM_PROCID": "3", "SLURM_STEP_ID": "0", "RANK": "0"}
    >>> written_in_batch_step({**task, "SLURM_RESOLVER_TASK": '{"launcher": "batch"}'}), written_in_batch_step(task)
    (['RANK'], [])
    """
    if not in_srun_step(env) or "TORCHELASTIC_RUN_ID" in env or "CROSS_RANK" in env:  # a launcher below set them
        return []
    told = env.get("SLURM_RESOLVER_TASK")
    if not told:  # nothing to parse: json (and its import) spared in every task's start
        return []
    import json

    try:
        launcher = json.loads(told)["launcher"]
    except (ValueError, KeyError, TypeError):
        return []
    return [name for name in WRITTEN if name in env] if _outside(launcher) else []


def _outside(name: object) -> bool:
    """Whether the launcher plugin called ``name`` describes a process that sees the whole job but is none of
    its tasks (its `Launcher.outside`: a batch script, an salloc shell), whichever plugin it is: every plugin
    is a subclass of `Launcher` (the registry's package imports this module, so is not asked).

    >>> _outside("batch"), _outside("srun"), _outside("nobody")
    (True, False, False)
    """
    plugins = Launcher.__subclasses__()
    for plugin in plugins:  # the subclasses, breadth first: the list grows as it is walked
        if getattr(plugin, "name", None) == name:
            return plugin.outside is not None
        plugins.extend(plugin.__subclasses__())
    return False


def from_batch_step(stale: list[str]) -> str:
    """Where ``stale`` (`written_in_batch_step`) came from, for errors and ``check``."""
    return (f"{', '.join(stale)} came from the batch step: `slurm-resolver env` wrote them there (rank 0's view) "
            "and srun passed them on to every task")


def refuse_written_in_batch_step(env: Mapping[str, str]) -> None:
    """Refuse, once for the job, to bootstrap a task whose ``env`` holds what ``slurm-resolver env`` wrote in
    the batch step (`written_in_batch_step`): a framework would read the batch step's ``RANK=0`` in every task."""
    stale = written_in_batch_step(env)
    if stale:
        raise ConfigurationError(from_batch_step(stale), "remove `eval \"$(slurm-resolver env ...)\"` from the "
                                 "batch script (bootstrap() gives every task its own), or unset them before it",
                                 speaker=Speaker.FIRST)


def _shown(text: str, shape: str) -> str:
    """``text`` as it is where it has ``shape``, else a short digest of it (the same in every worker).

    >>> _shown("none", _RUN_ID), _shown("a b", _RUN_ID)
    ('none', '8f47557072ee30a7')
    """
    if re.fullmatch(shape, text):  # compiled when first asked (re keeps it): only torchrun's workers ask
        return text
    import hashlib

    return hashlib.blake2s(text.encode("utf-8", "replace"), digest_size=8).hexdigest()


def _meeting(env: Mapping[str, str]) -> str:
    """Where this run's workers meet, as the launcher told them (``MASTER_ADDR``, ``MASTER_PORT``, each
    where given), for the launch key: two runs in one step with the same run id (torchrun's ``none``
    without ``--rdzv-id``) and another ``--master-port`` are launches of their own; ``''`` where neither is set.

    >>> _meeting({"MASTER_ADDR": "node1", "MASTER_PORT": "29500"}), _meeting({})
    ('@node1:29500', '')
    """
    meeting = ":".join(env[name].strip() for name in ("MASTER_ADDR", "MASTER_PORT") if env.get(name, "").strip())
    return f"@{_shown(meeting, _MASTER)}" if meeting else ""


def _differs(env: Mapping[str, str], launcher: str, slurm: str) -> bool:
    """Whether a launcher's variable is set to another value than Slurm's (``SLURM_LOCALID`` 0 in a batch step)."""
    return launcher in env and env[launcher].strip() != env.get(slurm, "0").strip()
