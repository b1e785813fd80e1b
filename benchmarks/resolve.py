#!/usr/bin/env python3
"""Benchmark: resolve a synthetic 4096-node x 4-task srun step, and import the package.

Times what users call: ``SlurmClusterResolver(auto_set_gpu=False).cluster_spec()`` and the
task's place (median of repeats), beside TensorFlow's SlurmClusterResolver on the same
environment when TensorFlow is installed (TensorFlow 2.21 expands host lists in-process
too). The synthetic node names exist nowhere, so name lookups (ours: the task's own node,
and the bind test of its port) are answered as /etc/hosts would answer them, with
127.0.0.1. Prints a Markdown table for benchmarks/README.md.

    python benchmarks/resolve.py [--nodes 4096] [--tasks-per-node 4] [--repeats 51]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
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


def import_ms(repeats: int = 9) -> float:
    code = "import time; t = time.perf_counter(); import slurm_resolver; print((time.perf_counter() - t) * 1000)"
    return statistics.median(float(subprocess.check_output([sys.executable, "-c", code])) for _ in range(repeats))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=4096)
    parser.add_argument("--tasks-per-node", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=51)
    args = parser.parse_args()
    env = synthetic_env(args.nodes, args.tasks_per_node, rank=args.nodes * args.tasks_per_node // 2)
    answer_node_names()
    rows = [("slurm_resolver: SlurmClusterResolver(auto_set_gpu=False).cluster_spec() + task info",
             median_ms(ours(env), args.repeats))]
    tf = tensorflows(env)
    if tf is not None:
        rows.append(("TensorFlow SlurmClusterResolver, same environment", median_ms(tf, max(5, args.repeats // 5))))
    rows.append(("`import slurm_resolver` (fresh interpreter)", import_ms()))
    print(f"{args.nodes} nodes x {args.tasks_per_node} tasks, Python {sys.version.split()[0]}\n")
    print("| what | median (ms) |\n|---|---|")
    for what, ms in rows:
        print(f"| {what} | {ms:.3f} |")


if __name__ == "__main__":
    main()
