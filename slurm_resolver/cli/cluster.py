"""The commands about the job's cluster: ``show``, ``check``, ``env`` and ``bootstrap``.

Each reaches the library through one small function: ``resolved`` for the resolved
cluster, ``bootstrapped`` for the bootstrapped one, ``run_checks`` for the diagnosis.
Which task prints what is ``per_job``'s to say.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

from .per_job import speaks_for_job, task_label, task_rank

if TYPE_CHECKING:  # pragma: no cover
    from ..cluster import Cluster
    from ..rpc.bootstrapped import Bootstrapped

__all__: list[str] = []  # internal: no public names (docs/reference.md)


def _jobs(args: argparse.Namespace) -> dict[str, int] | list[str] | None:
    from ..parsing import parse_jobs

    return parse_jobs(args.jobs, "--jobs") if args.jobs else None


@contextlib.contextmanager
def _as_typed(args: argparse.Namespace) -> Iterator[None]:
    """Jobs that do not fit the step are named as the user gave them: ``--jobs`` or SLURM_RESOLVER_JOBS."""
    from ..packing import JobCountError

    try:
        yield
    except JobCountError as exc:
        raise exc.given("--jobs" if args.jobs else "SLURM_RESOLVER_JOBS") from None


def _fresh() -> dict[str, str]:
    """This process's environment, less what ``slurm-resolver env`` wrote in the batch step and srun passed
    on to this task (``written_in_batch_step``); bootstrap's refusal of those variables names their cause."""
    from ..environment import snapshot
    from ..launchers.below import written_in_batch_step

    env = dict(snapshot())
    for name in written_in_batch_step(env):
        del env[name]
    return env


def resolved(args: argparse.Namespace) -> Cluster:
    """The cluster resolved from this process's environment with the command's options, every rank
    placed (a layout only the step's tasks can tell is learned from them)."""
    from ..resolution import resolve

    with _as_typed(args):
        cluster = resolve(_fresh(), jobs=_jobs(args), port_base=getattr(args, "port_base", None),
                          exchange=getattr(args, "exchange", None))
    if not cluster.placement.exact:
        from ..rpc.learn import learn_layout

        cluster = learn_layout(cluster)
    return cluster


def bootstrapped(args: argparse.Namespace) -> Bootstrapped:
    """This task, bootstrapped with the command's options (every task of the launch calls it; a layout
    to learn is learned in the bootstrap itself)."""
    from ..errors import UnansweredError
    from ..resolution import resolve
    from ..rpc.bootstrap import bootstrap as run_bootstrap
    from ..rpc.options import FIELDS, BootstrapOptions

    given = {f.name: getattr(args, f.name) for f in FIELDS if getattr(args, f.name, None) is not None}
    env = _fresh()
    with _as_typed(args):
        cluster = resolve(env, jobs=_jobs(args))
    try:
        return run_bootstrap(cluster, BootstrapOptions(**given), environ=env)
    except UnansweredError as exc:  # under run: whom it waited for, so that run acts on a lost node at once
        from ..supervise.records import record_unanswered

        record_unanswered(cluster, exc)
        raise


def run(args: argparse.Namespace) -> int:
    """``run``: the step launched in the job's allocation, and again where a task dies."""
    from ..restart import from_arguments

    if not [word for word in args.command if word != "--"]:
        args.command_parser.error("run needs a command: slurm-resolver run -- python train.py")
    return from_arguments(args)


def _ids(ids: tuple[str, ...] | None, count: int) -> str:
    if not count:
        return "-"
    return "unknown" if ids is None else ",".join(ids)  # None: Slurm bound each task its own, seen by it alone


def _headline(cluster: Cluster, all_ranks: bool) -> str:
    me = cluster.me
    if cluster.launch.standalone:
        return (f"no Slurm job or MPI launch found: this is one local process alone, rank 0 of 1 on "
                f"{me.node if me else 'localhost'} (run inside srun, sbatch or salloc to see a job)")
    element = f" (array element {cluster.launch.array})" if cluster.launch.array else ""
    if not cluster.launch.is_task:  # a batch script, an salloc shell: no task runs here
        from ..launchers import outside_of

        step = outside_of(cluster.launcher) or f"{cluster.launcher} shell"
        return (f"launcher {cluster.launcher}{element}: the job's {cluster.world_size} tasks as srun would start "
                f"them; this {step} is none of them (srun ... slurm-resolver show: the tasks' own view)")
    where = f"rank {cluster.rank} of {cluster.world_size}, {me.job}:{me.index} on {me.node} at {me.address}" \
        if me else f"not a task; {cluster.world_size} tasks"
    others = cluster.world_size - 1
    who = f"the other {others} tasks print only their own problems" if others > 1 else \
        "the other task prints only its own problems"
    once = f"; {who} (--all-ranks: every task's table)" if me and cluster.rank == 0 and others and not all_ranks \
        else ""
    return f"launcher {cluster.launcher}{element}: {where}{once}"


