"""Slurm's own launch modes: an srun step, the batch step, and an salloc shell."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping

from ..errors import EnvironmentVariableError
from ..layout import (
    BLOCK,
    Layout,
    Spread,
    array_element,
    distribution,
    gtids,
    het_groups,
    host_file,
    in_srun_step,
    job_layout,
    launch_key,
    step_layout,
    total_tasks,
)
from ..parsing import optional_int, read_int
from .base import Launch, Launcher

__all__ = ["SrunStep", "BatchStep", "SallocShell", "arbitrary_hosts"]

log = logging.getLogger("slurm_resolver")

_HOST_FILE_BYTES = 64 * 1024 * 1024


def arbitrary_hosts(env: Mapping[str, str], layout: Layout, tasks: int) -> tuple[str, ...]:
    """The node of every rank of an ``srun -m arbitrary`` step, from the host file ``SLURM_HOSTFILE``
    names, where this task can read it; () where it cannot (the tasks then learn the layout from
    each other). A file that does not match the step's layout is an error: it is not the one srun read."""
    path = env.get("SLURM_HOSTFILE")
    if not path:
        return ()
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read(_HOST_FILE_BYTES)
    except OSError as exc:
        log.debug("SLURM_HOSTFILE=%s cannot be read here (%s): the layout is learned from the tasks", path,
                  exc.strerror)
        return ()
    hosts = host_file(text, tasks, path)
    told, steps = Counter(hosts), dict(zip(*layout))
    differ = next((n for n in sorted(set(told) | set(steps)) if told.get(n, 0) != steps.get(n, 0)), None)
    if differ is not None:
        raise EnvironmentVariableError(
            "SLURM_HOSTFILE", path, f"the step's layout: it puts {told.get(differ, 0)} ranks on {differ}, where "
            f"SLURM_STEP_TASKS_PER_NODE has {steps.get(differ, 0)} (the file changed since srun read it, or it is "
            "not the file srun read)", "keep the host file as it was at launch, or unset SLURM_HOSTFILE in the "
            "tasks (env -u SLURM_HOSTFILE ...) so that they learn the layout from each other")
    return hosts


class SrunStep(Launcher):
    """A task of an srun step (also ``srun --mpi=pmi2|pmix``, whose PMI rank is Slurm's)."""

    name = "srun"
    description = "a task started by srun (SLURM_PROCID and SLURM_STEP_ID or the step's layout set)"

    @classmethod
    def detect(cls, env: Mapping[str, str]) -> bool:
        return in_srun_step(env)

    @classmethod
    def resolve(cls, env: Mapping[str, str]) -> Launch:
        rank = read_int(env, "SLURM_PROCID")
        layout, missing = step_layout(env)
        total = total_tasks(layout[1])
        world = optional_int(env, "SLURM_STEP_NUM_TASKS", 1)
        if missing:  # tasks_per_node= may stand in for the counts: resolution decides
            return Launch(launcher=cls.name, world_size=world, rank=rank, nodes=layout[0], counts=layout[1],
                          node=env.get("SLURMD_NODENAME"), local_rank=optional_int(env, "SLURM_LOCALID"),
                          job_id=env.get("SLURM_JOB_ID"), key=launch_key(env), is_task=True, missing=missing)
        if world is None:
            world = total
        if total != world:
            raise EnvironmentVariableError(
                "SLURM_STEP_TASKS_PER_NODE", env["SLURM_STEP_TASKS_PER_NODE"],
                f"counts adding up to SLURM_STEP_NUM_TASKS={world} (they add up to {total})")
        if rank >= world:
            raise EnvironmentVariableError("SLURM_PROCID", env["SLURM_PROCID"],
                                           f"a rank below the {world} tasks of the step")
        groups = het_groups(env, layout)
        node_index = optional_int(env, "SLURM_NODEID")
        if node_index is not None and node_index >= len(layout[0]):
            raise EnvironmentVariableError("SLURM_NODEID", env["SLURM_NODEID"],
                                           f"a position in SLURM_STEP_NODELIST ({len(layout[0])} nodes)")
        laid_out = distribution(env)
        return Launch(
            launcher=cls.name, world_size=world, rank=rank, nodes=layout[0], counts=layout[1],
            node=env.get("SLURMD_NODENAME"), local_rank=optional_int(env, "SLURM_LOCALID"),
            distribution=laid_out, groups=groups, node_index=node_index, gtids=gtids(env),
            hosts=arbitrary_hosts(env, layout, world) if laid_out.spread is Spread.ARBITRARY and not groups else (),
            components=tuple(sum(layout[1][p] for p in g) for g in groups),
            job_id=env.get("SLURM_JOB_ID"), array=array_element(env), key=launch_key(env), is_task=True,
            # MPI initialises through srun's PMIx; srun's PMI-2 is not spoken by every MPI
            # (Debian's Open MPI aborts in MPI_Init), so it is never tried there.
            mpi_capable="PMIX_RANK" in env,
        )


class BatchStep(Launcher):
    """The batch script of an sbatch job: the job's view before any srun; it is rank 0."""

    name = "batch"
    description = "the batch step of sbatch (SLURM_JOB_ID and SLURMD_NODENAME, no srun step's SLURM_STEP_ID)"
    outside = "batch script"

    @classmethod
    def detect(cls, env: Mapping[str, str]) -> bool:
        return "SLURM_JOB_ID" in env and "SLURMD_NODENAME" in env and not in_srun_step(env)

    @classmethod
    def resolve(cls, env: Mapping[str, str]) -> Launch:
        layout, components = job_layout(env)
        return Launch(
            launcher=cls.name, world_size=total_tasks(layout[1]), rank=0, nodes=layout[0], counts=layout[1],
            node=env.get("SLURMD_NODENAME"), local_rank=0, distribution=BLOCK,
            components=components, job_id=env.get("SLURM_JOB_ID"), array=array_element(env), key=launch_key(env),
        )


class SallocShell(Launcher):
    """A shell of salloc on the login node: the job's view; the shell itself is no task."""

    name = "salloc"
    description = "an salloc shell (SLURM_JOB_ID set, not on a compute node)"
    outside = "salloc shell"

    @classmethod
    def detect(cls, env: Mapping[str, str]) -> bool:
        return "SLURM_JOB_ID" in env and "SLURMD_NODENAME" not in env and "SLURM_PROCID" not in env

    @classmethod
    def resolve(cls, env: Mapping[str, str]) -> Launch:
        layout, components = job_layout(env)
        return Launch(
            launcher=cls.name, world_size=total_tasks(layout[1]), rank=None, nodes=layout[0], counts=layout[1],
            distribution=BLOCK, components=components, job_id=env.get("SLURM_JOB_ID"), array=array_element(env),
            key=launch_key(env),
        )
