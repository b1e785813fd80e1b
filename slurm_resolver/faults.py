"""A task's failure, typed: why it failed (`Cause`), and what is known of it (`Fault`).

Every decision on a failure is taken on these, never on its words (which are for people): who
says it for the job (`slurm_resolver.speakers`), how a supervised task ends and what it records
(`slurm_resolver.supervise`, `slurm_resolver.outcome`), whether ``slurm-resolver run`` restarts
and whether an attempt failed as the one before (`slurm_resolver.attempts`). The bootstrap carries
a cause and a status on the wire (`slurm_resolver.rpc.messages` reads and writes a cause's name).

>>> fault = Fault(Cause.EXITED, "worker:3 (rank 3) on node2: its command exited with signal 9 (SIGKILL)", -9)
>>> fault.killed, fault.signature, fault.of(3, "node2", 1700000000.0).rank
(True, (<Cause.EXITED: 'exited'>, -9), 3)
"""

from __future__ import annotations

import enum

from .values import PublicValue, fill

__all__ = ["Cause", "Fault"]


class Cause(enum.Enum):
    """Why a task failed, as a type: what decides who speaks for the job, what it says, and whether
    ``run`` restarts (its words are for people). Its value is its name on the wire and in records."""

    EXITED = "exited"
    """Its command exited with a code, or was ended by a signal (the `Fault`'s ``status``: the code, or minus
    the signal's number)."""
    UNSTARTED = "unstarted"
    """Its command could not start (every task runs the same command)."""
    CRASHED = "crashed"
    """Its process died (its call broke), or raised an exception nobody caught."""
    SILENT = "silent"
    """It never answered (missing from a round), or stopped answering (its process stopped, its node lost)."""
    LEFT = "left"
    """It stopped because another task failed (a supervised task stops its command)."""
    REPORTED = "reported"
    """It reported a failure in words (`Bootstrapped.fail`), or the bootstrap failed at it; also what a peer
    or a record of an older version that sent no cause reads as."""
    HUNG = "hung"
    """The job hung (no progress mark advanced, or some stood still while others advanced): the top of
    the tree judged it, said where every task was, and failed the step."""


class Fault(PublicValue):
    """One task's failure: its cause, its words, its exit status where its command exited, and which task
    failed, on which node, when.

    A fault told of several tasks at once (the bootstrap's beats carry one reason for up to eight ranks)
    has no rank until it is recorded for each (`of()`): every fault a task hears of
    (`Bootstrapped.faults()`, ``on_fault``) and every one an outcome records names its task.
    """

    cause: Cause
    words: str
    """What happened, for people (the task's label is in it where it helps: ``worker:3 (rank 3) on node2
    died: ...``)."""
    status: int = 0
    """The command's exit code (a signal: minus its number), where the cause is `Cause.EXITED`; 127 where it
    is `Cause.UNSTARTED`."""
    rank: int | None = None
    """The task that failed; None until the fault is recorded for a task."""
    node: str = ""
    """Its node ('' where not known)."""
    at: float = 0.0
    """When it failed, or was heard of (``time.time()``); 0.0 where not known."""
    oom: bool = False
    """The kernel's OOM killer ended its command (its node's count of OOM kills rose while it ran)."""

    def __init__(self, cause: Cause, words: str, status: int = 0, rank: int | None = None, node: str = "",
                 at: float = 0.0, oom: bool = False) -> None:
        fill(self, cause, words, status, rank, node, at, oom)

    def of(self, rank: int, node: str = "", at: float | None = None) -> Fault:
        """This fault, recorded for the task of ``rank`` (on ``node``, at ``at``; both kept where not given)."""
        # Copied (`_evolve`), not made again through __init__ nor dataclasses.replace (several times dearer): a burst
        # of deaths is recorded once for every task of the job where asked (`Bootstrapped.faults()`, a callback).
        return self._evolve(rank=rank, node=node or self.node, at=self.at if at is None else at)

    @property
    def killed(self) -> bool:
        """Whether a signal ended its command (SIGKILL, SIGSEGV, the kernel's OOM killer): a death, where a
        code is the program's own failure (a task that stops its command for a peer's death has the cause
        `Cause.LEFT`, whatever its signal)."""
        return self.cause is Cause.EXITED and self.status < 0

    @property
    def signature(self) -> tuple[Cause, int]:
        """What the failure is, without its words, its task or its time: its cause and its status. Two tasks,
        or two attempts, failed alike where their signatures are equal."""
        return self.cause, self.status
