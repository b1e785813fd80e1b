#!/usr/bin/env python3
"""Benchmark: every task's stacks gathered through the tree and merged, simulated in one process or
over real gRPC (issue 41).

Every task bootstraps with the real protocol code; then rank 0 asks for the job's stacks
(``b.stacks()``): each leader asks the tasks below it at once, takes its own, and answers the merge.
Two networks, always named in the output:

- ``--network local``: every task on one event loop, an in-process network (one process: every
  task's stacks are that process's threads, so the merge is at its smallest).
- ``--network grpc``: every task with its own gRPC server, each node on its own loopback address,
  the nodes spread over ``--procs`` processes (``slurm_resolver.rpc.simulation.loopback``).

With ``--beats`` (in-process only), failure detection runs with every task marking progress each
beat: what progress marks add to a beat, and to a leader, is counted (bytes a beat, marks merged).

    python benchmarks/stacks.py [--network local|grpc] [--procs 16] [--ranks 4096] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

from slurm_resolver.resolution import resolve
from slurm_resolver.rpc.bootstrap import bootstrap_async
from slurm_resolver.rpc.diagnosis.stacks_wire import encode_stacks
from slurm_resolver.rpc.network.in_process import LocalNetwork
from slurm_resolver.rpc.simulation.loopback import over_grpc
from slurm_resolver.rpc.simulation.simulate import srun_environ


def _local(nodes: int, per_node: int) -> dict[str, object]:
    base = resolve(srun_environ(nodes, per_node), resolves=lambda name: True)

    async def run() -> dict[str, object]:
        network = LocalNetwork()
        tasks = await asyncio.gather(*(bootstrap_async(base.as_rank(r), exchange="rendezvous", timeout=600,
                                                       environ={}, network=network, heartbeat=None)
                                       for r in range(base.world_size)))
        start = time.monotonic()
        found = await tasks[0].aio.stacks(60.0)
        took = time.monotonic() - start
        await asyncio.gather(*(t.aio.stop(0) for t in tasks))
        size = len(encode_stacks(found.stacks, bytes(16), 0, lambda header: bytes(32)))
        return {"stacks_s": round(took, 3), "stacks_answered": found.stacks.answered, "stacks_bytes": size}

    return asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--network", choices=("local", "grpc"), default="local")
    parser.add_argument("--procs", type=int, default=16, help="processes of a --network grpc run (default: 16)")
    parser.add_argument("--ranks", type=int, nargs="+", default=[4096])
    parser.add_argument("--tasks-per-node", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds every bootstrap may take")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    for ranks in args.ranks:
        nodes = ranks // args.tasks_per_node
        for _ in range(args.repeat):
            if args.network == "grpc":
                run = over_grpc(nodes, args.tasks_per_node, args.procs, timeout=args.timeout, stacks=True)
                row: dict[str, object] = {"ok": run.ok, "bootstrap_s": round(run.wall_s, 2),
                                          "stacks_s": round(run.stacks_s, 3), "stacks_answered": run.stacks_answered,
                                          "stacks_bytes": run.stacks_bytes}
            else:
                row = _local(nodes, args.tasks_per_node)
            print(json.dumps({"network": args.network, "ranks": ranks, "procs": args.procs
                              if args.network == "grpc" else 1, **row}), flush=True)


if __name__ == "__main__":
    main()
