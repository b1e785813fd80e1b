"""How every training job's task starts: its layout from ``--jobs``, then the bootstrap."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping

from ..errors import SlurmResolverError
from ..rpc.bootstrapped import Bootstrapped

__all__: list[str] = []  # internal: no public names (docs/reference.md)


def start_task(program: str, jobs: str | None, timeout: float,
               check: Callable[[dict[str, int] | list[str] | None], None] | None = None,
               needs: str | None = None, own_gpus: bool = True,
               gpus_per_task: int | Mapping[str, int] | None = None) -> Bootstrapped | None:
    """This task, bootstrapped with the job layout ``jobs`` (``ps=1,worker=3``; None: all workers).

    ``check`` may refuse the parsed layout (raising a `SlurmResolverError`); ``needs``
    names the framework the program imports (``'tensorflow'``, ``'torch'``, ``'jax'``: the
    module and the extra that installs it), checked first; ``own_gpus``: set the task's
    ``CUDA_VISIBLE_DEVICES`` to its own GPUs (``gpus_per_task``: as
    [`resolve()`][slurm_resolver.resolution.resolve] takes it). Returns None after printing
    ``<program>: error: ...`` where the task cannot start.
    """
    from ..environment import export
    from ..optional import import_optional
    from ..parsing import parse_jobs
    from ..resolution import resolve
    from ..rpc.bootstrap import bootstrap
    from ..rpc.options import BootstrapOptions

    try:
        if needs is not None:
            import_optional(needs, needs, f"The {program} job")
        layout = parse_jobs(jobs, "--jobs") if jobs is not None else None
        if check is not None:
            check(layout)
        cluster = resolve(jobs=layout, gpus_per_task=gpus_per_task, timeout=timeout)
        if own_gpus:
            export(cluster.device_env(), overwrite=True)
        return bootstrap(cluster, BootstrapOptions(timeout=timeout))
    except SlurmResolverError as exc:
        print(f"{program}: error: {exc.one_line()}", file=sys.stderr)
        return None
