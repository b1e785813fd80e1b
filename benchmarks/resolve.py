#!/usr/bin/env python3
"""Benchmark: resolve a synthetic 4096-node x 4-task srun step, beside python-hostlist's expand of its node list.

Times what users call: ``SlurmClusterResolver(auto_set_gpu=False).cluster_spec()`` and the
task's place, and python-hostlist's ``expand_hostlist`` of the same node list (``node[1-4096]``),
alternated sample by sample in one process, in CPU time (``time.process_time``: what other
processes on a shared machine do counts less than in wall time); medians of ``--repeats``, and
their ratio. TensorFlow's SlurmClusterResolver runs on the same environment when TensorFlow is
installed. The synthetic node names exist nowhere, so name lookups (ours: the task's own node,
and the bind test of its port) are answered as /etc/hosts would answer them, with 127.0.0.1.
Prints a Markdown table for benchmarks/README.md.

With ``--code LABEL=DIR`` (a checkout's ``slurm_resolver``, given twice or more), each tree is
measured in a fresh process of its own (``PYTHONPATH``, checked), the trees alternating round
after round (``--rounds``); the table gives each tree's medians over the rounds and the ratio of
each round (within one process, which cancels the machine's drift).

    python benchmarks/resolve.py [--nodes 4096] [--tasks-per-node 4] [--repeats 51]
    python benchmarks/resolve.py --code before=/tmp/old/slurm_resolver --code after=slurm_resolver --rounds 6
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from unittest import mock


def synthetic_env(nodes: int, per_node: int, rank: int) -> dict[str, str]:
    """An srun step's variables: nodes named like a real machine room, block layout."""
    import hostlist as hl

    hostlist = f"node[1-{nodes}]"  # a form TensorFlow's own parser accepts
    total = nodes * per_node
    node = hl.expand_hostlist(hostlist)[rank // per_node]
    return {
        "SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0", "SLURM_PROCID": str(rank),
        "SLURM_LOCALID": str(rank % per_node), "SLURM_NTASKS": str(total), "SLURM_STEP_NUM_TASKS": str(total),
        "SLURM_STEP_NODELIST": hostlist, "SLURM_JOB_NODELIST": hostlist, "SLURM_NODELIST": hostlist,
        "SLURM_STEP_TASKS_PER_NODE": f"{per_node}(x{nodes})", "SLURM_TASKS_PER_NODE": f"{per_node}(x{nodes})",
        "SLURM_NTASKS_PER_NODE": str(per_node), "SLURMD_NODENAME": node,
        "SLURM_DISTRIBUTION": "block",
    }


def median_ms(fn: Callable[[], object], repeats: int) -> float:
    fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def alternated_cpu_ms(fns: list[Callable[[], object]], repeats: int) -> list[float]:
    """The median CPU milliseconds of each of ``fns``, sampled in turn (the order rotating each repeat)."""
    for fn in fns:
        fn()
    samples: list[list[float]] = [[] for _ in fns]
    for repeat in range(repeats):
        for k in range(len(fns)):
            which = (k + repeat) % len(fns)
            start = time.process_time()
            fns[which]()
            samples[which].append((time.process_time() - start) * 1000)
    return [statistics.median(s) for s in samples]


def answer_node_names() -> None:
    """Resolve the synthetic ``nodeN`` names to 127.0.0.1, as an /etc/hosts line would."""
    import socket

    real = socket.getaddrinfo

    def getaddrinfo(host: object, *args: object, **kwargs: object) -> object:
        if isinstance(host, str) and host.startswith("node"):
            host = "127.0.0.1"
        return real(host, *args, **kwargs)  # type: ignore[arg-type]

    socket.getaddrinfo = getaddrinfo  # type: ignore[assignment]


def ours(env: dict[str, str]) -> Callable[[], object]:
    from slurm_resolver import SlurmClusterResolver

    def run() -> object:
        resolver = SlurmClusterResolver(environ=env, auto_set_gpu=False)
        return resolver.cluster_spec(), resolver.get_task_info()

    return run


def python_hostlists(env: dict[str, str]) -> Callable[[], object]:
    """python-hostlist's expansion of the step's node list, the floor of any resolution that reads it."""
    import hostlist

    text = env["SLURM_STEP_NODELIST"]
    return lambda: hostlist.expand_hostlist(text)


def tensorflows(env: dict[str, str]) -> Callable[[], object] | None:
    try:
        from tensorflow.python.distribute.cluster_resolver import slurm_cluster_resolver as tfs
    except ImportError:
        return None
    def run() -> object:
        with mock.patch.dict(os.environ, env):
            # TensorFlow cannot express zero GPUs; 1 per task keeps it off nvidia-smi.
            r = tfs.SlurmClusterResolver(gpus_per_node=4, gpus_per_task=1, auto_set_gpu=False)
            return r.cluster_spec(), r.get_task_info()

    return run


def import_ms(repeats: int = 9, environ: dict[str, str] | None = None) -> float:
    code = "import time; t = time.perf_counter(); import slurm_resolver; print((time.perf_counter() - t) * 1000)"
    return statistics.median(float(subprocess.check_output([sys.executable, "-c", code], env=environ))
                             for _ in range(repeats))


def worker(args: argparse.Namespace) -> None:
    """One tree's round: ours and python-hostlist's, alternated in this process; one JSON line."""
    import slurm_resolver

    env = synthetic_env(args.nodes, args.tasks_per_node, rank=args.nodes * args.tasks_per_node // 2)
    answer_node_names()
    resolution, expansion = alternated_cpu_ms([ours(env), python_hostlists(env)], args.repeats)
    print(json.dumps({"code": slurm_resolver.__file__, "ours": resolution, "hostlist": expansion}))


def compared(args: argparse.Namespace) -> None:
    """The ``--code`` trees, each in fresh processes, alternated round after round."""
    trees = dict(item.split("=", 1) for item in args.code)
    rounds: dict[str, list[dict[str, float]]] = {label: [] for label in trees}
    for _ in range(args.rounds):
        for label, tree in trees.items():
            package = Path(tree).resolve()
            environ = dict(os.environ, PYTHONPATH=str(package.parent))
            out = subprocess.run([sys.executable, __file__, "--worker", "--nodes", str(args.nodes), "--tasks-per-node",
                                  str(args.tasks_per_node), "--repeats", str(args.repeats)],
                                 env=environ, capture_output=True, text=True, check=True).stdout
            row = json.loads(out.splitlines()[-1])
            if Path(row["code"]).parent != package:
                raise SystemExit(f"{label}: imported {row['code']}, not {package}")
            rounds[label].append(row)
    print(f"{args.nodes} nodes x {args.tasks_per_node} tasks, Python {sys.version.split()[0]}, {args.rounds} rounds "
          f"of {args.repeats} alternated samples; CPU ms, median over rounds (min-max)\n")
    print("| code | ours | python-hostlist's expand | ours / expand, by round | median |\n|---|---|---|---|---|")
    for label, rows in rounds.items():
        ratios = [r["ours"] / r["hostlist"] for r in rows]

        def spread(values: list[float]) -> str:
            return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"

        print(f"| {label} | {spread([r['ours'] for r in rows])} | {spread([r['hostlist'] for r in rows])} | "
              f"{', '.join(f'{x:.2f}' for x in ratios)} | **{statistics.median(ratios):.2f}** |")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--nodes", type=int, default=4096)
    parser.add_argument("--tasks-per-node", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=51)
    parser.add_argument("--code", action="append", metavar="LABEL=DIR",
                        help="a slurm_resolver package to measure (twice or more: alternated, each in its own process)")
    parser.add_argument("--rounds", type=int, default=6, help="with --code: rounds of every tree")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    if args.code:
        return compared(args)
    env = synthetic_env(args.nodes, args.tasks_per_node, rank=args.nodes * args.tasks_per_node // 2)
    answer_node_names()
    resolution, expansion = alternated_cpu_ms([ours(env), python_hostlists(env)], args.repeats)
    rows = [("slurm_resolver: SlurmClusterResolver(auto_set_gpu=False).cluster_spec() + task info (CPU)", resolution),
            ("python-hostlist's expand_hostlist of the same node list (CPU, alternated with the row above)", expansion)]
    tf = tensorflows(env)
    if tf is not None:
        rows.append(("TensorFlow SlurmClusterResolver, same environment (wall)",
                     median_ms(tf, max(5, args.repeats // 5))))
    rows.append(("`import slurm_resolver` (fresh interpreter, wall)", import_ms()))
    print(f"{args.nodes} nodes x {args.tasks_per_node} tasks, Python {sys.version.split()[0]}; "
          f"ours / python-hostlist's expand: {resolution / expansion:.2f}\n")
    print("| what | median (ms) |\n|---|---|")
    for what, ms in rows:
        print(f"| {what} | {ms:.3f} |")


if __name__ == "__main__":
    main()
