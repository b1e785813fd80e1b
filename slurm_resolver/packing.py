"""Packing ranks into TensorFlow jobs, and ports per task.

TensorFlow's semantics: job names are taken in sorted order (``chief``, ``evaluator``,
``ps``, ``worker``) and fill consecutive ranks; the counts must add up to the number of
tasks. A list of names instead maps one job onto each heterogeneous-job component.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cached_property
from itertools import chain, repeat

from .errors import NO_JOB, ConfigurationError, ResolutionError
from .speakers import Speaker
from .values import PublicValue, fill

__all__ = ["Jobs", "Packing", "JobCountError", "runs", "pack", "check_port_base"]

Jobs = Mapping[str, int] | Sequence[str] | None
"""``{'ps': 1, 'worker': 3}``, a name per het component, or None (every task a worker)."""


class Packing(PublicValue, eq=False):
    """Consecutive ranks of each job, as ``(job name, count)`` runs in rank order."""

    runs: tuple[tuple[str, int], ...]

    def __init__(self, runs: tuple[tuple[str, int], ...]) -> None:
        fill(self, runs)

    @property
    def world_size(self) -> int:
        """Number of ranks."""
        return sum(count for _, count in self.runs)

    def job_of(self, rank: int) -> tuple[str, int]:
        """The job name and task index of ``rank``.

        >>> Packing((("ps", 1), ("worker", 2))).job_of(2)
        ('worker', 1)
        """
        if rank < 0:
            raise IndexError(f"rank {rank} is not in a job of {self.world_size} tasks (ranks 0-{self.world_size - 1})")
        first = 0
        seen: dict[str, int] = {}
        for job, count in self.runs:
            if rank < first + count:
                return job, seen.get(job, 0) + rank - first
            seen[job] = seen.get(job, 0) + count
            first += count
        raise IndexError(f"rank {rank} is not in a job of {first} tasks (ranks 0-{first - 1})")

    def rank_of(self, job: str, index: int) -> int | None:
        """The rank of task ``index`` of ``job``; None when there is no such task."""
        first = 0
        seen: dict[str, int] = {}
        for name, count in self.runs:
            start = seen.get(name, 0)
            if name == job and isinstance(index, int) and start <= index < start + count:
                return first + index - start
            seen[name] = start + count
            first += count
        return None

    @cached_property
    def columns(self) -> tuple[tuple[str, ...], tuple[int, ...]]:
        """The job name and the task index of every rank.

        >>> Packing((("ps", 1), ("worker", 2), ("ps", 1))).columns
        (('ps', 'worker', 'worker', 'ps'), (0, 0, 1, 1))
        """
        names = tuple(chain.from_iterable(repeat(name, count) for name, count in self.runs))
        indices: list[int] = []
        offset: dict[str, int] = {}
        for name, count in self.runs:
            first = offset.get(name, 0)
            indices.extend(range(first, first + count))
            offset[name] = first + count
        return names, tuple(indices)

    def grouped(self, column: Sequence[str]) -> dict[str, list[str]]:
        """``column`` (one value per rank) split by job, in task order: a ClusterSpec's shape."""
        grouped: dict[str, list[str]] = {}
        first = 0
        for job, count in self.runs:
            grouped.setdefault(job, []).extend(column[first:first + count])
            first += count
        return grouped


def spelled(jobs: Mapping[str, int], given_as: str = "jobs") -> str:
    """``jobs`` as they were given: the argument ``jobs``, an option (``--jobs``) or a variable.

    >>> spelled({"ps": 1, "worker": 2}), spelled({"ps": 1, "worker": 2}, "--jobs")
    ("jobs={'ps': 1, 'worker': 2}", '--jobs ps=1,worker=2')
    >>> spelled({"ps": 1}, "SLURM_RESOLVER_JOBS")
    'SLURM_RESOLVER_JOBS=ps=1'
    """
    if given_as == "jobs":
        return f"jobs={dict(jobs)}"
    text = ",".join(f"{name}={count}" for name, count in jobs.items())
    return f"{given_as} {text}" if given_as.startswith("-") else f"{given_as}={text}"


def fitted(jobs: Mapping[str, int], world_size: int) -> dict[str, int] | None:
    """``jobs`` with the largest job (the last of equals, in sorted order) resized to fill ``world_size``
    tasks; None where that job would be left with none.

    >>> fitted({"ps": 1, "worker": 2}, 4), fitted({"ps": 4, "worker": 4}, 2)
    ({'ps': 1, 'worker': 3}, None)
    """
    largest = max(sorted(jobs), key=lambda name: jobs[name])
    count = jobs[largest] + world_size - sum(jobs.values())
    return {name: count if name == largest else n for name, n in jobs.items()} if count > 0 else None


