"""The layout of a step that the environment does not tell, learned from every task of the step.

A heterogeneous step whose components run several tasks on each of several nodes is laid out
with distributions the environment does not tell: `resolve()`
returns it provisional (``placement.exact`` false: the caller's node exact, the rest to be
learned), and never opens a socket. `learn_layout()` learns the rest through a bootstrap
of its own among the step's tasks (each tells its node), for the callers that need the
whole layout before their own bootstrap: ``SlurmClusterResolver`` and the command line.
``bootstrap()`` itself needs none of this: it learns the layout in its own exchange.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace

from ..cluster import Cluster
from ..errors import PlacementError, ResolutionError
from ..exchange import ExchangeMode
from ..placement import unknown
from .bootstrap import bootstrap
from .options import BootstrapOptions
from .tree import Checking, Verify

__all__ = ["learn_layout"]

log = logging.getLogger("slurm_resolver")


def learn_layout(cluster: Cluster, environ: Mapping[str, str] | None = None, timeout: float = 60.0) -> Cluster:
    """``cluster`` with every rank's node, learned from the step's other tasks where it is provisional
    (every task of the step must call this at about the same time); ``cluster`` itself where exact.

    The exchange runs under a key of its own (``<job>.<step>/layout``), so that a later bootstrap
    of the same step never meets it; its servers stop once the layout is known.
    """
    if cluster.placement.exact:
        return cluster
    learner = replace(cluster, launch=replace(cluster.launch, key=f"{cluster.launch.key}/layout"))
    try:
        learned = bootstrap(learner, BootstrapOptions(exchange=ExchangeMode.RENDEZVOUS, verify=Verify(Checking.NONE),
                                                      timeout=timeout, heartbeat=None), environ=environ)
    except PlacementError:
        raise
    except ResolutionError as exc:
        raise PlacementError(
            f"the layout of this {cluster.launcher} step is not in the environment ({unknown(cluster.launch)}), "
            f"and learning it from the step's other tasks failed: {exc.message}",
            "resolve in every task of the step at once (each learns from the others); or give each het component "
            "one node, or one task per node, or every task the host file of -m arbitrary; exchange='none' refuses "
            "at once") from None
    learned.stop()
    log.debug("learned the layout of the %s step from every task's node (SLURM_NODEID), through a rendezvous of "
              "its tasks: %s", cluster.launcher, learned.cluster.placement.all_hosts[:64])
    return cluster.with_placement(learned.cluster.placement)
