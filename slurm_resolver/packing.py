"""Packing ranks into TensorFlow jobs, and ports per task.

TensorFlow's semantics: job names are taken in sorted order (``chief``, ``evaluator``,
``ps``, ``worker``) and fill consecutive ranks; the counts must add up to the number of
tasks. A list of names instead maps one job onto each heterogeneous-job component.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import chain, repeat

from .errors import ConfigurationError, ResolutionError

__all__ = ["runs", "assign", "local_indices", "check_port_base"]


def runs(
    jobs: Mapping[str, int] | Sequence[str] | None,
    world_size: int,
    components: Sequence[int] = (),
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
                f"jobs={names} names {len(names)} het components, but the job has "
                f"{len(components) or 'no'} components",
                "give one name per component of `srun ... : ...`, or counts like {'ps': 1, 'worker': 3}",
            )
        return tuple(zip(names, components))
    for name, count in jobs.items():
        if not isinstance(name, str) or not name or isinstance(count, bool) \
                or not isinstance(count, int) or count < 0:
            raise ConfigurationError(f"jobs entry {name!r}: {count!r} must map a name to a count >= 0")
    requested = sum(jobs.values())
    if requested != world_size:
        raise ResolutionError(
            f"jobs {dict(jobs)} ask for {requested} tasks, but the job has {world_size}",
            f"make the counts add up to {world_size}, or change the number of tasks (srun -n)",
        )
    return tuple((name, jobs[name]) for name in sorted(jobs))


def assign(job_runs: Sequence[tuple[str, int]]) -> tuple[list[str], list[int]]:
    """Job name and task index of every rank, from :func:`runs`.

    >>> assign([("ps", 1), ("worker", 2), ("ps", 1)])
    (['ps', 'worker', 'worker', 'ps'], [0, 0, 1, 1])
    """
    names = list(chain.from_iterable(repeat(name, count) for name, count in job_runs))
    indices: list[int] = []
    offset: dict[str, int] = {}
    for name, count in job_runs:
        first = offset.get(name, 0)
        indices.extend(range(first, first + count))
        offset[name] = first + count
    return names, indices


def local_indices(hosts: Sequence[str]) -> list[int]:
    """The index of each rank among the ranks on its host, in rank order.

    >>> local_indices(["a", "b", "a"])
    [0, 0, 1]
    """
    seen: dict[str, int] = {}
    result = []
    for host in hosts:
        index = seen.get(host, 0)
        result.append(index)
        seen[host] = index + 1
    return result


def check_port_base(port_base: int, most_per_node: int) -> None:
    """Fail unless ``port_base`` .. ``port_base + most_per_node - 1`` are TCP ports."""
    if isinstance(port_base, bool) or not isinstance(port_base, int) or not 0 < port_base < 65536:
        raise ConfigurationError(f"port_base={port_base!r} is not a TCP port", "choose 1024..65535")
    if port_base + most_per_node - 1 > 65535:
        raise ConfigurationError(f"port_base={port_base} plus {most_per_node} tasks per node passes 65535",
                                 "choose a lower port_base")
