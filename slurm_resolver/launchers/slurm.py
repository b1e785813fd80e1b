"""Slurm's own launch modes: an srun step, the batch step, and an salloc shell."""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import EnvironmentVariableError, ResolutionError
from ..hostlists import expand, expand_counts
from ..parsing import optional_int, read_int, require
from .base import Launch, Launcher

__all__ = ["SrunStep", "BatchStep", "SallocShell", "job_layout", "het_components"]

_IN_STEP = "run inside a Slurm job step (srun), or let mpirun/srun start the process"


def _group(env: Mapping[str, str], name: str, index: int) -> tuple[str, str] | None:
    for key in (f"{name}_HET_GROUP_{index}", f"{name}_PACK_GROUP_{index}"):
        if key in env:
            return key, env[key]
    return None


Layout = tuple[tuple[str, ...], tuple[int, ...]]


def layout_of(env: Mapping[str, str], nodes_var: str, counts_var: str) -> Layout:
    """Nodes and their task counts, from a host list and a compressed count list."""
    nodes = expand(require(env, nodes_var), nodes_var)
    counts = expand_counts(require(env, counts_var), counts_var)
    if len(nodes) != len(counts):
        raise EnvironmentVariableError(
            counts_var, env[counts_var],
            f"one count per node of {nodes_var}={env[nodes_var]!r} ({len(nodes)} nodes, {len(counts)} counts)",
        )
    return nodes, counts


def het_size(env: Mapping[str, str]) -> int:
    """Number of components of a heterogeneous job; 0 for an ordinary job."""
    for name in ("SLURM_HET_SIZE", "SLURM_PACK_SIZE"):
        if name in env:
            return read_int(env, name, minimum=1)
    return 0


def job_layout(env: Mapping[str, str]) -> tuple[Layout, tuple[int, ...]]:
    """The whole job's layout and its het components' task counts (the batch step's view)."""
    size = het_size(env)
    if size == 0:
        nodes_var = "SLURM_JOB_NODELIST" if "SLURM_JOB_NODELIST" in env else "SLURM_NODELIST"
        return layout_of(env, nodes_var, "SLURM_TASKS_PER_NODE"), ()
    nodes: list[str] = []
    counts: list[int] = []
    components: list[int] = []
    for index in range(size):
        found_nodes = _group(env, "SLURM_JOB_NODELIST", index)
        found_counts = _group(env, "SLURM_TASKS_PER_NODE", index)
        if found_nodes is None or found_counts is None:
            raise EnvironmentVariableError(
                f"SLURM_JOB_NODELIST_HET_GROUP_{index}", None,
                f"a host list for component {index} of {size} (SLURM_HET_SIZE={size})",
                "resolve heterogeneous jobs from their batch step or an srun step",
            )
        part_nodes, part_counts = layout_of(env, found_nodes[0], found_counts[0])
        nodes.extend(part_nodes)
        counts.extend(part_counts)
        components.append(sum(part_counts))
    return (tuple(nodes), tuple(counts)), tuple(components)


def het_components(env: Mapping[str, str], layout: Layout) -> tuple[int, ...]:
    """Tasks of each het component in a step's layout, from each component's node list.

    The tasks of a heterogeneous step are numbered component by component; a component's
    tasks are those on its nodes. Nodes shared by two components cannot be attributed.
    """
    size = het_size(env)
    if size == 0:
        return ()
    owner: dict[str, int] = {}
    for index in range(size):
        found = _group(env, "SLURM_JOB_NODELIST", index)
        if found is None:
            raise EnvironmentVariableError(
                f"SLURM_JOB_NODELIST_HET_GROUP_{index}", None, f"the nodes of het component {index}")
        for node in expand(found[1], found[0]):
            if node in owner:
                raise ResolutionError(
                    f"het components {owner[node]} and {index} share node {node}, so the tasks on it "
                    "cannot be attributed to a component",
                    "give each component its own nodes, or use jobs={name: count} instead of one job per component",
                )
            owner[node] = index
    components = [0] * size
    for node, count in zip(*layout):
        if node not in owner:
            raise ResolutionError(f"step node {node} belongs to no het component",
                                  "check SLURM_JOB_NODELIST_HET_GROUP_<n>")
        components[owner[node]] += count
    return tuple(components)


