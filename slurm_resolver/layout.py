"""Pure readers of Slurm's layout variables: node lists, task counts, het components, distribution.

Every launcher plugin reads the layout through these functions, so that no plugin imports
another. Each takes a plain mapping of variables and raises
[`EnvironmentVariableError`][slurm_resolver.errors.EnvironmentVariableError] naming the variable at fault.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import field

from .errors import EnvironmentVariableError, ResolutionError
from .hostlists import expand, expand_counts
from .parsing import optional_int, read_int, require
from .values import PublicValue, fill

__all__ = ["Layout", "Distribution", "Spread", "layout_of", "het_size", "job_layout", "het_components", "het_groups",
           "distribution", "in_srun_step", "step_layout", "STEP_VARIABLES", "launch_key", "gtids", "array_element",
           "host_file", "same_count", "total_tasks"]

Layout = tuple[tuple[str, ...], tuple[int, ...]]
"""Nodes in Slurm's order and the number of tasks on each."""


STEP_VARIABLES = ("SLURM_STEP_ID", "SLURM_STEPID", "SLURM_STEP_NODELIST", "SLURM_STEP_NUM_TASKS",
                  "SLURM_STEP_TASKS_PER_NODE")
"""Variables only an srun step sets: with ``SLURM_PROCID``, any of them makes the process an srun task (a step id
only where it is an srun step's: `step_id`)."""

_MOST_NORMAL_STEP = 0xFFFFFFF0
"""Slurm's ids from here up name its special steps (the batch script 0xfffffffb, the extern step 0xfffffffc, an
interactive step 0xfffffffa): written signed (-5, -4, -6), as Slurm 26.05 writes them into the batch step."""


def step_id(env: Mapping[str, str]) -> str | None:
    """The srun step's id (``SLURM_STEP_ID``, else the older ``SLURM_STEPID``); None outside one, and in a
    special step: Slurm 26.05 sets ``SLURM_STEP_ID=-5`` in the batch step, where earlier Slurms set none.

    >>> step_id({"SLURM_STEP_ID": "3"}), step_id({"SLURM_STEP_ID": "-5", "SLURM_STEPID": "-5"}), step_id({})
    ('3', None, None)
    """
    step = env.get("SLURM_STEP_ID") or env.get("SLURM_STEPID")
    if step is None:
        return None
    try:
        special = not 0 <= int(step) < _MOST_NORMAL_STEP
    except ValueError:
        return step  # malformed: the launcher that reads it names it
    return None if special else step


def same_count(counts: tuple[int, ...]) -> int:
    """The tasks of every node where all nodes have as many (a pass of identity tests over the tuple, as
    ``expand_counts`` shares one number for ``4(x4096)``); else 0.

    >>> same_count((4,) * 4096), same_count((3, 1)), same_count(())
    (4, 0, 0)
    """
    return counts[0] if counts and counts.count(counts[0]) == len(counts) else 0


def total_tasks(counts: tuple[int, ...], same: int | None = None) -> int:
    """The tasks of a layout's counts: one product where every node has as many (`same_count`, or ``same``
    where the caller has it already), else their sum.

    >>> total_tasks((4,) * 4096), total_tasks((3, 1)), total_tasks(())
    (16384, 4, 0)
    """
    same = same_count(counts) if same is None else same
    return same * len(counts) if same else sum(counts)


def in_srun_step(env: Mapping[str, str]) -> bool:
    """Whether ``env`` is a task of an srun step: ``SLURM_PROCID`` and a step variable are set (an srun
    step's id, or the step's layout alone, as TensorFlow's tests give it); the batch step is none, even
    where Slurm 26.05 gives it a (special) step id.

    >>> in_srun_step({"SLURM_PROCID": "1", "SLURM_STEP_NODELIST": "a,b"}), in_srun_step({"SLURM_PROCID": "0"})
    (True, False)
    >>> in_srun_step({"SLURM_PROCID": "0", "SLURM_STEP_ID": "-5", "SLURM_STEPID": "-5"})
    False
    """
    layout = (name for name in STEP_VARIABLES if name not in ("SLURM_STEP_ID", "SLURM_STEPID"))
    return "SLURM_PROCID" in env and (step_id(env) is not None or any(name in env for name in layout))


