"""How an attempt of ``slurm-resolver run`` ended, and where the next one runs: pure decisions.

`verdict()` reads the outcomes an attempt's tasks recorded (`slurm_resolver.outcome`)
and tells a death (a task killed by a signal, or gone without a word, its node perhaps with
it) from the program's own failure (an exit code: an exception, a bad argument).
`decide()` then restarts on the same nodes, on a spare node in place of a bad one, on
fewer nodes where the program says it can, or ends, within the budget of restarts. A
failure of the program on every task is never restarted, nor the same failure twice (the same
causes and exit statuses: what a failure is, not its words).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Set
from dataclasses import dataclass

from .errors import ConfigurationError, EnvironmentVariableError
from .faults import Cause, Fault
from .hostlists import collapse, collapse_counts
from .layout import het_size, job_layout
from .outcome import Outcome

__all__ = ["Shape", "RestartPolicy", "Kind", "Verdict", "NextAttempt", "verdict", "decide"]

_SHOWN = 3


@dataclass(frozen=True)
class Shape:
    """The job's allocation as ``run`` uses it: its nodes in Slurm's order and tasks per node.

    ``per_node`` is None where the nodes do not all have as many tasks: every attempt then
    runs on the whole allocation, as a plain ``srun`` would.
    """

    nodes: tuple[str, ...]
    counts: tuple[int, ...]

    @property
    def per_node(self) -> int | None:
        """Tasks on every node, where they are the same."""
        return self.counts[0] if len(set(self.counts)) == 1 else None

    @classmethod
    def of(cls, env: Mapping[str, str]) -> Shape:
        """The allocation of the job ``env`` belongs to (its batch script, or an salloc shell).

        >>> Shape.of({"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "n[1-3]", "SLURM_TASKS_PER_NODE": "2(x3)"})
        Shape(nodes=('n1', 'n2', 'n3'), counts=(2, 2, 2))
        """
        if "SLURM_JOB_ID" not in env:
            raise EnvironmentVariableError("SLURM_JOB_ID", None, "the job's id: run inside a job's allocation",
                                           "call slurm-resolver run from an sbatch script (or an salloc shell)")
        if het_size(env):
            raise ConfigurationError("slurm-resolver run does not restart heterogeneous jobs",
                                     "launch a heterogeneous job with srun --het-group=... directly")
        (nodes, counts), _ = job_layout(env)
        return cls(nodes, counts)


@dataclass(frozen=True)
class RestartPolicy:
    """How ``run`` restarts: at most ``restarts`` times; ``spare_nodes`` of the allocation's nodes
    (its last ones) kept for nodes left behind; never on fewer than ``min_nodes`` nodes (default:
    as many as the first attempt)."""

    restarts: int = 3
    spare_nodes: int = 0
    min_nodes: int | None = None

    def first_nodes(self, shape: Shape) -> tuple[str, ...]:
        """The nodes of the first attempt; a request the allocation cannot meet is refused, with the fix.

        >>> RestartPolicy(spare_nodes=1).first_nodes(Shape(("n1", "n2", "n3"), (2, 2, 2)))
        ('n1', 'n2')
        """
        for name, value in (("--restarts", self.restarts), ("--spare-nodes", self.spare_nodes)):
            if not 0 <= value <= 10_000:
                raise ConfigurationError(f"{name} {value} is not a count from 0 to 10000", f"e.g. {name} 1")
        used = len(shape.nodes) - self.spare_nodes
        if used < 1:
            raise ConfigurationError(
                f"--spare-nodes {self.spare_nodes} leaves no node of the job's {len(shape.nodes)} to run on",
                "ask sbatch for the step's nodes plus the spares (the templates' spare_nodes adds them to --nodes)")
        if self.min_nodes is not None and not 1 <= self.min_nodes <= used:
            raise ConfigurationError(f"--min-nodes {self.min_nodes} is not from 1 to the {used} nodes the step "
                                     "starts on", f"e.g. --min-nodes {max(1, used - 1)}")
        if (self.spare_nodes or (self.min_nodes or used) < used) and shape.per_node is None:
            raise ConfigurationError(
                f"the job's nodes have different task counts ({collapse_counts(list(shape.counts))}), so "
                "another node cannot take a lost node's place", "ask sbatch for --ntasks-per-node")
        return shape.nodes[:used]


class Kind(enum.Enum):
    """What ended an attempt."""

    DEATH = "a task died"
    FAILURE = "the program failed on some tasks"
    EVERYWHERE = "the program failed on every task"
    UNEXPLAINED = "the step failed and no task said why"


@dataclass(frozen=True)
class Verdict:
    """How an attempt ended, typed: what ended it, the tasks that died, the program's failures, and when.

    Attributes:
        kind: what ended it.
        reason: one line for the record, for people (nothing is decided on it).
        losses: the tasks that died, each a `Fault` with its node: killed by a signal (`Fault.killed`), or
            heard of as dead and gone without a record of their own (``vanished``).
        failures: the signatures (`Fault.signature`: a cause and a status) of the program's failures: an
            attempt that fails as the one before did (the same signatures) is not restarted.
        at: when the first of its tasks' commands ended, or a death was heard (``time.time()``).
        vanished: the ranks of the losses that recorded nothing (their node may be gone with them).
    """

    kind: Kind
    reason: str
    losses: tuple[Fault, ...] = ()
    failures: frozenset[tuple[Cause, int]] = frozenset()
    at: float | None = None
    vanished: frozenset[int] = frozenset()

    @property
    def gone(self) -> set[str]:
        """The nodes of the tasks that vanished: those whose health decides the next attempt."""
        return {loss.node for loss in self.losses if loss.rank in self.vanished}


def _listed(items: list[str]) -> str:
    more = len(items) - _SHOWN
    return "; ".join(items[:_SHOWN]) + (f"; and {more} more" if more > 0 else "")


def verdict(outcomes: Mapping[int, Outcome], world_size: int, code: int) -> Verdict:
    """How an attempt of ``world_size`` tasks ended, from what they recorded and srun's exit ``code``: on each
    task's cause and status (`Fault`), never on its words."""
    recorded = sorted(outcomes.values(), key=lambda o: o.rank)
    at = min((o.fault.at for o in recorded), default=None)
    heard = {rank: d for o in recorded for d in o.heard if (rank := d.rank) is not None}
    killed = [o for o in recorded if o.fault.killed]
    gone = [d for rank, d in sorted(heard.items()) if rank not in outcomes]
    if killed or gone:
        return Verdict(Kind.DEATH, _listed([f"{o.task}: its command {o.fault.words}" for o in killed]
                                           + [f"{d.words} (its task is gone too)" for d in gone]),
                       (*(o.fault for o in killed), *gone), at=at, vanished=frozenset(heard.keys() - outcomes.keys()))
    failed = [o for o in recorded if o.fault.cause in (Cause.EXITED, Cause.UNSTARTED)]
    if not failed:
        return Verdict(Kind.UNEXPLAINED, f"the step failed (srun exited with {code}) before any task's command "
                       "ended on its own: see the output above (the bootstrap, srun)", at=at)
    failures = frozenset(o.fault.signature for o in failed)
    if len(failed) >= world_size:
        shown = _listed(sorted({o.fault.words for o in failed}))
        return Verdict(Kind.EVERYWHERE, f"every task's command {shown}", failures=failures, at=at)
    return Verdict(Kind.FAILURE, _listed([f"{o.task}: its command {o.fault.words}" for o in failed]),
                   failures=failures, at=at)


@dataclass(frozen=True)
class NextAttempt:
    """Where the next attempt runs (None: there is none), and why, in one line."""

    nodes: tuple[str, ...] | None
    why: str


def _bad_nodes(nodes: tuple[str, ...], ended: Verdict, unhealthy: Mapping[str, str]) -> dict[str, str]:
    """The attempt's nodes to leave behind, with why."""
    bad = {node: why for node, why in unhealthy.items() if node in nodes}
    for loss in ended.losses:
        if loss.oom:
            bad.setdefault(loss.node, "the kernel's OOM killer ended its task")
    return bad


def decide(policy: RestartPolicy, shape: Shape, nodes: tuple[str, ...], number: int, ended: Verdict,
           unhealthy: Mapping[str, str], left_behind: Set[str] = frozenset(), before: Verdict | None = None
           ) -> NextAttempt:
    """Whether attempt ``number`` (on ``nodes``), which ended as ``ended``, is followed by another, and where.

    ``unhealthy`` names the nodes Slurm or a probe found bad (with why); ``left_behind`` the nodes
    earlier attempts left; ``before`` is the previous attempt's verdict.
    """
    if ended.kind is Kind.EVERYWHERE:
        return NextAttempt(None, "not restarted: the program's own error (a restart would fail the same way)")
    if ended.kind is Kind.FAILURE and before is not None and before.kind is Kind.FAILURE \
            and before.failures == ended.failures:  # the same causes and statuses
        return NextAttempt(None, f"not restarted: the same failure as attempt {number - 1}")
    bad = _bad_nodes(nodes, ended, unhealthy)
    if ended.kind is Kind.UNEXPLAINED and not bad:
        return NextAttempt(None, "not restarted: no task died and every node answers")
    left = ", ".join(f"{node} ({why})" for node, why in bad.items())
    if number > policy.restarts:
        return NextAttempt(None, f"restarts exhausted (--restarts {policy.restarts})"
                        + (f"; bad nodes: {left}" if left else ""))
    keep = [n for n in nodes if n not in bad]
    spares = [n for n in shape.nodes if n not in nodes and n not in unhealthy and n not in left_behind]
    chosen = set(keep + spares[:len(nodes) - len(keep)])
    fewest = len(nodes) if policy.min_nodes is None else policy.min_nodes
    if len(chosen) < fewest:
        return NextAttempt(None, f"not restarted: {left} left behind, no spare node is left (--spare-nodes "
                              f"{policy.spare_nodes}) and the program needs {fewest} nodes (--min-nodes)")
    after = tuple(n for n in shape.nodes if n in chosen)
    where = f"restart {number} of {policy.restarts} on {collapse(list(after))}"
    if not bad:
        return NextAttempt(after, where + " (the same nodes)")
    taken = [n for n in after if n not in nodes]
    instead = f", with spare {collapse(taken)}" if taken else f", on {len(after)} of {len(nodes)} nodes"
    return NextAttempt(after, f"{where}: {left} left behind{instead}")