def _distribution(env: Mapping[str, str]) -> str:
    """Slurm's distribution across nodes: ``block`` (the default), ``cyclic``, ``plane=N``..."""
    text = (env.get("SLURM_DISTRIBUTION") or "block").strip()
    first = text.replace(",", ":").split(":")[0].strip().lower() or "block"
    if first.startswith("plane"):
        size = first.partition("=")[2] or env.get("SLURM_DIST_PLANESIZE", "")
        if not (size.isascii() and size.isdigit()) or len(size) > 6 or int(size) < 1:
            raise EnvironmentVariableError("SLURM_DIST_PLANESIZE", env.get("SLURM_DIST_PLANESIZE"),
                                           "the plane size (a whole number >= 1) of -m plane=N")
        return f"plane={int(size)}"
    return first


class SrunStep(Launcher):
    """A task of an srun step (also ``srun --mpi=pmi2|pmix``, whose PMI rank is Slurm's)."""

    name = "srun"
    description = "a task started by srun (SLURM_STEP_ID and SLURM_PROCID set)"

    @classmethod
    def detect(cls, env: Mapping[str, str]) -> bool:
        return "SLURM_PROCID" in env and ("SLURM_STEP_ID" in env or "SLURM_STEPID" in env)

    @classmethod
    def resolve(cls, env: Mapping[str, str]) -> Launch:
        rank = read_int(env, "SLURM_PROCID")
        layout = layout_of(env, "SLURM_STEP_NODELIST", "SLURM_STEP_TASKS_PER_NODE")
        total = sum(layout[1])
        world = optional_int(env, "SLURM_STEP_NUM_TASKS", 1)
        if world is None:
            world = total
        if total != world:
            raise EnvironmentVariableError(
                "SLURM_STEP_TASKS_PER_NODE", env["SLURM_STEP_TASKS_PER_NODE"],
                f"counts adding up to SLURM_STEP_NUM_TASKS={world} (they add up to {total})")
        if rank >= world:
            raise EnvironmentVariableError("SLURM_PROCID", env["SLURM_PROCID"], f"a rank below the {world} tasks of the step")
        return Launch(
            launcher=cls.name, world_size=world, rank=rank, nodes=layout[0], counts=layout[1],
            node=env.get("SLURMD_NODENAME"), local_rank=optional_int(env, "SLURM_LOCALID"),
            distribution=_distribution(env),
            components=het_components(env, layout), job_id=env.get("SLURM_JOB_ID"),
            mpi="PMIX_RANK" in env or "PMI_FD" in env or "PMI_RANK" in env,
        )


class BatchStep(Launcher):
    """The batch script of an sbatch job: the job's view before any srun; it is rank 0."""

    name = "batch"
    description = "the batch step of sbatch (SLURM_JOB_ID and SLURMD_NODENAME, no SLURM_STEP_ID)"

    @classmethod
    def detect(cls, env: Mapping[str, str]) -> bool:
        return "SLURM_JOB_ID" in env and "SLURMD_NODENAME" in env and not SrunStep.detect(env)

    @classmethod
    def resolve(cls, env: Mapping[str, str]) -> Launch:
        layout, components = job_layout(env)
        return Launch(
            launcher=cls.name, world_size=sum(layout[1]), rank=0, nodes=layout[0], counts=layout[1],
            node=env.get("SLURMD_NODENAME"), local_rank=0, distribution="block",
            components=components, job_id=env.get("SLURM_JOB_ID"),
        )


class SallocShell(Launcher):
    """A shell of salloc on the login node: the job's view; the shell itself is no task."""

    name = "salloc"
    description = "an salloc shell (SLURM_JOB_ID set, not on a compute node)"

    @classmethod
    def detect(cls, env: Mapping[str, str]) -> bool:
        return "SLURM_JOB_ID" in env and "SLURMD_NODENAME" not in env and "SLURM_PROCID" not in env

    @classmethod
    def resolve(cls, env: Mapping[str, str]) -> Launch:
        layout, components = job_layout(env)
        return Launch(
            launcher=cls.name, world_size=sum(layout[1]), rank=None, nodes=layout[0], counts=layout[1],
            distribution="block", components=components, job_id=env.get("SLURM_JOB_ID"),
        )
