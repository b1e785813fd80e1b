#!/usr/bin/env python3
"""Benchmark: the Python bytecodes a task runs in the simulated bootstrap, counted, not timed.

A count does not move with the machine's load, so that two versions of the code compare to the
instruction on a noisy machine, where CPU times of the same run differ by a fifth
(`bootstrap_scale.py` measures time; this says where it goes). Every task runs the real protocol
code on one event loop and the in-process network (``bootstrap_scale.py --network local``); every
bytecode executed while they bootstrap is counted by the function that ran it (``sys.settrace``
with opcode events: slow, so a few hundred tasks are enough, and the count a task is the same at
any size within a few percent).

    python benchmarks/bootstrap_bytecodes.py [--nodes 128] [--tasks-per-node 4] [--top 25] [--json]

To compare two versions, run it in each checkout (``PYTHONPATH=<checkout>``) and compare the
totals, then the functions.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from types import FrameType
from typing import Any

from slurm_resolver.rpc.simulation.simulate import simulate


def count(nodes: int, per_node: int) -> Counter[tuple[str, str]]:
    """Bytecodes run while ``nodes`` x ``per_node`` simulated tasks bootstrap, by (file, function)."""
    simulate(16, per_node, timeout=120)  # imports and first-call caches out of the count
    counts: Counter[tuple[str, str]] = Counter()

    def calls(frame: FrameType, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        frame.f_trace_lines = False
        key = (os.path.basename(frame.f_code.co_filename), frame.f_code.co_name)

        def opcodes(frame: FrameType, event: str, arg: Any) -> Any:
            if event == "opcode":
                counts[key] += 1
            return opcodes
        return opcodes

    sys.settrace(calls)
    try:
        simulate(nodes, per_node, timeout=600)  # slow under the trace: no round may time out
    finally:
        sys.settrace(None)
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--nodes", type=int, default=128)
    parser.add_argument("--tasks-per-node", type=int, default=4)
    parser.add_argument("--top", type=int, default=25, help="functions to list (default: 25)")
    parser.add_argument("--json", action="store_true", help="one JSON object: the total and every function")
    args = parser.parse_args()
    ranks = args.nodes * args.tasks_per_node
    counts = count(args.nodes, args.tasks_per_node)
    total = sum(counts.values())
    if args.json:
        print(json.dumps({"network": "local", "ranks": ranks, "bytecodes_per_rank": round(total / ranks, 1),
                          "functions": {f"{f}:{n}": round(c / ranks, 1) for (f, n), c in counts.most_common()}}))
        return
    print(f"in-process network, {ranks} ranks: {total / ranks:,.0f} bytecodes a rank\n")
    print("| bytecodes a rank | share | function |\n|---|---|---|")
    for (file, name), number in counts.most_common(args.top):
        print(f"| {number / ranks:,.1f} | {100 * number / total:.1f}% | {file}:{name} |")


if __name__ == "__main__":
    main()
