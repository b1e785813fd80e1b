"""How the tasks exchange what nobody can compute, two ways: up and down the tree, or MPI's allgather.

What each task brings: the port its server bound, a spare port reserved for a framework, and the
GPUs Slurm bound to it alone. `TreeRendezvous` sends it up the tree of node leaders: the root decides
the table and the launch's key, and (with ``verify='once'``, the default) each leader checks its
sources' servers as their records arrive, so the table comes down verified. `MpiExchange` gathers it
through MPI's allgather (under an MPI launcher, or srun with PMIx where MPI initialises): rank 0 makes
the key, every task checks its peers after the table, and a last allgather agrees that every check
passed. Either way `settle` gives the cluster with every task's ports.
"""

from __future__ import annotations

import asyncio
import logging
from array import array
from collections import Counter
from typing import NamedTuple, Protocol

from ..cluster import Cluster, Task
from ..errors import ResolutionError
from ..exchange import Exchange
from ..gpus import format_devices, parse_reported
from ..placement import Placement
from ..speakers import Speaker
from .bootstrapped import Exchanged
from .messages import TABLE_ROUND, VERIFIED_ROUND, Contribution, Failure, Records, Table
from .rounds.member import Member
from .trust.seals import Authority

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)

log = logging.getLogger("slurm_resolver")


class Exchanging(Protocol):
    """A way to exchange the tasks' records (and, where servers are checked after the table, to agree)."""

    how: Exchanged

    async def table(self, cluster: Cluster, me: Task, port: int, spare: int, timeout: float) -> Table:
        """Every task's record: this one (``me``) brings its server's ``port`` and a ``spare`` one."""
        ...

    async def agree(self, member: Member, failure: Failure, timeout: float) -> None:
        """Every check passed, or every task fails naming the first that did not (``failure``: this one's)."""
        ...

    def place(self, cluster: Cluster, member: Member) -> str:
        """Where this task stood in the exchange, in words (for ``-v``)."""
        ...


def _gpus(cluster: Cluster, me: Task) -> str | None:
    """The GPUs Slurm bound to task ``me`` alone, as the table carries them (None: none so bound)."""
    return format_devices(me.gpus) if cluster.gpu_plan.visible.bound and me.gpus else None


class TreeRendezvous:
    """Up and down the tree of node leaders (`slurm_resolver.rpc.rounds.member`)."""

    how = Exchanged.TREE

    def __init__(self, member: Member) -> None:
        self._member = member

    async def table(self, cluster: Cluster, me: Task, port: int, spare: int, timeout: float) -> Table:
        """The table the root decides from every task's record."""
        plan = self._member.plan
        gpus = _gpus(cluster, me)
        told = not cluster.placement.exact or cluster.launch.arbitrary  # each task tells its node where some may
        nodes = [plan.position] if told else []                          # not know the layout (their host file)
        own = Records([plan.rank], array("H", (port,)), array("H", (spare,)), {plan.rank: gpus} if gpus else {}, nodes)
        _, table = await self._member.round(TABLE_ROUND, Contribution(own), timeout)
        return table

    async def agree(self, member: Member, failure: Failure, timeout: float) -> None:
        """The verified round, through the tree."""
        await member.round(VERIFIED_ROUND, Contribution(failure=failure), timeout)

    def place(self, cluster: Cluster, member: Member) -> str:
        plan, above = member.plan, member.above[0]
        node = cluster.task(plan.rank).node
        if plan.is_leader:
            return f"leader of {node}" + (f", parent rank {above}" if above is not None else ", the root") + \
                f", {len(plan.sources)} below"
        return f"on {node} under its leader, rank {plan.leader}"


