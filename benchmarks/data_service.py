#!/usr/bin/env python3
"""Benchmark: elements/s that one trainer receives through the tf.data service on Slurm.

One trainer reads N elements, in batches of 32, of an endless pipeline whose map is
CPU-heavy (``--work`` rounds of a 32x32 matrix product per element), through the service
with 1, 2 and 3 data workers, and, to compare, running the same pipeline itself. Every task runs TensorFlow on
one thread, so that a data worker is one core's worth of preprocessing. Every run is a real job on the
test cluster (scripts/testcluster up; SLURM_CONF set): the module
``slurm_resolver.training.data_service`` under srun. Prints a Markdown table.

    python benchmarks/data_service.py [--elements 3000] [--work 40]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile


def rate(workers: int, mode: str, elements: int, work: int) -> float:
    tasks = workers + 2
    jobs = f"data_worker={workers},dispatcher=1,trainer=1"
    out = subprocess.run(["srun", f"-N{min(tasks, 4)}", f"-n{tasks}", sys.executable, "-m",
                          "slurm_resolver.training.data_service", "--jobs", jobs, "--modes", mode,
                          "--elements", str(elements), "--work", str(work), "--threads", "1", "--batch", "32"],
                         capture_output=True, text=True, timeout=600,
                         cwd=tempfile.mkdtemp(prefix="data-service-bench-"))  # the dispatcher's work_dir goes there
    found = re.search(rf"{mode}: \d+ elements in [\d.]+ s \((\d+)/s\)", out.stdout)
    if not found:
        raise SystemExit(f"no rate in the output:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return float(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elements", type=int, default=3000)
    parser.add_argument("--work", type=int, default=40)
    args = parser.parse_args()
    print(f"{args.elements} elements, {args.work} rounds of work each\n")
    print("| pipeline | data workers | elements/s |\n|---|---|---|")
    print(f"| in the trainer (no service) | - | {rate(1, 'local', args.elements, args.work):.0f} |", flush=True)
    for workers in (1, 2, 3):
        print(f"| tf.data service | {workers} | {rate(workers, 'train', args.elements, args.work):.0f} |", flush=True)


if __name__ == "__main__":
    main()