class JobCountError(ResolutionError):
    """Jobs whose counts do not add up to the tasks of the launch; every task computes it alike.

    The message spells the jobs as they were given (``given_as``: see `spelled()`) and the
    hint the counts that would fit; ``alone`` says that no job was found at all.
    """

    def __init__(self, jobs: Mapping[str, int], world_size: int, given_as: str = "jobs", alone: bool = False) -> None:
        self.jobs, self.world_size, self.alone = dict(jobs), world_size, alone
        requested = sum(self.jobs.values())
        typed = spelled(self.jobs, given_as)
        if alone:
            super().__init__(f"{NO_JOB}: this is one local process, but {typed} ask for {requested} tasks",
                             f"run it in every task of a job of {requested} (srun -n{requested} ...)",
                             speaker=Speaker.FIRST)
            return
        fit = fitted(self.jobs, world_size)
        fix = f"e.g. {spelled(fit, given_as)} for the job's {world_size} tasks, or" if fit else "or"
        super().__init__(f"{typed} ask for {requested} tasks, but the job has {world_size}",
                         f"{fix} launch {requested} tasks (srun -n{requested})", speaker=Speaker.FIRST)

    def given(self, given_as: str) -> JobCountError:
        """The same error, the jobs spelled as ``given_as`` gave them (an option, a variable)."""
        return JobCountError(self.jobs, self.world_size, given_as, self.alone)


def runs(jobs: Jobs, world_size: int, components: Sequence[int] = (), alone: bool = False
         ) -> tuple[tuple[str, int], ...]:
    """Consecutive ranks of each job, as ``(job name, count)`` runs in rank order.

    >>> runs({"worker": 2, "ps": 1}, 3)
    (('ps', 1), ('worker', 2))
    >>> runs(["ps", "worker"], 3, components=(1, 2))
    (('ps', 1), ('worker', 2))
    """
    if jobs is None:
        return (("worker", world_size),)
    if isinstance(jobs, str):
        raise ConfigurationError(f"jobs={jobs!r} must be a dict of counts or a list of names",
                                 "e.g. jobs={'ps': 1, 'worker': 3}, or ['ps', 'worker'] for a het job")
    if not isinstance(jobs, Mapping):
        names = list(jobs)
        if len(names) != len(components) or not all(isinstance(n, str) and n for n in names):
            raise ConfigurationError(
                f"{NO_JOB}: this is one local process, not the het job of {len(names)} components jobs={names} "
                "names" if alone else f"jobs={names} names {len(names)} het components, but the job has "
                f"{len(components) or 'no'} components",
                "give one name per component of `srun ... : ...`, or counts like {'ps': 1, 'worker': 3}",
            )
        return tuple(zip(names, components))
    for name, count in jobs.items():
        if not isinstance(name, str) or not name or isinstance(count, bool) \
                or not isinstance(count, int) or count < 0:
            raise ConfigurationError(f"jobs entry {name!r}: {count!r} must map a name to a count >= 0")
    if sum(jobs.values()) != world_size:
        raise JobCountError(jobs, world_size, alone=alone)
    return tuple((name, jobs[name]) for name in sorted(jobs))


def pack(jobs: Jobs, world_size: int, components: Sequence[int] = (), alone: bool = False) -> Packing:
    """The [`Packing`][slurm_resolver.packing.Packing] of ``world_size`` ranks into ``jobs`` (see
    [`runs()`][slurm_resolver.packing.runs]); ``alone``: no job was found (one local process)."""
    return Packing(runs(jobs, world_size, components, alone))


def check_port_base(port_base: int, most_per_node: int) -> None:
    """Fail unless ``port_base`` .. ``port_base + most_per_node - 1`` are TCP ports."""
    if isinstance(port_base, bool) or not isinstance(port_base, int) or not 0 < port_base < 65536:
        raise ConfigurationError(f"port_base={port_base!r} is not a TCP port", "choose 1024..65535")
    if port_base + most_per_node - 1 > 65535:
        raise ConfigurationError(f"port_base={port_base} plus {most_per_node} tasks per node passes 65535",
                                 "choose a lower port_base")
