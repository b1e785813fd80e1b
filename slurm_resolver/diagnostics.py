"""``slurm-resolver check``: diagnose the current environment, one line per check.

Each check is a [Check][slurm_resolver.diagnostics.Check] at one of three
[levels][slurm_resolver.diagnostics.Level]: OK, WARN (worth knowing, and no failure: the job
can run) or FAIL (the job cannot run as it is). Unlike resolution, the node-name check of a
whole job looks up every node of the job: it is a diagnosis, not the start-up path.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import addresses, gpus, launchers
from .environment import snapshot
from .errors import SlurmResolverError
from .launchers.below import from_batch_step, written_in_batch_step

if TYPE_CHECKING:  # pragma: no cover
    from .cluster import Cluster

__all__ = ["Level", "Check", "run_checks", "own_row"]


class Level(enum.Enum):
    """How a check went: ``OK``; ``WARN``, worth knowing but no failure (exit 0); ``FAIL`` (exit 1)."""

    OK = "ok"
    WARN = "warn"
    FAIL = "fail"


@dataclass(frozen=True)
class Check:
    """One check: its level, its name, what was found and, unless OK, how to fix it."""

    level: Level
    name: str
    detail: str
    hint: str = ""

    def line(self, who: str = "") -> str:
        """The check as ``check`` prints it, ``who`` (``rank 3: ``) before its name.

        >>> Check(Level.FAIL, "ports", "port 8888 on node1 is in use", "another port_base").line("rank 3: ")
        'FAIL rank 3: ports: port 8888 on node1 is in use (hint: another port_base)'
        """
        hint = f" (hint: {self.hint})" if self.hint and self.level is not Level.OK else ""
        return f"{self.level.name:4} {who}{self.name}: {self.detail}{hint}"

    def as_dict(self) -> dict[str, str]:
        """The check as plain data, for ``check --json``."""
        return {"name": self.name, "level": self.level.value, "detail": self.detail, "hint": self.hint}


def _ok(name: str, detail: str) -> Check:
    return Check(Level.OK, name, detail)


def run_checks(environ: Mapping[str, str] | None = None, whole_job: bool = True) -> list[Check]:
    """Every check of the environment ``environ`` (``os.environ`` by default).

    ``whole_job`` checks what concerns every task (the names of all the job's nodes); without
    it, only what concerns the calling task itself (its own node's name, its row, its port),
    as the tasks other than rank 0 do.
    """
    given = snapshot(environ)
    stale = written_in_batch_step(given)
    env = {k: v for k, v in given.items() if k not in stale}  # the task's own launch, as bootstrap sees it
    results = [_launcher_check(env)]
    if stale:
        results.append(Check(Level.FAIL, "leftovers", from_batch_step(stale),
                             "remove `eval \"$(slurm-resolver env ...)\"` from the batch script and launch with "
                             "srun slurm-resolver bootstrap -- COMMAND, or run env inside srun"))
    seen = sorted(k for k in env if k.startswith(("SLURM_", "OMPI_", "PMI")))
    results.append(_ok("variables", f"{len(seen)} launcher variable{'s' * (len(seen) != 1)} ({', '.join(seen[:6])}"
                                    f"{', ...' if len(seen) > 6 else ''})"))
    try:
        from .resolvers.slurm import SlurmClusterResolver

        resolver = SlurmClusterResolver(environ=env, auto_set_gpu=False, check_port=False, exchange="none")
    except SlurmResolverError as exc:
        return [*results, Check(Level.FAIL, "resolution", exc.message, exc.hint or "")]
    cluster = resolver.cluster
    me = cluster.me
    results.append(_ok("resolution", f"{cluster.world_size} task{'s' * (cluster.world_size != 1)}" +
                       (f"; this is {me.label} at {me.address}" if me else "")))
    disagreements = own_row(cluster)
    if disagreements:
        results.append(Check(Level.FAIL, "own row", "; ".join(disagreements),
                             "every task of the step must see the same Slurm variables: relaunch with srun, "
                             "and set no SLURM_* variable by hand"))
    results.append(_gpus(cluster))
    results.append(_names(list(dict.fromkeys(cluster.nodes)) if whole_job or me is None else [me.node]))
    results.append(_authentication(env))
    if me is not None and cluster.launch.is_task:
        host, _, port = me.address.rpartition(":")
        busy = addresses.port_in_use(host, int(port))
        results.append(Check(Level.FAIL if busy else Level.OK, "ports",
                             f"port {port} on {me.node} is {'in use' if busy else 'free'}",
                             "another job shares the node: choose another port_base, or use "
                             "`slurm-resolver bootstrap`" if busy else ""))
    return results


def _gpus(cluster: Cluster) -> Check:
    """The task's GPUs and the rule that gave them (NVML asked where no variable names any); a warning where
    the node has GPUs that the job did not ask for and that go to no task."""
    try:
        share, detail = cluster.gpu_plan.decision()
    except SlurmResolverError as exc:
        return Check(Level.FAIL, "gpus", exc.message, exc.hint or "")
    if share is gpus.Share.UNASKED:
        return Check(Level.WARN, "gpus", detail, gpus.ASK_SLURM)
    return _ok("gpus", detail)


def _launcher_check(env: Mapping[str, str]) -> Check:
    """The launcher; a warning where there is none (a lone process is rarely what was meant)."""
    launcher = launchers.detect(env)
    try:
        standalone = launcher.resolve(env).standalone
    except SlurmResolverError:
        standalone = False  # the resolution check names the variable
    if standalone:
        return Check(Level.WARN, "launcher", "no Slurm job or MPI launch found: the checks below describe this "
                     "one local process alone", "run it inside a job: srun, sbatch or salloc")
    return _ok("launcher", f"{launcher.name}: {launcher.description}")


def _names(nodes: list[str]) -> Check:
    failing = [n for n in nodes if not addresses.resolves(n)]
    if not failing:
        return _ok("names", f"all {len(nodes)} node names resolve" if len(nodes) > 1 else f"{nodes[0]} resolves")
    return Check(Level.FAIL, "names", f"{len(failing)} of {len(nodes)} node names do not resolve: "
                 f"{', '.join(failing[:8])}",
                 "add them to DNS or /etc/hosts on every node; meanwhile slurm_resolver uses Slurm's "
                 "NodeAddr (one scontrol call), if slurm.conf sets it")


def own_row(cluster: Cluster) -> list[str]:
    """Where the calling task's row of ``cluster`` disagrees with what its launcher told it alone.

    Resolution already checks the task's node (``SLURMD_NODENAME``); here: its local rank
    (``SLURM_LOCALID``), its node's place in the step (``SLURM_NODEID``, but in a het step) and the ranks on its
    node (``SLURM_GTIDS``). Every task computes the whole table from the step's variables,
    which Slurm gives every task alike, so when each task finds its own row right, the one
    table is right for all: no task needs to send anything to know that it agrees.
    """
    launch, me = cluster.launch, cluster.me
    if me is None:
        return []
    found = []
    if launch.local_rank is not None and launch.local_rank != me.local_rank:
        found.append(f"rank {me.rank} is local rank {me.local_rank} in the table, but {launch.local_rank} "
                     "for its launcher (SLURM_LOCALID)")
    if launch.node_index is not None and not launch.groups and launch.node_index < len(launch.nodes) \
            and launch.nodes[launch.node_index] != me.node:  # a het step numbers its nodes by component
        found.append(f"rank {me.rank} runs on {me.node} in the table, but its launcher puts it on "
                     f"{launch.nodes[launch.node_index]} (SLURM_NODEID={launch.node_index})")
    ranks = tuple(sorted(cluster.local_group(me.rank)[1]))
    if launch.gtids and tuple(sorted(launch.gtids)) != ranks:
        found.append(f"the table puts ranks {','.join(map(str, ranks))} on {me.node}, but Slurm started "
                     f"{','.join(map(str, sorted(launch.gtids)))} there (SLURM_GTIDS)")
    return found


def _authentication(env: Mapping[str, str]) -> Check:
    """How the bootstrap's tasks would prove they belong to the job: a secret, MUNGE, or nothing (a
    warning); a secret that cannot be used fails."""
    from .errors import ConfigurationError
    from .rpc.trust.choice import authority
    from .rpc.trust.seals import AuthMode

    try:
        found = authority(None, env, "check")
    except ConfigurationError as exc:
        return Check(Level.FAIL, "auth", exc.message, exc.hint or "")
    if found.mode is AuthMode.NONE:
        return Check(Level.WARN, "auth", f"the bootstrap is not authenticated: {found.how}",
                     "any local user who can reach the tasks' ports can join or disturb it: give the job a secret "
                     "(export SLURM_RESOLVER_SECRET=$(openssl rand -hex 24) in its script; the templates do), or "
                     "run munged (every Slurm cluster has it)")
    return _ok("auth", f"tasks prove they belong to the job: {found.how}")
