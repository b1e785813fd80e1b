#!/usr/bin/env python3
"""Benchmark: the bootstrap of 1,024 to 131,072 tasks, simulated in one process or over real gRPC.

Every task runs the real protocol code (``bootstrap_async``: the tree of node leaders, its
messages, seals and checks, the ring check, the final round). Two networks, always named in
the output, since a scale figure that does not name its network misleads:

- ``--network local`` (the default): every task on one event loop and an in-process network
  that counts what each server handled; no sockets, no gRPC.
- ``--network grpc``: every task with its own gRPC server and channels, each simulated node
  on its own loopback address (127.77.x.y, as Slurm's NodeAddr would give it), the nodes
  spread over ``--procs`` processes (a node's tasks in one process); tasks prove themselves
  with a secret, as the templates' jobs do.

Resolution runs once (benchmarks/resolve.py measures it). Prints a Markdown table, or with
--json one line per size:
{"network": "grpc", "ranks": N, "wall_s": ..., "ok": true, "cpu_ms_per_rank": ..., ...}

With ``--gpus-per-task`` (in-process), every task sees one GPU that Slurm bound to it (``--gpus-per-task=1``,
as on GPU nodes): each reports it, and the table carries a GPU list a rank.

With ``--heartbeat 1 --hold 15`` (over gRPC), failure detection (off otherwise, so that the
bootstrap is measured) runs once every task's bootstrap is done and every task watches (its watch
call made and answered, every leader called by all below it: ``armed_s`` after the bootstrap), then
15 s more, every task alive: the line adds the tasks it declared dead (``deaths``: none, if it is
right) and its CPU a task a second, counted over the hold but its first seconds (a quarter, at most
5 s), and the once-a-job cost before apart (``armed_cpu_ms_per_rank``: answering the others'
bootstrap and making the watch calls); with deaths, the first ones heard, when, and why.
With ``--kill P`` too, process P ends abruptly a third into the hold, with its nodes' tasks: the line says
how many living tasks were declared dead (none, if it is right), how many never heard of a
death, and when the last one did. With ``--stop`` too, process P stops (SIGSTOP) instead: its
connections stay open and nothing answers on them, as a node's that loses power, so that only pings
(its parent nodes') find its nodes, and the word of their silence (``Lost``) reaches their child nodes.

    python benchmarks/bootstrap_scale.py [--network local|grpc] [--procs 4] [--ranks 1024 4096] [--json]
                                         [--tasks-per-node 8 --nodes 65536 --timeout 1200 [--gpus-per-task]]
                                         [--repeat 10] [--heartbeat 1 --hold 15 [--kill 1 [--stop]]]

The simulated tasks share one core, so the last ones start long after the first: past 131,072 tasks,
give a timeout several times the run's wall time (524,288 tasks: ``--timeout 1200``).
"""

from __future__ import annotations

import argparse
import json
import resource

from slurm_resolver.resolution import resolve
from slurm_resolver.rpc.simulation.loopback import over_grpc
from slurm_resolver.rpc.simulation.simulate import Simulation, simulate, srun_environ
from slurm_resolver.rpc.tree import DEFAULT_FANOUT