def table(cluster: Cluster) -> list[str]:
    """Every task of ``cluster`` as the lines of a table; the calling task's rank is starred. GPUs: how many
    each task has, and their ids where any has some (``unknown`` where Slurm bound a task's own, seen by it alone)."""
    rows: list[tuple[str, ...]] = [("rank", "job", "index", "node", "address", "gpus", "gpu_ids")]
    mine = cluster.rank if cluster.launch.is_task or cluster.launch.standalone else None  # a batch step: none
    for rank in range(cluster.world_size):
        t, count = cluster.task(rank), cluster.gpu_count(rank)
        rows.append((str(rank) + ("*" if rank == mine else ""), t.job, str(t.index), t.node,
                     t.address, str(count) if count else "-", _ids(t.gpus, count)))
    if all(row[-1] == "-" for row in rows[1:]):  # no GPU anywhere: no ids to show
        rows = [row[:-1] for row in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]


def show(args: argparse.Namespace) -> int:
    """``show``: the task and the cluster, printed once for the job (rank 0), or by every task."""
    if args.bootstrapped:
        return _show_bootstrapped(args.all_ranks)
    from ..diagnostics import own_row

    cluster = resolved(args)
    problems = own_row(cluster)
    for problem in problems:
        print(f"slurm-resolver: {task_label()}disagrees: {problem}", file=sys.stderr)
    if not speaks_for_job(cluster.rank, args.all_ranks):
        return 1 if problems else 0
    if args.json:
        print(json.dumps(cluster.describe(), sort_keys=True))
    else:
        print("\n".join([_headline(cluster, args.all_ranks), *table(cluster)]))
    return 1 if problems else 0


def _show_bootstrapped(all_ranks: bool) -> int:
    from ..environment import snapshot
    from ..errors import ConfigurationError

    task = snapshot().get("SLURM_RESOLVER_TASK")
    if task is None:
        raise ConfigurationError("SLURM_RESOLVER_TASK is not set: this process was not started by "
                                 "`slurm-resolver bootstrap`", "run it as: slurm-resolver bootstrap -- COMMAND")
    if speaks_for_job(json.loads(task).get("rank"), all_ranks):  # every task verified the same table
        print(task)
    return 0


def check(args: argparse.Namespace) -> int:
    """``check``: rank 0's checks, and every other task's failures, one line each (or JSON)."""
    from ..diagnostics import Level, run_checks

    rank = task_rank()
    whole = speaks_for_job(rank, args.all_ranks)
    results = run_checks(whole_job=whole)
    failed = [r for r in results if r.level is Level.FAIL]
    shown = results if whole else failed
    label = "" if whole else task_label()
    if args.json and shown:
        worst = max((r.level for r in results), key=[Level.OK, Level.WARN, Level.FAIL].index)
        print(json.dumps({"rank": rank, "level": worst.value, "checks": [r.as_dict() for r in shown]}))
    elif not args.json:
        for result in shown:
            print(result.line(label))
    return 1 if failed else 0


def env(args: argparse.Namespace) -> int:
    """``env``: export lines of the framework's variables, for ``eval`` in each task."""
    from ..adapters import shell
    from ..rpc.bootstrapped import Bootstrapped

    cluster = resolved(args)
    if not cluster.launch.is_task and not cluster.launch.standalone:  # the batch script's footgun
        print(f"slurm-resolver: warning: env describes the {cluster.launcher} step, this one process, not the "
              f"tasks srun starts: every task given these variables would be rank {cluster.rank or 0}. Run it "
              f"inside srun (srun bash -c 'eval \"$(slurm-resolver env --format {args.format})\"; ...'), or "
              f"launch with: srun slurm-resolver bootstrap --format {args.format} -- COMMAND", file=sys.stderr)
    print(shell(_variables_for(Bootstrapped.from_cluster(cluster), args.format)), end="")
    return 0


def _variables_for(b: Bootstrapped, fmt: str) -> dict[str, str]:
    from .. import adapters

    variables = dict(adapters.FORMATS[fmt](b))
    if fmt != "shell":
        variables["SLURM_RESOLVER_TASK"] = adapters.shell_env(b)["SLURM_RESOLVER_TASK"]
    return variables


