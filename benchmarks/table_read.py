#!/usr/bin/env python3
"""Benchmark: what a task spends reading the job's table, as a real task does (one task a process).

Every task of the bootstrap receives the whole table (every task's port and spare port) and reads it: its
chunks checked against their digests, parsed, every column checked, and the cluster settled with them (the
columns kept as they came: `slurm_resolver.rpc.exchanges.settle`). In ``bootstrap_scale.py`` a process holds
many tasks that share one read (``codec._table`` is cached for the simulation), so this is timed alone here,
uncached, in CPU time (best of ``--repeat``).

    python benchmarks/table_read.py [--tasks 4096 16384] [--repeat 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import time

from slurm_resolver.resolution import resolve
from slurm_resolver.rpc.exchanges import settle
from slurm_resolver.rpc.messages import Failure, Table
from slurm_resolver.rpc.rounds import codec
from slurm_resolver.rpc.simulation.simulate import srun_environ
from slurm_resolver.rpc.wire import unwrap


def measure(tasks: int, repeat: int, reads: int = 20) -> dict[str, float]:
    """The table of ``tasks`` tasks: its size, its chunks, and the least CPU ms of one uncached read."""
    ports = tuple(20000 + rank % 12000 for rank in range(tasks))
    outcome = codec.decision(Failure(), Table(ports, tuple(p + 12000 for p in ports), {}, ()), b"k" * 32)
    messages = codec.encode_answer(outcome, b"n" * 16, 0, lambda header: b"s" * 32)
    answer = codec.decode_answer(unwrap(messages[0])[0], tasks)
    chunks = tuple(bytes(chunk) for chunk in messages[1:])
    cluster = resolve(srun_environ(tasks // 4, 4), resolves=lambda name: True).as_rank(tasks - 1)
    best = float("inf")
    for _ in range(repeat):
        start = time.thread_time()
        for _ in range(reads):
            table = codec._table.__wrapped__(chunks, answer.chunks, answer.total, tasks)  # noqa: SLF001 - uncached
            settle(cluster, table).task(tasks - 1)  # what the task asks of it: its own port
        best = min(best, (time.thread_time() - start) / reads)
    return {"tasks": tasks, "bytes": sum(map(len, chunks)), "chunks": len(chunks), "cpu_ms": round(1000 * best, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tasks", type=int, nargs="+", default=[4096, 16384])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="one JSON object per size")
    args = parser.parse_args()
    rows = [measure(tasks, args.repeat) for tasks in args.tasks]
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return
    print("| tasks | table | chunks | a task's read (CPU ms) |\n|---|---|---|---|")
    for row in rows:
        print(f"| {row['tasks']:,} | {row['bytes']:,} B | {row['chunks']} | {row['cpu_ms']} |")


if __name__ == "__main__":
    main()
