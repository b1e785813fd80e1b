"""The verified cluster that `bootstrap()` returns.

It answers the questions of TensorFlow's resolvers (``cluster_spec``, ``task_type``,
``master``...) so it can stand where one is expected, keeps this task's server running
for barriers after the bootstrap, and says how long each phase took.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from ..cluster import Cluster
from ..environment import snapshot
from ..errors import ConfigurationError
from ..faults import Cause, Fault
from ..stacks.capture import ThreadStack
from ..stacks.job import JobStacks, nodes_of
from .detection import crashes
from .detection.detector import FailureDetector
from .diagnosis.stacks_call import StacksHandler
from .messages import NAME
from .network.loop import LoopThread
from .rounds.member import Member
from .transport import Served
from .view import ClusterView

if TYPE_CHECKING:
    from ..stacks.command import Marker, Watched  # loaded at the first mark: a task that marks none never needs them

__all__ = ["Bootstrapped", "Coroutines", "Exchanged"]

_FOREVER = 30 * 24 * 3600.0


class Exchanged(str, enum.Enum):
    """How the tasks exchanged their records (equal to its word, as it was before it was a type)."""

    TREE = "tree"
    """Up and down the tree of node leaders."""
    MPI = "mpi"
    """An MPI allgather."""

    def __str__(self) -> str:
        return self.value
T = TypeVar("T")


def _round_name(name: str) -> str:
    if not isinstance(name, str) or not 0 < len(name) <= NAME:
        raise ConfigurationError(f"{name!r} cannot name a barrier, a vote or a notice",
                                 f"use a string of 1 to {NAME} characters")
    return name


class Bootstrapped(ClusterView):
    """The verified cluster: every task's bound and spare port, and this task's running server.

    Attributes:
        cluster: the cluster with the ports the servers bound (`bound_ports`).
        timings: seconds spent in each phase: resolve, grpc (its import), server, exchange
            (verified on the way, in the tree); verify and barrier where servers are checked
            after the table (under MPI, or with ``verify='all'`` or a count).
        exchanged: how the tasks exchanged their records: `Exchanged` (``'tree'`` or ``'mpi'``); None
            where they did not (`from_cluster`).
        authenticated: how tasks proved who they are (a secret, MUNGE), or why they did not
            (``not authenticated: ...``).
        aio: the coroutines of `barrier()`, `vote()`, `wait_for()`,
            `announce()`, `fail()` and `stop()`, for the running event loop
            (`bootstrap_async()`'s).
    """

    _mark = 0
    _marker: Marker | None = None
    _marker_read = False
    _watched: Watched | None = None

    def __init__(self, cluster: Cluster, member: Member | None, served: Served[Any] | None,
                 timings: dict[str, float] | None = None, exchanged: Exchanged | None = None, authenticated: str = "",
                 detector: FailureDetector | None = None, loop: LoopThread | None = None,
                 stacks: StacksHandler | None = None) -> None:
        super().__init__(cluster)
        self.timings = dict(timings or {})
        self.exchanged = exchanged
        self.authenticated = authenticated
        self._member = member
        self._served = served
        self._loop = loop
        self._detector = detector
        self._stacks = stacks
        self.aio = Coroutines(self)

    @classmethod
    def from_cluster(cls, cluster: Cluster) -> Bootstrapped:
        """A view of a resolved (not bootstrapped) cluster: planned ports, no server."""
        if cluster.me is None:
            raise ConfigurationError(f"the {cluster.launcher} step is not a task of the job",
                                     "run this inside srun or mpirun")
        return cls(cluster.with_ports(cluster.ports, cluster.ports), None, None)

    @property
    def server(self) -> Served[Any] | None:
        """This task's running server (its ``port``), until `stop()`."""
        return self._served

    # After the bootstrap: rounds through the same tree.

    def barrier(self, name: str, timeout: float = 60.0) -> None:
        """Return once every task has reached the barrier ``name``, through the tree of leaders.

        The n-th call of a name meets every task's n-th call of it. A task that never
        comes makes every other task's call fail within ``timeout``, naming it.
        """
        self._run(self.aio.barrier(name, timeout))

    def vote(self, name: str, yes: bool, timeout: float = 60.0) -> bool:
        """Whether any task votes yes in the n-th vote called ``name`` (every task must vote)."""
        return self._run(self.aio.vote(name, yes, timeout))

    def wait_for(self, name: str, timeout: float | None = None) -> None:
        """Block until some task calls `announce()` with ``name`` (every task may wait).

        The notice comes down the tree of node leaders: a task waiting here holds one call
        to its node's leader, whatever the size of the job. A leader that dies makes its
        tasks' waits fail, naming it; ``timeout=None`` waits as long as the job runs.
        """
        self._run(self.aio.wait_for(name, timeout))

    def announce(self, name: str, timeout: float = 60.0) -> None:
        """Tell every task in `wait_for()` of ``name`` (e.g. the chief: training is done)."""
        self._run(self.aio.announce(name, timeout))

    def _joined(self) -> Member:
        if self._member is None or self._served is None:
            raise ConfigurationError("this cluster was not made by bootstrap(), or is stopped: it has no server",
                                     "call slurm_resolver.bootstrap() first")
        return self._member

    async def _stop(self, grace: float | None) -> None:
        """End failure detection (this task leaves normally), the server and the links, once."""
        detector, self._detector = self._detector, None
        if detector is not None:
            await detector.leave(1.0 if grace is None else grace)  # this task ends normally: no failure
        served, self._served = self._served, None
        if served is not None:
            await served.stop(grace)
        if self._member is not None:
            await self._member.close()

    async def _fail(self, why: Fault) -> None:
        if self._detector is not None:
            await self._detector.fail(why)

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        if self._loop is None:
            coroutine.close()
            raise ConfigurationError("this cluster has no event loop of its own: await b.aio's coroutines on yours",
                                     "call slurm_resolver.bootstrap() (not bootstrap_async) for blocking calls")
        return self._loop.run(coroutine)

    # Diagnosis.

    def progress(self, step: int | None = None) -> None:
        """Mark this task's progress: ``step`` (a number that grows, such as the training step), else one
        more than the last mark. Cheap (no call: the marks ride the heartbeats); with ``hang_after``, the
        job hangs where no mark advances for that long, or where some tasks' stand still while others'
        advance. Under ``slurm-resolver bootstrap -- COMMAND`` the mark also goes to the task that runs
        this process."""
        mark = (self._mark + 1 if step is None else int(step))
        self._mark = mark
        detector = self._detector
        if detector is not None:
            detector.mark = mark
        if not self._marker_read:  # where its task made it a file: read at the first mark, not at every start
            from ..stacks.command import marker

            self._marker, self._marker_read = marker(snapshot()), True
        if self._marker is not None:
            self._marker.mark(mark)

    def stacks(self, timeout: float = 5.0) -> JobStacks:
        """Every task's Python stacks now, gathered through the tree and merged into classes of identical
        stacks with their ranks (``print()`` it: the rarest first). A task that does not answer within
        ``timeout`` (dead, or holding the GIL in C code) is named as silent."""
        return self._run(self.aio.stacks(timeout))

    def watch_command(self) -> dict[str, str]:
        """This task runs a command (``slurm-resolver bootstrap -- COMMAND``): from now on its progress marks
        are the command's, and its stacks the command's (`slurm_resolver.stacks.command`). Returns what
        the command's environment gets; `stop()` removes the file."""
        from ..stacks.command import Watched, not_marked

        watched = self._watched = Watched()
        if self._detector is not None:
            self._detector.read_mark = watched.mark
        if self._stacks is not None:
            async def take() -> tuple[ThreadStack, ...]:
                found = await asyncio.get_running_loop().run_in_executor(None, watched.stacks)
                return found or not_marked(None)

            self._stacks.take = take
        return watched.environ()

    # Failures.

    def failures(self) -> dict[int, str]:
        """Every task known to have died since the bootstrap, by rank, with why (``{}``: none)."""
        return {rank: fault.words for rank, fault in self.faults().items()}

    def faults(self) -> dict[int, Fault]:
        """Every task known to have died since the bootstrap, by rank: its `Fault` (its cause, words and status,
        its node, when it was heard of)."""
        return dict(self._detector.failed) if self._detector is not None else {}

    def on_failure(self, callback: Callable[[int, str], None]) -> None:
        """Call ``callback(rank, why)`` (on this task's event loop thread) for every task found dead:
        at once for those already known, as they are found for the others."""
        self.on_fault(lambda rank, fault: callback(rank, fault.words))

    def on_fault(self, callback: Callable[[int, Fault], None]) -> None:
        """`on_failure()` with each death's `Fault`: its `Cause` (what to decide on) beside its words, its node,
        and when it was heard of."""
        if self._detector is None:
            raise ConfigurationError("failure detection is off", "bootstrap(heartbeat=1.0) (the default)")
        if self._loop is not None:
            self._loop.loop.call_soon_threadsafe(self._detector.add_callback, callback)
        else:
            self._detector.add_callback(callback)

    def fail(self, why: str, cause: Cause = Cause.REPORTED, status: int = 0) -> None:
        """Tell every task that this one fails (``why``, for ``cause``; ``status``: its command's exit status),
        then stop: the others' failure callbacks run."""
        if self._loop is not None:
            self._loop.run(self.aio.fail(why, cause, status))

    def report_crashes(self) -> None:
        """Make an uncaught exception in this process `fail()` this task, naming it, before it ends.

        Without this a crashing interpreter would still leave normally (its exit handlers run),
        and its peers would never hear that it failed. At an interactive prompt (``python -i``,
        a REPL in ``srun --pty``) an exception ends nothing, and is not reported.
        """
        crashes.report(self)

    def crashed(self, kind: type[BaseException], value: BaseException) -> None:
        """This process raised ``value`` and ends (`report_crashes()`): tell every task."""
        if self._detector is not None:
            try:
                self.fail(f"{self.me.label} raised {kind.__name__}: {str(value)[:300]}", Cause.CRASHED)
            except Exception:  # noqa: BLE001 - the report is best effort; the traceback still shows
                pass

    def stop(self, grace: float | None = 1.0) -> None:
        """Stop this task's server and its event loop; calls in flight get ``grace`` seconds."""
        if self._loop is None:
            return
        crashes.forget(self)  # stopped: an exception from here on is no failure of the job's
        try:
            self._loop.run(self.aio.stop(grace))
        finally:
            self._loop.close()
            self._loop = None
            if self._watched is not None:
                self._watched.close()

    def __repr__(self) -> str:
        return f"Bootstrapped(rank={self.rank}, world_size={self.world_size}, launcher={self.launcher!r})"


class Coroutines:
    """The blocking calls of a `Bootstrapped` as coroutines, for the running event loop."""

    def __init__(self, task: Bootstrapped) -> None:
        self._task = task

    async def barrier(self, name: str, timeout: float = 60.0) -> None:
        """`barrier()`."""
        await self._task._joined().barrier(_round_name(name), timeout)

    async def vote(self, name: str, yes: bool, timeout: float = 60.0) -> bool:
        """`vote()`."""
        return await self._task._joined().vote(_round_name(name), yes, timeout)

    async def wait_for(self, name: str, timeout: float | None = None) -> None:
        """`wait_for()`."""
        await self._task._joined().wait_for(_round_name(name), _FOREVER if timeout is None else timeout)

    async def announce(self, name: str, timeout: float = 60.0) -> None:
        """`announce()`."""
        await self._task._joined().announce(_round_name(name), timeout)

    async def stacks(self, timeout: float = 5.0) -> JobStacks:
        """`stacks()`."""
        task = self._task
        handler = task._stacks
        if handler is None or task._served is None:
            raise ConfigurationError("this cluster was not made by bootstrap(), or is stopped: it has no server",
                                     "call slurm_resolver.bootstrap() first")
        found = await handler.job(timeout)
        cluster = task.cluster
        return JobStacks(found, nodes_of(found, lambda rank: cluster.task(rank).node), f"step {cluster.launch.key}")

    async def fail(self, why: str, cause: Cause = Cause.REPORTED, status: int = 0) -> None:
        """`fail()`."""
        await self._task._fail(Fault(cause, why, status))

    async def stop(self, grace: float | None = 1.0) -> None:
        """`stop()`, on the running event loop (the loop itself is the caller's)."""
        await self._task._stop(grace)
