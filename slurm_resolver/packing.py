"""Packing ranks into TensorFlow jobs, and ports per task.

TensorFlow's semantics: job names are taken in sorted order (``chief``, ``evaluator``,
``ps``, ``worker``) and fill consecutive ranks; the counts must add up to the number of
tasks. A list of names instead maps one job onto each heterogeneous-job component.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .errors import ConfigurationError, ResolutionError

__all__ = ["assign", "ports"]


def assign(
    jobs: Mapping[str, int] | Sequence[str] | None,
    world_size: int,
    components: Sequence[int] = (),
) -> tuple[tuple[str, int], ...]:
    """``(job name, task index)`` of every rank.

    >>> assign({"worker": 2, "ps": 1}, 3)
    (('ps', 0), ('worker', 0), ('worker', 1))
    >>> assign(["ps", "worker"], 3, components=(1, 2))
    (('ps', 0), ('worker', 0), ('worker', 1))
    """
    if jobs is None:
        return tuple(("worker", i) for i in range(world_size))
    if isinstance(jobs, str):
        raise ConfigurationError(f"jobs={jobs!r} must be a dict of counts or a list of names",
                                 "e.g. jobs={'ps': 1, 'worker': 3}, or ['ps', 'worker'] for a het job")
    if not isinstance(jobs, Mapping):
        names = list(jobs)
        if len(names) != len(components):
            raise ConfigurationError(
                f"jobs={names} names {len(names)} het components, but the job has "
                f"{len(components) or 'no'} components",
                "give one name per component of `srun ... : ...`, or counts like {'ps': 1, 'worker': 3}",
            )
        per_rank = [name for name, count in zip(names, components) for _ in range(count)]
    else:
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
        per_rank = [name for name in sorted(jobs) for _ in range(jobs[name])]
    seen: dict[str, int] = {}
    result = []
    for name in per_rank:
        result.append((name, seen.get(name, 0)))
        seen[name] = seen.get(name, 0) + 1
    return tuple(result)


def ports(hosts: Sequence[str], port_base: int) -> tuple[int, ...]:
    """``port_base`` plus the index of each rank among the ranks on its host.

    >>> ports(["a", "b", "a"], 8888)
    (8888, 8888, 8889)
    """
    if not 0 < port_base < 65536:
        raise ConfigurationError(f"port_base={port_base} is not a TCP port", "choose 1024..65535")
    seen: dict[str, int] = {}
    result = []
    for host in hosts:
        result.append(port_base + seen.get(host, 0))
        seen[host] = seen.get(host, 0) + 1
    if result and max(result) > 65535:
        raise ConfigurationError(f"port_base={port_base} plus {max(seen.values())} tasks per node passes 65535",
                                 "choose a lower port_base")
    return tuple(result)