def _run(network: str, nodes: int, per_node: int, args: argparse.Namespace) -> Simulation:
    if network == "grpc":
        return over_grpc(nodes, per_node, args.procs, timeout=args.timeout, fanout=args.fanout,
                         heartbeat=args.heartbeat, hold=args.hold, kill=args.kill, marks=args.marks, stop=args.stop)
    cluster = None
    if args.gpus_per_task:  # each task sees its own GPU as 0, bound by Slurm
        environ = {**srun_environ(nodes, per_node), "CUDA_VISIBLE_DEVICES": "0", "SLURM_GPUS_PER_TASK": "1"}
        cluster = resolve(environ, resolves=lambda name: True)
    before = resource.getrusage(resource.RUSAGE_SELF)
    run = simulate(nodes, per_node, timeout=args.timeout, fanout=args.fanout, cluster=cluster)
    after = resource.getrusage(resource.RUSAGE_SELF)
    run.cpu_s = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--network", choices=("local", "grpc"), default="local",
                        help="local: one process, no sockets; grpc: real gRPC on loopback addresses (default: local)")
    parser.add_argument("--procs", type=int, default=4, help="processes of a --network grpc run (default: 4)")
    parser.add_argument("--ranks", type=int, nargs="+", default=[1024, 4096, 16384])
    parser.add_argument("--tasks-per-node", type=int, default=4)
    parser.add_argument("--nodes", type=int, nargs="*", help="node counts instead of --ranks")
    parser.add_argument("--fanout", type=int, default=DEFAULT_FANOUT)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds every bootstrap may take")
    parser.add_argument("--heartbeat", type=float, help="--network grpc: failure detection on, with beats this "
                        "many seconds apart (patience: five beats); off by default, so that the bootstrap is measured")
    parser.add_argument("--hold", type=float, default=0.0, help="--network grpc, with --heartbeat: seconds failure "
                        "detection runs after the bootstrap; prints the deaths it declared (none: right) and its CPU")
    parser.add_argument("--kill", type=int, help="--network grpc, with --hold: process number KILL ends abruptly a "
                        "third into the hold, with its nodes' tasks; prints whom the others declared dead and how soon "
                        "the last living task heard of it")
    parser.add_argument("--stop", action="store_true", help="with --kill: that process stops (SIGSTOP) instead: "
                        "its connections stay open and silent, as a node's that loses power, found by pings alone")
    parser.add_argument("--marks", action="store_true", help="--network grpc, with --hold: every task marks progress "
                        "while held (the beats carry the marks, the root judges hangs)")
    parser.add_argument("--gpus-per-task", action="store_true", help="--network local: every task sees one GPU "
                        "Slurm bound to it (--gpus-per-task=1, as on GPU nodes): the table carries a GPU list a rank")
    parser.add_argument("--json", action="store_true", help="one JSON object per size")
    parser.add_argument("--repeat", type=int, default=1, help="runs of every size, one after another (default: 1)")
    args = parser.parse_args()
    if args.hold and not (args.heartbeat and args.network == "grpc"):
        parser.error("--hold needs --network grpc and --heartbeat")
    if args.gpus_per_task and args.network != "local":
        parser.error("--gpus-per-task needs --network local")
    if args.kill is not None and not (args.hold and 0 <= args.kill < args.procs and args.procs > 1):
        parser.error(f"--kill needs --hold and names one of the --procs {args.procs} processes (more than one)")
    if args.stop and args.kill is None:
        parser.error("--stop needs --kill: the process that stops")
    shapes = [(n, args.tasks_per_node) for n in args.nodes] if args.nodes else \
        [(max(1, r // args.tasks_per_node), args.tasks_per_node) for r in args.ranks]
    where = "in-process network, one process" if args.network == "local" else \
        f"real gRPC on loopback addresses, {args.procs} processes"
    if not args.json:
        gpus = "; a GPU bound to each task" if args.gpus_per_task else ""
        print(f"network: {where}; tasks per node {args.tasks_per_node}, fan-out {args.fanout}{gpus}\n")
        print("| ranks | nodes | wall (s) | CPU ms per rank | ok | peak memory (MB) | max bytes sent by one server | "
              "max connections to one server | largest message (B) |\n|---|---|---|---|---|---|---|---|---|")
    for nodes, per_node in [shape for shape in shapes for _ in range(args.repeat)]:
        run = _run(args.network, nodes, per_node, args)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024  # this process (local runs)
        row = {"network": args.network, **({"procs": args.procs} if args.network == "grpc" else {}),
               **run.summary(), "nodes": nodes, "cpu_ms_per_rank": round(1000 * run.cpu_s / run.ranks, 2),
               **({"peak_mb": peak} if args.network == "local" else {}),
               **({"gpus_per_task": 1} if args.gpus_per_task else {})}
        if args.json:
            print(json.dumps(row), flush=True)
        else:
            local = args.network == "local"
            print(f"| {row['ranks']} | {nodes} | {row['wall_s']:.2f} | {row['cpu_ms_per_rank']:.2f} | {row['ok']} | "
                  f"{peak if local else '-'} | {row['max_bytes_sent_by_one_server'] if local else '-'} | "
                  f"{row['max_connections_one_server'] if local else '-'} | "
                  f"{row['largest_message'] if local else '-'} |", flush=True)
        if run.held_s and not args.json:
            print(f"failure detection, held {run.held_s:g} s once every task watched ({run.armed_s:.1f} s after the "
                  f"bootstrap): {len(run.dead)} tasks declared dead, "
                  f"{row['held_cpu_ms_per_rank_second']} ms of CPU a task a second (its last {run.counted_s:g} s; "
                  f"before them, answering the others' bootstrap and making the watch calls: "
                  f"{row['armed_cpu_ms_per_rank']} ms a task)"
                  + (f"; the first death heard {run.first_death_s:.1f} s after every task's bootstrap"
                     if run.first_death_s is not None else ""), flush=True)
        for at, by, rank, why in run.first_deaths if not args.json else ():
            print(f"  {at - run.first_deaths[0][0]:+.2f} s: rank {by} heard of rank {rank}: {why}", flush=True)
        if run.killed and not args.json:
            how = "stopped" if args.stop else "ended"
            print(f"process {args.kill} {how} with its {len(run.killed)} tasks: {row['declared_dead_but_alive']} "
                  f"living tasks declared dead; every living task but {run.unheard} heard of a death, the last "
                  f"{run.heard_s:.3f} s after (half of them {run.heard_median_s:.3f} s after); at the hold's end "
                  f"{run.unwatching} living tasks watched on nobody (cut off with the tasks below them); of the "
                  f"{len(run.dead)} deaths declared, a living task knew {row['deaths_known_median']} (the median; "
                  f"the fewest {row['deaths_known_fewest']}, a tenth of them {run.known[len(run.known) // 10]} or "
                  f"fewer)", flush=True)
        if not run.ok:
            print(f"errors: {run.errors}", flush=True)


if __name__ == "__main__":
    main()
