#!/usr/bin/env python3
"""Benchmark: the bootstrap of 1,024 to 16,384 tasks, simulated in this one process.

Every task runs the real protocol code (``bootstrap_async``: the tree of node leaders, its
messages and checks, ring verification, the final round) on one event loop and an
in-process network that counts what each server handled. Resolution runs once (it is
measured by benchmarks/resolve.py). Prints a Markdown table, or with --json one line per
size:
{"ranks": N, "wall_s": ..., "ok": true, "max_bytes_sent_by_one_server": ..., "max_connections_one_server": ...}

    python benchmarks/bootstrap_scale.py [--ranks 1024 4096 16384] [--tasks-per-node 4] [--fanout 8] [--json]
"""

from __future__ import annotations

import argparse
import json
import resource

from slurm_resolver.rpc.simulate import simulate
from slurm_resolver.rpc.tree import DEFAULT_FANOUT


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[1024, 4096, 16384])
    parser.add_argument("--tasks-per-node", type=int, default=4)
    parser.add_argument("--nodes", type=int, nargs="*", help="node counts instead of --ranks")
    parser.add_argument("--fanout", type=int, default=DEFAULT_FANOUT)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--json", action="store_true", help="one JSON object per size")
    args = parser.parse_args()
    shapes = [(n, args.tasks_per_node) for n in args.nodes] if args.nodes else \
        [(max(1, r // args.tasks_per_node), args.tasks_per_node) for r in args.ranks]
    if not args.json:
        print(f"tasks per node {args.tasks_per_node}, fan-out {args.fanout}\n")
        print("| ranks | nodes | wall (s) | CPU (s) | ok | max bytes sent by one server | max bytes received | "
              "max connections to one server | largest message (B) |\n|---|---|---|---|---|---|---|---|---|")
    for nodes, per_node in shapes:
        before = resource.getrusage(resource.RUSAGE_SELF)
        run = simulate(nodes, per_node, timeout=args.timeout, fanout=args.fanout)
        after = resource.getrusage(resource.RUSAGE_SELF)
        cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
        row = {**run.summary(), "nodes": nodes, "cpu_s": round(cpu, 2)}
        if args.json:
            print(json.dumps(row), flush=True)
        else:
            print(f"| {row['ranks']} | {nodes} | {row['wall_s']:.2f} | {cpu:.2f} | {row['ok']} | "
                  f"{row['max_bytes_sent_by_one_server']:,} | {row['max_bytes_received_by_one_server']:,} | "
                  f"{row['max_connections_one_server']} | {row['largest_message']:,} |", flush=True)
        if not run.ok:
            print(f"errors: {run.errors}")


if __name__ == "__main__":
    main()
