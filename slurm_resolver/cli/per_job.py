"""One answer per job: which task of a launch prints what.

``show``, ``check`` and ``bootstrap`` run in every task of a launch (``srun -n256
slurm-resolver show``). Rank 0, or the one process that is no task of a step (a batch
script, an salloc shell, a lone process), prints the whole answer; every other task
prints only its own problems, each line prefixed with ``rank N:``, and exits 1 for them.
``--all-ranks`` makes every task print its whole answer, as it would alone.

How a silent task knows that it agrees, without sending anything: every task computes the
whole table from the step's variables, which Slurm gives every task alike, and checks its
own row against what its launcher told it alone (its node, ``SLURM_LOCALID``,
``SLURM_NODEID``, ``SLURM_GTIDS``: ``own_row``). When
every task finds its own row right, the one table rank 0 prints is every task's. After a
bootstrap (``show --bootstrapped``, ``bootstrap`` without a command) every task has
verified the same table already.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__: list[str] = []  # internal: no public names (docs/reference.md)


def speaks_for_job(rank: int | None, all_ranks: bool) -> bool:
    """Whether the task of ``rank`` (None: no task of a step) prints the whole answer.

    >>> [speaks_for_job(r, False) for r in (None, 0, 1)], speaks_for_job(1, True)
    ([True, True, False], True)
    """
    return all_ranks or not rank


def task_rank(environ: Mapping[str, str] | None = None) -> int | None:
    """The calling process's rank as its launcher says (None: no task of a step), without resolving the cluster.

    Where the launcher's variables are malformed, ``SLURM_PROCID`` if it is a number: the task
    still says which it is when it reports the error.

    >>> task_rank({"SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0", "SLURM_PROCID": "3", "SLURM_STEP_NUM_TASKS": "x"})
    3
    """
    from .. import launchers
    from ..environment import snapshot
    from ..errors import SlurmResolverError

    env = snapshot(environ)
    try:
        launch = launchers.launch_of(env)
    except SlurmResolverError:
        procid = env.get("SLURM_PROCID", "")
        return int(procid) if procid.isdigit() else None
    return launch.rank if launch.is_task and (launch.world_size or 0) != 1 else None


def task_label(environ: Mapping[str, str] | None = None, with_node: bool = False) -> str:
    """``rank N: `` (``rank N node:`` ``with_node``) for a task of a launch of several tasks, to begin
    its lines with; else ``''``.

    >>> task_label({"SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0", "SLURM_PROCID": "3"})
    'rank 3: '
    >>> task_label({"SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0", "SLURM_PROCID": "3", "SLURMD_NODENAME": "n2"}, True)
    'rank 3 n2: '
    >>> task_label({})
    ''
    """
    from ..environment import snapshot

    env = snapshot(environ)
    rank = task_rank(env)
    if rank is None:
        return ""
    if not with_node:
        return f"rank {rank}: "
    import socket

    return f"rank {rank} {env.get('SLURMD_NODENAME') or socket.gethostname().split('.')[0]}: "