def bootstrap(args: argparse.Namespace) -> int:
    """``bootstrap``: bootstrap, export the variables, then run the command in this task's place."""
    import os

    from ..adapters import apply
    from ..mpi import finalize

    b = bootstrapped(args)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    variables = _exports(b, args.format, command)
    if not args.overwrite:
        _refuse_leftovers(variables)
    apply(variables, overwrite=args.overwrite)
    if not command:
        if speaks_for_job(b.rank, args.all_ranks):  # every task verified the same table
            print(json.dumps(b.describe(), sort_keys=True))
        b.stop()
        finalize()
        return 0
    if not b.cluster.launch.mpi_launched and not args.exec:
        from ..supervise import supervise

        return supervise(b, command)  # the step watches for deaths while the command runs
    sys.stdout.flush()
    b.stop()  # every task has verified the cluster; the command takes this task's place
    finalize()  # an MPI launcher expects MPI_Finalize from a process that initialised MPI
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        from ..environment import for_child
        from ..supervise.command import cannot_run

        raise cannot_run(command, exc, for_child({})) from None
    return 0  # pragma: no cover


def _exports(b: Bootstrapped, fmt: str, command: list[str]) -> dict[str, str]:
    """The variables ``bootstrap`` exports in ``fmt``; ``auto``: the format of the framework ``command``'s script
    imports (`slurm_resolver.frameworks`), less what a launcher below srun set already (torchrun's
    ``MASTER_ADDR``...), and where that framework's variables cannot serve it (JAX's own detection would take
    another count), the shell's, said once for the job."""
    import logging
    import os

    from ..errors import ConfigurationError
    from ..frameworks import format_for

    if fmt != "auto":
        return _variables_for(b, fmt)
    told, why = format_for(command) if command else ("shell", "no command")
    log = logging.getLogger("slurm_resolver")
    log.debug("--format %s: %s", told, why)
    try:
        variables = _variables_for(b, told)
        if b.cluster.launch.below is not None:  # torchrun set its workers' own (MASTER_ADDR...): they stay
            variables = {k: v for k, v in variables.items() if k not in os.environ}
        return variables
    except ConfigurationError as exc:
        if exc.said_by(b.rank):
            log.warning("slurm_resolver: %s; exporting the shell's variables (SLURM_RESOLVER_*) instead (hint: %s)",
                        exc.message, exc.hint)
        return _variables_for(b, "shell")


def _refuse_leftovers(variables: dict[str, str]) -> None:
    """Refuse variables this task would export that were set already to other values: named, not shown
    (a value can be a whole cluster's JSON), with where they came from."""
    import os

    from ..errors import ConfigurationError
    from ..speakers import Speaker

    if not any(k in os.environ and os.environ[k] != v for k, v in variables.items()):
        return
    origin = _origin(os.environ.get("SLURM_RESOLVER_TASK", ""))
    found = sorted(k for k, v in variables.items() if k in os.environ and (origin or os.environ[k] != v))
    named = ", ".join(found[:6]) + (f" and {len(found) - 6} more" if len(found) > 6 else "")
    raise ConfigurationError(  # passed on alike to every task (their SLURM_RESOLVER_TASK differs from each): said once
        f"refusing to replace {named}, set before this task started{origin}",
        "remove `eval \"$(slurm-resolver env ...)\"` from the batch script (bootstrap exports them in every task), "
        "unset them, or pass --overwrite" if origin else "unset them before srun, or pass --overwrite",
        speaker=Speaker.FIRST if origin else Speaker.TASK)


def _origin(task: str) -> str:
    """Where leftover variables came from, as the ``SLURM_RESOLVER_TASK`` among them tells.

    >>> _origin('{"launcher": "batch", "rank": 0, "world_size": 4}')[:64]
    ': `slurm-resolver env` wrote them in the batch step (rank 0 of 4'
    >>> _origin("")
    ''
    """
    try:
        seen = json.loads(task)
        launcher, rank, size = str(seen["launcher"])[:16], int(seen["rank"]), int(seen["world_size"])
    except (ValueError, KeyError, TypeError):
        return ""
    from ..launchers import outside_of

    outside = outside_of(launcher)
    if outside:
        return (f": `slurm-resolver env` wrote them in the {launcher} step (rank {rank} of {size}, as the "
                f"{outside} saw it), and srun passed them on")
    return f": slurm_resolver wrote them for rank {rank} of {size} of another launch ({launcher}), passed on here"
