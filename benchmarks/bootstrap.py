#!/usr/bin/env python3
"""Benchmark: from process start to "cluster verified", on the test cluster.

For 4 nodes x 1 task and 4 nodes x 4 tasks, every task reports the time from its process
start (read from /proc) to the end of bootstrap(), split into interpreter start, imports,
and the bootstrap's phases (resolve, grpc import, server, exchange, verify, barrier), and
its CPU seconds. Beside it, when installed: TensorFlow's way (its SlurmClusterResolver and
a tf.distribute.Server per task: no exchange, no verification) and PyTorch's
(init_process_group("gloo") + barrier, rank 0's node and a fixed port given to every
task). The srun column is the wall time of the whole srun. Needs the test cluster
(scripts/testcluster up) and SLURM_CONF. Prints a Markdown table.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap

# Each task script starts with this: the seconds since the process started (from /proc), and its CPU.
PREAMBLE = textwrap.dedent("""
    import json, os, resource, time
    def since_start():
        ticks = os.sysconf("SC_CLK_TCK")
        start = int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19]) / ticks
        return float(open("/proc/uptime").read().split()[0]) - start
    def cpu():
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime
""")

OURS = PREAMBLE + textwrap.dedent("""
    at_main = since_start()
    t = time.perf_counter()
    from slurm_resolver import bootstrap
    import grpc  # noqa: F401 - counted as import
    imported = time.perf_counter() - t
    b = bootstrap(timeout=120)
    print(json.dumps({"interpreter": at_main, "import": imported, **b.timings, "total": since_start(),
                      "cpu": cpu()}), flush=True)
    b.stop()
""")

THEIRS = PREAMBLE + textwrap.dedent("""
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    os.environ["CUDA_VISIBLE_DEVICES"] = "0"
    at_main = since_start()
    t = time.perf_counter()
    import tensorflow as tf
    imported = time.perf_counter() - t
    t = time.perf_counter()
    port_base = int(os.environ["PORT_BASE"]) + 10 * int(os.environ["SLURM_NODEID"])
    r = tf.distribute.cluster_resolver.SlurmClusterResolver(gpus_per_node=4, gpus_per_task=1, auto_set_gpu=False,
                                                            port_base=port_base)
    spec = r.cluster_spec()
    task_type, task_id = r.get_task_info()
    resolved = time.perf_counter() - t
    t = time.perf_counter()
    server = tf.distribute.Server(spec, job_name=task_type, task_index=task_id, protocol="grpc")
    started = time.perf_counter() - t
    print(json.dumps({"interpreter": at_main, "import": imported, "resolve": resolved, "server": started,
                      "total": since_start(), "cpu": cpu()}), flush=True)
""")

TORCH = PREAMBLE + textwrap.dedent("""
    at_main = since_start()
    t = time.perf_counter()
    import torch.distributed as dist
    imported = time.perf_counter() - t
    t = time.perf_counter()
    dist.init_process_group("gloo", init_method=f"tcp://node1:{os.environ['PORT_BASE']}",
                            rank=int(os.environ["SLURM_PROCID"]), world_size=int(os.environ["SLURM_NTASKS"]))
    dist.barrier()
    print(json.dumps({"interpreter": at_main, "import": imported, "exchange": time.perf_counter() - t,
                      "total": since_start(), "cpu": cpu()}), flush=True)
    dist.destroy_process_group()
""")


def run(code: str, nodes: int, per_node: int, extra_env: dict[str, str] | None = None) -> list[dict[str, float]]:
    import time

    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(code)
    start = time.perf_counter()
    out = subprocess.run(["srun", f"-N{nodes}", f"--ntasks-per-node={per_node}", sys.executable, f.name],
                         capture_output=True, text=True, timeout=600, env={**os.environ, **(extra_env or {})})
    wall = time.perf_counter() - start
    os.unlink(f.name)
    rows = [json.loads(l) for l in out.stdout.splitlines() if l.startswith("{")]
    if len(rows) != nodes * per_node:
        raise SystemExit(f"srun failed:\n{out.stderr[-3000:]}")
    phases = ("resolve", "grpc", "server", "exchange", "verify", "barrier")
    for row in rows:
        row["srun"] = wall
        if "exchange" in row and "resolve" in row:  # ours; verify and barrier only where checked after the table
            row["after import"] = sum(row.get(p, 0.0) for p in phases)  # the bootstrap's own time in this task
    return rows


def main() -> None:
    have_tf = subprocess.run([sys.executable, "-c", "import tensorflow"], capture_output=True).returncode == 0
    have_torch = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True).returncode == 0
    columns = ["interpreter", "import", "resolve", "grpc", "server", "exchange", "verify", "barrier", "after import",
               "total", "cpu", "srun"]
    print("median over tasks, seconds; after import (the bootstrap's own phases), total (process start to cluster "
          "verified) and cpu: the max over tasks\n")
    print("| run | " + " | ".join(columns) + " |\n|---|" + "---|" * len(columns))
    for nodes, per_node in ((4, 1), (4, 4)):
        runs = [("slurm_resolver.bootstrap", run(OURS, nodes, per_node))]
        if have_torch:
            runs.append(("PyTorch gloo init + barrier", run(TORCH, nodes, per_node, {"PORT_BASE": "29555"})))
        if have_tf:
            runs.append(("TensorFlow resolver + Server", run(THEIRS, nodes, per_node, {"PORT_BASE": "27000"})))
        for name, rows in runs:
            cells = []
            for column in columns:
                values = [r[column] for r in rows if column in r]
                value = max(values) if column in ("after import", "total", "cpu", "srun") and values else \
                    statistics.median(values) if values else None
                cells.append("-" if value is None else f"{value:.3f}")
            print(f"| {name}, {nodes}x{per_node} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
