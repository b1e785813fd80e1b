"""How every training job's task starts: its layout from ``--jobs``, then the bootstrap."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from ..errors import SlurmResolverError
from ..rpc.bootstrapped import Bootstrapped

__all__: list[str] = []  # internal: no public names (docs/reference.md)


def start_task(program: str, jobs: str | None, timeout: float,
               check: Callable[[dict[str, int] | list[str] | None], None] | None = None,
               needs: str | None = None, **resolver_options: Any) -> Bootstrapped | None:
    """This task, bootstrapped with the job layout ``jobs`` (``ps=1,worker=3``; None: all workers).

    ``check`` may refuse the parsed layout (raising a `SlurmResolverError`); ``needs``
    names the framework the program imports (``'tensorflow'``, ``'torch'``, ``'jax'``: the
    module and the extra that installs it), checked first; the options go to
    ``SlurmClusterResolver``. Returns None after printing
    ``<program>: error: ...`` where the task cannot start.
    """
    from ..optional import import_optional
    from ..parsing import parse_jobs
    from ..resolvers.slurm import SlurmClusterResolver
    from ..rpc.bootstrap import bootstrap

    try:
        if needs is not None:
            import_optional(needs, needs, f"The {program} job")
        layout = parse_jobs(jobs, "--jobs") if jobs is not None else None
        if check is not None:
            check(layout)
        return bootstrap(SlurmClusterResolver(jobs=layout, check_port=False, **resolver_options), timeout=timeout)
    except SlurmResolverError as exc:
        print(f"{program}: error: {exc.one_line()}", file=sys.stderr)
        return None
