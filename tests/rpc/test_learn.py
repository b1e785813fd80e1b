"""A layout the environment does not tell, learned from the step's tasks through a bootstrap of its own."""

from __future__ import annotations

import threading
from typing import Any

from slurm_resolver.resolution import resolve
from slurm_resolver.rpc.learn import learn_layout
from slurm_resolver.rpc.simulation.simulate import srun_environ

from ..conftest import captured


def test_an_exact_layout_is_returned_as_it_is() -> None:
    cluster = resolve(srun_environ(2, 2), resolves=lambda name: True)
    assert learn_layout(cluster, {}) is cluster


def test_a_het_layout_the_environment_does_not_tell_is_learned_from_every_task() -> None:
    envs = captured("srun_het")
    truth = tuple(e["SLURMD_NODENAME"] for e in envs)
    results: list[Any] = [None] * len(envs)

    def task(i: int) -> None:
        env = {**envs[i], "SLURM_RESOLVER_AUTH": "none"}
        try:
            # Slurm's NodeAddr of the test cluster's nodes: the servers bind, and peers call, addresses
            # that every host has (loopback), never a name that only the test cluster's /etc/hosts knows.
            provisional = resolve(env, exchange="rendezvous", resolves=lambda name: False,
                                  node_addresses=lambda nodes: {n: f"127.0.1.{n.removeprefix('node')}" for n in nodes})
            assert not provisional.placement.exact
            results[i] = learn_layout(provisional, env, timeout=20).nodes
        except Exception as exc:  # noqa: BLE001 - collected for the assertion
            results[i] = exc

    threads = [threading.Thread(target=task, args=(i,)) for i in range(len(envs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert results == [truth] * len(envs)