class _MpiRecord(NamedTuple):
    """One task's record in the MPI exchange (a list on the way: JSON has no tuples)."""

    port: int
    spare: int
    gpus: str
    """Its GPUs where Slurm bound them to it alone, else ''."""
    key: str
    """The launch's key, in hex: rank 0's; '' for the others."""

    @classmethod
    def read(cls, row: object) -> _MpiRecord:
        """A record as another task sent it, checked."""
        if not isinstance(row, list) or len(row) != len(cls._fields):
            raise ResolutionError(f"the MPI exchange carried {str(row)[:80]!r}, not a task's record",
                                  "every task must run the same slurm_resolver version")
        port, spare, gpus, key = row
        return cls(int(port), int(spare), str(gpus), str(key))


class MpiExchange:
    """MPI's allgather, on a worker thread (the server keeps serving meanwhile)."""

    how = Exchanged.MPI

    def __init__(self, group: Exchange, authority: Authority) -> None:
        self._group = group
        self._authority = authority

    async def table(self, cluster: Cluster, me: Task, port: int, spare: int, timeout: float) -> Table:
        """Every task's record, gathered; rank 0's key learned by all."""
        key = self._authority.new_key().hex() if cluster.rank == 0 else ""
        mine = _MpiRecord(port, spare, _gpus(cluster, me) or "", key)
        rows = await asyncio.get_running_loop().run_in_executor(None, self._group.allgather, list(mine))
        if len(rows) != cluster.world_size:
            raise ResolutionError(f"the MPI exchange has {len(rows)} ranks, the cluster {cluster.world_size}",
                                  "run one process per task of the launch")
        records = [_MpiRecord.read(row) for row in rows]
        self._authority.learn(bytes.fromhex(records[0].key))
        return Table(tuple(r.port for r in records), tuple(r.spare for r in records),
                     {i: r.gpus for i, r in enumerate(records) if r.gpus})

    async def agree(self, member: Member, failure: Failure, timeout: float) -> None:
        """Every task's verdict, gathered: the first failure fails every task alike."""
        rows = await asyncio.get_running_loop().run_in_executor(None, self._group.allgather, [failure.reason])
        failed = [r[0] for r in rows if r[0]]
        if failed:
            more = f" ({len(failed) - 1} more tasks reported a failure)" if len(failed) > 1 else ""
            raise ResolutionError(f"bootstrap: {failed[0]}{more}", "check the named task's output and network",
                                  speaker=Speaker.FIRST)  # every rank gathered the same verdicts

    def place(self, cluster: Cluster, member: Member) -> str:
        return f"exchanged through MPI ({cluster.world_size} ranks)"


def settle(cluster: Cluster, table: Table) -> Cluster:
    """The cluster with the ports every task bound (and the layout they told, where Slurm's did not)."""
    reported = parse_reported(table.gpus)  # one parse of one table a process (a simulation shares it)
    if table.nodes or not cluster.placement.exact:
        learned = _learned(cluster, table)
        if cluster.placement.exact and learned.all_hosts != cluster.placement.all_hosts:
            raise ResolutionError("bootstrap: the tasks run on other nodes than this task's host file "
                                  "(SLURM_HOSTFILE) says", "launch the step with the host file it was made for")
        cluster = cluster.with_placement(learned)
    return cluster.with_ports(table.ports, table.spares, reported)


def _learned(cluster: Cluster, table: Table) -> Placement:
    """The layout the tasks told each other (each its node), checked against Slurm's counts."""
    nodes = cluster.placement.nodes
    if len(table.nodes) != cluster.world_size:
        raise ResolutionError("bootstrap: the tasks did not tell their nodes, and the layout is not in the environment",
                              "every task must run the same slurm_resolver version")
    told = Counter(table.nodes)
    if any(told.get(p, 0) != count for p, count in enumerate(cluster.placement.counts)):
        raise ResolutionError("bootstrap: the nodes the tasks reported do not add up to Slurm's tasks per node",
                              "every task must belong to the same step")
    log.debug("bootstrap: learned the layout of %s from every task's node (SLURM_NODEID)", cluster.launcher)
    return Placement(nodes, cluster.placement.counts, tuple(nodes[p] for p in table.nodes))