def step_layout(env: Mapping[str, str]) -> tuple[Layout, tuple[str, ...]]:
    """The step's nodes and tasks on each, and the variables missing to tell them. Without
    ``SLURM_STEP_TASKS_PER_NODE`` the counts are still certain for one node or as many tasks as nodes
    (srun starts a task on each of its nodes); else they are zeros and that variable is missing
    (without ``SLURM_STEP_NODELIST``, both are).

    >>> step_layout({"SLURM_STEP_NODELIST": "a,b,c", "SLURM_STEP_NUM_TASKS": "3"})
    ((('a', 'b', 'c'), (1, 1, 1)), ())
    >>> step_layout({"SLURM_STEP_NODELIST": "a,b", "SLURM_STEP_NUM_TASKS": "3"})[1]
    ('SLURM_STEP_TASKS_PER_NODE',)
    """
    if "SLURM_STEP_NODELIST" not in env:
        return ((), ()), ("SLURM_STEP_NODELIST",)
    if "SLURM_STEP_TASKS_PER_NODE" in env:
        return layout_of(env, "SLURM_STEP_NODELIST", "SLURM_STEP_TASKS_PER_NODE"), ()
    nodes = expand(env["SLURM_STEP_NODELIST"], "SLURM_STEP_NODELIST")
    world = optional_int(env, "SLURM_STEP_NUM_TASKS", 1)
    if world is not None and (world == len(nodes) or len(nodes) == 1):
        return (nodes, (world // len(nodes),) * len(nodes)), ()
    return (nodes, (0,) * len(nodes)), ("SLURM_STEP_TASKS_PER_NODE",)


def launch_key(env: Mapping[str, str]) -> str:
    """What names one launch: the same in all its tasks, different in any other launch.

    >>> launch_key({"SLURM_JOB_ID": "12", "SLURM_STEP_ID": "0"})
    '12.0'
    >>> launch_key({})
    'local'
    """
    parts = [env.get("SLURM_JOB_ID", ""), step_id(env) or "", env.get("PMIX_NAMESPACE", ""),
             env.get("OMPI_MCA_ess_base_jobid", "")]
    return ".".join(p for p in parts if p) or "local"


def _group(env: Mapping[str, str], name: str, index: int) -> tuple[str, str] | None:
    for key in (f"{name}_HET_GROUP_{index}", f"{name}_PACK_GROUP_{index}"):
        if key in env:
            return key, env[key]
    return None


def layout_of(env: Mapping[str, str], nodes_var: str, counts_var: str) -> Layout:
    """Nodes and their task counts, from a host list and a compressed count list.

    >>> layout_of({"N": "n[1-2]", "C": "2(x2)"}, "N", "C")
    (('n1', 'n2'), (2, 2))
    """
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
    return tuple(sum(layout[1][p] for p in group) for group in het_groups(env, layout))


def het_groups(env: Mapping[str, str], layout: Layout) -> tuple[tuple[int, ...], ...]:
    """The positions in a step's node list of each het component's nodes; () for an ordinary step.

    >>> het_groups({"SLURM_HET_SIZE": "2", "SLURM_JOB_NODELIST_HET_GROUP_0": "n[1-2]",
    ...             "SLURM_JOB_NODELIST_HET_GROUP_1": "n3"}, (("n1", "n2", "n3"), (3, 1, 2)))
    ((0, 1), (2,))
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
    groups: list[list[int]] = [[] for _ in range(size)]
    for position, node in enumerate(layout[0]):
        if node not in owner:
            raise ResolutionError(f"step node {node} belongs to no het component",
                                  "check SLURM_JOB_NODELIST_HET_GROUP_<n>")
        groups[owner[node]].append(position)
    return tuple(map(tuple, groups))


class Spread(enum.Enum):
    """How Slurm spreads a step's tasks over its nodes (``srun -m``)."""

    BLOCK = "block"
    CYCLIC = "cyclic"
    PLANE = "plane"
    ARBITRARY = "arbitrary"
    """In the order of a host file (``SLURM_HOSTFILE``): only that list tells."""
    UNKNOWN = "unknown"
    """Placed by an MPI launcher its own way, or a word this package does not know."""


class Distribution(PublicValue):
    """Slurm's distribution across nodes, parsed once: how it spreads, and a plane's size.

    >>> Distribution.parse("plane=2"), str(Distribution.parse("cyclic")), Distribution.parse("pack").computed
    (Distribution(spread=<Spread.PLANE: 'plane'>, plane=2), 'cyclic', False)
    """

    spread: Spread
    plane: int = 0
    """Tasks per block of a plane distribution."""
    word: str = field(default="", compare=False, repr=False)
    """How Slurm named an unknown distribution (for messages)."""

    def __init__(self, spread: Spread, plane: int = 0, word: str = "") -> None:
        fill(self, spread, plane, word)

    @classmethod
    def parse(cls, word: str) -> Distribution:
        """``block``, ``cyclic``, ``plane=N`` or ``arbitrary``; anything else is `Spread.UNKNOWN`."""
        if word.startswith("plane="):
            return cls(Spread.PLANE, int(word.partition("=")[2]))
        try:
            return cls(Spread(word)) if word != "plane" else cls(Spread.UNKNOWN, word=word)
        except ValueError:
            return cls(Spread.UNKNOWN, word=word)

    @property
    def computed(self) -> bool:
        """Whether every task computes the placement from the layout (block, cyclic, plane)."""
        return self.spread in (Spread.BLOCK, Spread.CYCLIC, Spread.PLANE)

    def __str__(self) -> str:
        if self.spread is Spread.PLANE:
            return f"plane={self.plane}"
        return self.word or self.spread.value


BLOCK = Distribution(Spread.BLOCK)
"""Slurm's default distribution."""


def distribution(env: Mapping[str, str]) -> Distribution:
    """Slurm's distribution across nodes: ``block`` (the default), ``cyclic``, ``plane=N``...

    >>> str(distribution({"SLURM_DISTRIBUTION": "cyclic:block"}))
    'cyclic'
    >>> distribution({"SLURM_DISTRIBUTION": "plane", "SLURM_DIST_PLANESIZE": "2"})
    Distribution(spread=<Spread.PLANE: 'plane'>, plane=2)
    """
    text = (env.get("SLURM_DISTRIBUTION") or "block").strip()
    first = text.replace(",", ":").split(":")[0].strip().lower() or "block"
    if first.startswith("plane"):
        size = first.partition("=")[2] or env.get("SLURM_DIST_PLANESIZE", "")
        if not (size.isascii() and size.isdigit()) or len(size) > 6 or int(size) < 1:
            raise EnvironmentVariableError("SLURM_DIST_PLANESIZE", env.get("SLURM_DIST_PLANESIZE"),
                                           "the plane size (a whole number >= 1) of -m plane=N")
        return Distribution(Spread.PLANE, int(size))
    return Distribution.parse(first)


def gtids(env: Mapping[str, str]) -> tuple[int, ...]:
    """The global task ids Slurm started on this task's node (``SLURM_GTIDS``); () when unset.

    >>> gtids({"SLURM_GTIDS": "0,2,3"})
    (0, 2, 3)
    """
    text = env.get("SLURM_GTIDS")
    if text is None:
        return ()
    parts = text.split(",")
    if not all(p.strip().isascii() and p.strip().isdigit() and len(p.strip()) <= 9 for p in parts):
        raise EnvironmentVariableError("SLURM_GTIDS", text, "the task ids of this node, such as 0,2,3")
    return tuple(int(p) for p in parts)


def array_element(env: Mapping[str, str]) -> str | None:
    """``<array job id>_<task id>`` for an element of a job array; None otherwise.

    >>> array_element({"SLURM_ARRAY_JOB_ID": "40", "SLURM_ARRAY_TASK_ID": "3", "SLURM_JOB_ID": "43"})
    '40_3'
    """
    if env.get("SLURM_ARRAY_JOB_ID") is None or env.get("SLURM_ARRAY_TASK_ID") is None:
        return None
    return f"{read_int(env, 'SLURM_ARRAY_JOB_ID', 1)}_{read_int(env, 'SLURM_ARRAY_TASK_ID')}"


_HOST = r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}"  # compiled where a host file is read
_HOST_FILE = ("node names, one or more per line (name, or name*count for count ranks in a row; commas between; "
              "# starts a comment)")
_HOST_FILE_FIX = "write one node name for each rank, in rank order, such as node2, node1, node2 on three lines"


def host_file(text: str, tasks: int, path: str = "") -> tuple[str, ...]:
    """The node of each of ``tasks`` ranks, from the text of ``srun -m arbitrary``'s host file
    (``SLURM_HOSTFILE``, at ``path``), read as Slurm reads it: names on lines or between commas,
    ``name*count`` for ``count`` ranks in a row, ``#`` to the end of a line a comment (``\\#`` a
    ``#``), blank lines skipped, names past the ``tasks``-th ignored.

    >>> host_file("node2\\nnode1  # the second rank\\n\\nnode2\\n", 3)
    ('node2', 'node1', 'node2')
    >>> host_file("n1*2,n3\\nn9", 3)
    ('n1', 'n1', 'n3')
    """
    hosts: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        line = re.split(r"(?<!\\)#", line, maxsplit=1)[0].replace("\\#", "#").strip()
        for entry in filter(None, (part.strip() for part in line.split(","))):
            name, star, count = entry.partition("*")
            times = int(count) if star and count.isascii() and count.isdigit() and 0 < int(count) < 10**9 else 0
            if not re.fullmatch(_HOST, name) or (star and not times):
                raise EnvironmentVariableError(
                    "SLURM_HOSTFILE", path, f"{_HOST_FILE}; line {number} has {entry[:80]!r}"
                    + (" (a range: Slurm reads no ranges here)" if "[" in entry else ""), _HOST_FILE_FIX)
            hosts.extend([name] * min(times or 1, tasks - len(hosts)))
            if len(hosts) == tasks:
                return tuple(hosts)
    raise EnvironmentVariableError("SLURM_HOSTFILE", path, f"a node for each of the step's {tasks} ranks; it names "
                                   f"{len(hosts)}", _HOST_FILE_FIX)
