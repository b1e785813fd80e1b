"""``slurm-resolver check``: diagnose the current environment, one line per check.

Each check gives ``(ok, name, detail, hint)``: ``ok`` is True, False (a failure), or None
(a warning, which does not fail the command). Unlike resolution, the node-name check looks
up every node of the job: it is a diagnosis, not the start-up path.
"""

from __future__ import annotations

from collections.abc import Mapping

from . import addresses, gpus, launchers
from .environment import snapshot
from .errors import SlurmResolverError

__all__ = ["run_checks", "Check"]

Check = tuple[bool | None, str, str, str]


def run_checks(environ: Mapping[str, str] | None = None) -> list[Check]:
    """Every check of the environment ``environ`` (``os.environ`` by default)."""
    env = snapshot(environ)
    results: list[Check] = []
    launcher = launchers.detect(env)
    seen = sorted(k for k in env if k.startswith(("SLURM_", "OMPI_", "PMI")))
    results.append((True, "launcher", f"{launcher.name}: {launcher.description}", ""))
    results.append((True, "variables", f"{len(seen)} launcher variables ({', '.join(seen[:6])}"
                    f"{', ...' if len(seen) > 6 else ''})", ""))
    try:
        from .resolvers.slurm import SlurmClusterResolver

        resolver = SlurmClusterResolver(environ=env, auto_set_gpu=False, check_port=False, exchange="none")
    except SlurmResolverError as exc:
        results.append((False, "resolution", exc.message, exc.hint or ""))
        return results
    cluster = resolver.cluster
    me = cluster.me
    results.append((True, "resolution", f"{cluster.world_size} tasks" +
                    (f"; this is rank {me.rank}, {me.job}:{me.index} on {me.node} at {me.address}" if me else ""), ""))
    seen_gpus = gpus.visible(env)
    results.append((True, "gpus", f"{gpus.format_devices(seen_gpus.ids) or 'none'} (from {seen_gpus.source}"
                    f"{', bound by Slurm' if seen_gpus.bound else ''})", ""))
    nodes = list(dict.fromkeys(cluster.nodes))
    failing = [n for n in nodes if not addresses.resolves(n)]
    if failing:
        results.append((False, "names", f"{len(failing)} of {len(nodes)} node names do not resolve: "
                        f"{', '.join(failing[:8])}",
                        "add them to DNS or /etc/hosts on every node; meanwhile slurm_resolver uses Slurm's "
                        "NodeAddr (one scontrol call), if slurm.conf sets it"))
    else:
        results.append((True, "names", f"all {len(nodes)} node names resolve", ""))
    results.append(_authentication(env))
    if me is not None and cluster.launch.is_task:
        host, _, port = me.address.rpartition(":")
        busy = addresses.port_in_use(host, int(port))
        results.append((not busy, "ports", f"port {port} on {me.node} is {'in use' if busy else 'free'}",
                        "another job shares the node: choose another port_base, or use `slurm-resolver bootstrap`"
                        if busy else ""))
    return results


def _authentication(env: Mapping[str, str]) -> Check:
    """Whether the bootstrap's peers would prove their uid with MUNGE (a warning where not)."""
    from .munge import open_munge

    munge, how = open_munge(env)
    if munge is not None:
        return True, "auth", f"peers prove their uid: {how}", ""
    return (None, "auth", f"the bootstrap is not authenticated: {how}",
            "any process that presents the job's key may join; run munged (every Slurm cluster has it), "
            "or keep jobs on a trusted network")
