"""The bootstrap's start: how this task proves itself, and its server built whole once.

`proof_of` chooses how calls and answers are proven (a secret, MUNGE, or nothing, said once);
`start` puts this task in the tree, chooses how it exchanges (`slurm_resolver.rpc.exchanges`),
and starts its server with every part it will ever have: what those parts learn later (the
agreed cluster, the watch of the tasks below) comes through the `Later` values they were made
with, so nothing is injected into a running server.
"""

from __future__ import annotations

import logging
import resource
import time
from typing import TYPE_CHECKING

from ..cluster import Cluster
from ..errors import alone
from ..exchange import Exchange, ExchangeMode, mpi_exchange
from ..values import Value, fill
from . import calls
from .exchanges import Exchanging, MpiExchange, TreeRendezvous
from .handlers import TaskHandlers
from .messages import Identity
from .network.callers import CALLS_SHARE, CONNECTIONS_SHARE, MOST_CALLS
from .options import BootstrapOptions
from .rounds.member import Member
from .rounds.uplink import Uplink
from .transport import Network, Served
from .tree import Checking, Plan, plan_of
from .trust.choice import AuthChoice, authority
from .trust.seals import AuthMode, Authority
from .trust.verify import Inspection

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Mapping

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)

log = logging.getLogger("slurm_resolver")


class Started(Value):
    """One task once started: its place, its server, and how it exchanges.

    Attributes:
        inspection: a leader's checks of its sources' servers in the first round (the tree's way
            to verify); None where it checks nothing then.
        checks_later: whether servers are checked after the table instead, with a last round for
            the verdict.
    """

    __slots__ = ("cluster", "plan", "network", "authority", "served", "member", "exchange", "inspection",
                 "checks_later")
    cluster: Cluster
    plan: Plan
    network: Network
    authority: Authority
    served: Served[TaskHandlers]
    member: Member
    exchange: Exchanging
    inspection: Inspection | None
    checks_later: bool

    def __init__(self, cluster: Cluster, plan: Plan, network: Network, authority: Authority,
                 served: Served[TaskHandlers], member: Member, exchange: Exchanging, inspection: Inspection | None,
                 checks_later: bool) -> None:
        fill(self, cluster, plan, network, authority, served, member, exchange, inspection, checks_later)

    @property
    def handlers(self) -> TaskHandlers:
        """Its server's parts."""
        return self.served.handlers


def proof_of(auth: AuthChoice | None, env: Mapping[str, str], network: Network | None, cluster: Cluster
             ) -> Authority:
    """How this task's calls and answers are proven (see `auth`); in an in-process network, whose
    simulated tasks share one process anyway, nothing unless asked. A job without proof says so, once."""
    if network is not None and auth is None:  # a job's task (no network given) never loads the in-process one
        from .network.in_process import LocalNetwork

        if isinstance(network, LocalNetwork):
            return Authority(AuthMode.NONE, "not authenticated: an in-process network")
    found = authority(auth, env, cluster.launch.key)
    if found.mode is AuthMode.NONE and auth is None and cluster.rank == 0 and not cluster.launch.standalone:
        log.warning("slurm_resolver: this job's tasks do not prove who they are (%s): any local user who can "
                    "reach their ports can join or disturb the bootstrap. Give the job a secret "
                    "(export SLURM_RESOLVER_SECRET; the templates do) or run munged.", found.how)
    return found


def grpc_network(cluster: Cluster, fanout: int) -> Network:
    """The real network (it imports grpc), in a process whose limit on open files was raised first."""
    from .network.grpc_network import GrpcNetwork

    if cluster.launch.standalone:
        log.warning(alone("the bootstrap"))
    _open_files(cluster, fanout)
    return GrpcNetwork()


def _open_files(cluster: Cluster, fanout: int) -> None:
    """Raise this process's limit on open files to the hard limit, as servers do: a server must not
    stop accepting its own tasks because strangers hold connections. A hard limit too low for the
    job's size (a leader's tasks and child leaders, and every stranger's share of calls) is said."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            return
    needed = 2 * MOST_CALLS + 8 * (max(cluster.placement.counts, default=1) + fanout)
    if hard != resource.RLIM_INFINITY and hard < needed:
        log.warning("slurm_resolver: this process may open only %d files; a node leader of this job needs about %d "
                    "(a few per task of its node and per child leader, and strangers' connections count too: "
                    "each may hold %d connections and %d calls): raise the hard limit (ulimit -Hn, or LimitNOFILE= "
                    "of slurmd)", hard, needed, CONNECTIONS_SHARE, CALLS_SHARE)


async def start(cluster: Cluster, options: BootstrapOptions, mode: ExchangeMode | Exchange, network: Network,
                proof: Authority, candidates: list[int]) -> Started:
    """Start this task's server on its node, whole, and its place in the tree."""
    rank = cluster.rank
    assert rank is not None
    me = cluster.task(rank)
    plan = plan_of(cluster, rank, options.fanout)
    group = mpi_exchange(cluster.launch, mode, options.timeout)
    uplink = Uplink(cluster, plan, network, proof, candidates)
    identity = Identity(cluster.launch.key, rank, me.node, me.job, me.index)
    root = uplink.position is None and plan.is_leader
    bind = candidates if options.port or (plan.is_leader and group is None) else [0]
    early = group is None and options.verify.how is Checking.ONCE  # leaders check their sources as they join
    inspection = None
    if early and plan.is_leader and plan.sources:  # a record in at the last moment still gets its check
        inspection = Inspection(cluster, plan, network, proof,
                                time.monotonic() + options.timeout * plan.tree.check_until(plan.position))
    arrived = None if inspection is None else inspection.arrived
    served = await network.serve(me.host, bind, lambda port: TaskHandlers(  # made for the port bound: seals name it
        identity, cluster.world_size, proof, port, plan.sources, root, None if root else uplink.notice, arrived),
        calls.TABLE)
    member = Member(cluster, plan, uplink, served.handlers.rounds, inspection)
    exchange: Exchanging = TreeRendezvous(member) if group is None else MpiExchange(group, proof)
    return Started(cluster, plan, network, proof, served, member, exchange, inspection,
                   checks_later=not early and options.verify.how is not Checking.NONE)
