#!/usr/bin/env python3
"""Benchmark: the floor of a bootstrap's design over gRPC on this machine, before any code of ours.

Bare gRPC asyncio, none of slurm_resolver's protocol (only its settings and addresses):
every task starts a server, every task but the root makes one unary call up over a connection
of its own (a channel per task, with a subchannel pool of its own, as separate processes have:
gRPC would otherwise share one connection between a process's channels to one address), and
the tasks that nobody calls are asked once who they are, over a new connection. Calls are
answered at once. gRPC runs as the bootstrap runs it: prepared by `grpc_module()` (the native
resolver among its defaults), the bootstrap's server and channel options, `ipv4:` targets (no resolver runs for a peer's
address). What it prints is the least CPU a task of that design can cost here, whatever the
code on top.

Designs, in nodes of ``--tasks-per-node`` tasks (each node on its own loopback address), the
nodes' leaders (their first task) in the bootstrap's tree (fan-out 8):

- ``tree`` (the bootstrap's): a node's tasks call its leader, which asks each of them who
  they are (every server is checked, so the table is verified);
- ``table``: ``tree``, with every call up answered with the bytes of the job's table (every
  task's port and spare port, in the bootstrap's own chunks and bundle: what every task of the
  bootstrap receives, so that it knows where each peer listens: 99 kB at 16,384 tasks);
- ``chain``: a node's tasks call the one before them, so that only the last is asked who it
  is (every server still checked; a node's tasks would have to find each other's ports);
- ``unchecked``: calls up only, nobody asked (the table not verified: a lower bound only).

The nodes are spread over ``--procs`` processes as in `bootstrap_scale.py --network grpc
--procs P` (node n in process n % P); a task's server listens at a port fixed by its place on
its node (from `PORT_BASE`, below Linux's ephemeral ports and the bootstrap's rendezvous ports),
so that no exchange is needed; every process's servers are up before any call, and a
process's CPU counts from its servers' start until every process's calls are done (its servers
answer until then).

Prints one JSON line per design:
{"design": "tree", "tasks": 1024, "procs": 1, "cpu_ms_per_task": ..., "wall_s": ..., "connections_per_task": ...}

    python benchmarks/grpc_floor.py [--tasks 1024] [--procs 4] [--designs tree chain unchecked] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import multiprocessing
import resource
import threading
import time
from typing import Any

from slurm_resolver.rpc.network.grpc_network import CHANNEL_OPTIONS, channel_target
from slurm_resolver.rpc.network.server import MOST_RPCS, grpc_module, server_options
from slurm_resolver.rpc.simulation.loopback import cpu_seconds, loopback, many_open_files, next_report
from slurm_resolver.rpc.tree import DEFAULT_FANOUT, Tree

DESIGNS = ("tree", "table", "chain", "unchecked")
TIMEOUT = 120.0
"""Seconds a run may take; a call, or a process waiting for the others, fails after it."""


def _address(task: int, per_node: int) -> str:
    """The loopback address of ``task``'s node, as the bootstrap's benchmark gives it."""
    return loopback(task // per_node)


def _above(task: int, per_node: int, design: str, tree: Tree) -> int | None:
    """Whom ``task`` calls: the task before it (chain) or its leader; a leader calls its parent's."""
    if task % per_node:
        return task - 1 if design == "chain" else task - task % per_node
    parent = tree.parent(task // per_node)
    return None if parent is None else parent * per_node


def _asked(leader: int, per_node: int, design: str) -> list[int]:
    """The tasks of ``leader``'s node that it asks who they are: those nobody else calls."""
    if design == "unchecked":
        return []
    mates = list(range(leader + 1, leader + per_node))
    return mates[-1:] if design == "chain" else mates  # tree, table


UP = b"a record of a few bytes"
"""A call up the tree (a who-are-you question is any other message)."""


def _table(tasks: int) -> bytes:
    """The answer a task of the bootstrap receives, for ``tasks`` tasks: the table's chunks, bundled."""
    from slurm_resolver.rpc.messages import Failure, Table
    from slurm_resolver.rpc.rounds.codec import decision, encode_answer
    from slurm_resolver.rpc.wire import bundle

    ports = tuple(20000 + rank % 12000 for rank in range(tasks))
    outcome = decision(Failure(), Table(ports, tuple(p + 12000 for p in ports), {}, ()), b"k" * 32)
    return bundle(encode_answer(outcome, b"n" * 16, 0, lambda header: b"s" * 32))


PORT_BASE = 15000
"""A task's port: PORT_BASE plus its index on its node (every node has an address of its own),
so that the tasks of one process can call those of another without an exchange."""


async def _run(tasks: int, per_node: int, design: str, procs: int, index: int, sync: Any) -> dict[str, Any]:
    """Process ``index`` of ``procs``: its nodes' tasks (node n in process n % procs), from their
    servers' start to the end of every process's calls (its servers answer until then)."""
    grpc: Any = grpc_module()  # its settings written first, as for every task's server
    from grpc import aio

    table = _table(tasks) if design == "table" else b""

    async def answer(request: bytes, context: Any) -> bytes:
        return table if request == UP else request

    class Handler(grpc.GenericRpcHandler):  # type: ignore[misc]
        def service(self, details: Any) -> Any:
            return grpc.unary_unary_rpc_method_handler(answer)

    def port(task: int) -> int:
        return PORT_BASE + task % per_node

    tree = Tree(-(-tasks // per_node), DEFAULT_FANOUT)  # the leaders' tree of the bootstrap
    mine = [rank for rank in range(tasks) if rank // per_node % procs == index]
    connections = 0
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sync.wait, TIMEOUT)  # every process is up
    before, start = resource.getrusage(resource.RUSAGE_SELF), time.time()
    servers = []
    for served in mine:
        server = aio.server(options=server_options(resource.getrlimit(resource.RLIMIT_NOFILE)[0]),
                            maximum_concurrent_rpcs=MOST_RPCS)
        try:
            server.add_insecure_port(f"{_address(served, per_node)}:{port(served)}")
        except RuntimeError:
            raise SystemExit(f"port {port(served)} of {_address(served, per_node)} is taken: another run?") from None
        server.add_generic_rpc_handlers((Handler(),))
        await server.start()
        servers.append(server)
    await loop.run_in_executor(None, sync.wait, TIMEOUT)  # every process's servers are up

    async def call(target: int, message: bytes) -> Any:
        nonlocal connections
        connections += 1
        channel = aio.insecure_channel(channel_target(_address(target, per_node), port(target)),
                                       options=CHANNEL_OPTIONS)
        await channel.unary_unary("/floor/Call")(message, timeout=TIMEOUT)
        return channel

    async def task(rank: int) -> list[Any]:
        channels = []
        above = _above(rank, per_node, design, tree)
        if above is not None:
            channels.append(await call(above, UP))
        if rank % per_node == 0:
            channels += [await call(mate, b"who are you") for mate in _asked(rank, per_node, design)]
        return channels

    await asyncio.gather(*(task(rank) for rank in mine))
    end = time.time()
    await loop.run_in_executor(None, sync.wait, TIMEOUT)  # every process's calls are done: idle until then
    after = resource.getrusage(resource.RUSAGE_SELF)
    return {"cpu": cpu_seconds(before, after), "start": start, "end": end, "connections": connections}


def _measure(tasks: int, per_node: int, design: str, procs: int, index: int, sync: Any, out: Any) -> None:
    """One process of a run, fresh (gRPC's threads and caches start cold for every design); where
    it fails, the others stop waiting for it (the barrier is broken) and it reports why."""
    many_open_files()
    gc.disable()
    try:
        out.put(asyncio.run(_run(tasks, per_node, design, procs, index, sync)))
    except threading.BrokenBarrierError:  # another process failed: its report says why
        out.put({"error": f"process {index}: stopped waiting at a barrier ({TIMEOUT} s, or another process failed)",
                 "consequence": True})
    except BaseException as exc:
        sync.abort()
        out.put({"error": f"process {index}: {exc!r}"[:500]})


def _run_design(args: argparse.Namespace, design: str) -> dict[str, Any]:
    """One run of ``design`` in ``args.procs`` fresh processes; every process ended after it."""
    context = multiprocessing.get_context("spawn")
    out, sync = context.Queue(), context.Barrier(args.procs)
    processes = [context.Process(target=_measure, args=(args.tasks, args.tasks_per_node, design, args.procs,
                                                        index, sync, out), daemon=True)
                 for index in range(args.procs)]
    try:
        for process in processes:
            process.start()
        try:
            rows = [next_report(out, processes, 3 * TIMEOUT + 60) for _ in processes]
        except RuntimeError as exc:
            raise SystemExit(f"{design}: {exc}") from None
    finally:
        for process in processes:  # servers and channels are not stopped one by one: the processes end
            process.kill()
            process.join()
    failed = sorted((row.get("consequence", False), row["error"]) for row in rows if "error" in row)
    if failed:
        raise SystemExit(f"{design}: {failed[0][1]}")  # a cause before its consequences
    cpu = sum(row["cpu"] for row in rows)
    return {"design": design, "tasks": args.tasks, "procs": args.procs,
            "cpu_ms_per_task": round(1000 * cpu / args.tasks, 2),
            "wall_s": round(max(r["end"] for r in rows) - min(r["start"] for r in rows), 2),
            "connections_per_task": round(sum(r["connections"] for r in rows) / args.tasks, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tasks", type=int, default=256)
    parser.add_argument("--tasks-per-node", type=int, default=4)
    parser.add_argument("--procs", type=int, default=1, help="processes, the nodes spread over them")
    parser.add_argument("--designs", nargs="+", choices=DESIGNS, default=list(DESIGNS))
    parser.add_argument("--repeat", type=int, default=3, help="runs of each design, alternated")
    args = parser.parse_args()
    if min(args.tasks, args.tasks_per_node, args.procs, args.repeat) < 1:
        parser.error("--tasks, --tasks-per-node, --procs and --repeat are at least 1")
    for _ in range(args.repeat):
        for design in args.designs:
            print(json.dumps(_run_design(args, design)), flush=True)


if __name__ == "__main__":
    main()
