#!/usr/bin/env python3
"""Benchmark: what one task spends when a burst of deaths reaches it, through the real code of failure detection.

A killed process of 1,024 tasks on 256 nodes is heard of by every living task of the job: each hears the deaths
its watchers declared (one rank a reason, a different watcher each), in events of up to `MOST_NEWS` reasons. Here
one task hears ``--deaths`` such deaths in full events, as its call up brings them: each event decoded
(`decode_event`), each death recorded and passed on (`Deaths.heard` where the code has it, else
`Deaths.declare`), and, for a leader, the news told to each of its ``--below`` calls below written as the events
they carry (`gathered`, then `encode_event`, of the news `merged` where the code merges it: once for identical
news where the code writes it once, `Watch._event`). ``--callback``: a callback hears every death
(`Bootstrapped.on_failure`), as `bootstrap_scale.py`'s tasks do.

Each ``--code`` tree runs in a process of its own (``PYTHONPATH``); runs alternate between trees. Prints CPU ms a
task (best of ``--repeat`` runs of ``--tasks`` tasks) for a plain task and a leader, with and without a callback;
``--instructions`` counts instructions under callgrind instead (repeatable where CPU time on a shared machine is
not; slow).

    python benchmarks/death_burst.py --code before=/tmp/old --code after=. [--instructions]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent

TASK = textwrap.dedent("""
    import asyncio, sys, time
    import slurm_resolver
    from slurm_resolver.faults import Cause
    from slurm_resolver.rpc.detection.beats import decode_event, encode_event
    from slurm_resolver.rpc.detection import deaths as deaths_module
    from slurm_resolver.rpc.detection.deaths import Deaths, gathered
    from slurm_resolver.rpc.messages import MOST_NEWS, News

    deaths, below, callback, tasks, repeat, world = (int(a) for a in sys.argv[1:7])
    HEARD = hasattr(Deaths, "heard")
    merged = getattr(deaths_module, "merged", lambda news: news)
    events = []
    for first in range(0, deaths, MOST_NEWS):
        news = [News((world // 16 + 4 * r,), f"worker:{world // 16 + 4 * r} (rank {world // 16 + 4 * r}) on node"
                     f"{world // 64 + r} died: its connection to rank {8 * (r % 64)} closed", cause=Cause.CRASHED)
                for r in range(first, min(first + MOST_NEWS, deaths))]
        events.append(encode_event(news))

    async def task():
        d = Deaths(world - 1, lambda rank: f"node{rank // 4}")
        for call in range(below):
            d.below[call] = asyncio.Queue()
        if callback:
            d.add_callback(lambda rank, fault: None)
        last = ((), b"")
        for data in events:
            for died in decode_event(data, world).died:
                if HEARD:
                    d.heard(died, "reported dead", from_above=True)
                else:
                    d.declare(list(died.failed), died.fault("reported dead"), from_above=True)
            for queue in d.below.values():
                while not queue.empty():
                    news = gathered(queue.get_nowait(), queue)
                    told, _ = last
                    if not HEARD or len(told) != len(news) or any(a is not b for a, b in zip(told, news)):
                        last = (tuple(news), encode_event(merged(news)))

    async def main():
        best = float("inf")
        for _ in range(repeat):
            start = time.process_time()
            for _ in range(tasks):
                await task()
            best = min(best, (time.process_time() - start) / max(tasks, 1))
        print(best, slurm_resolver.__file__)

    asyncio.run(main())
""")


def measure(tree: str, deaths: int, below: int, callback: bool, tasks: int, repeat: int, world: int,
            instructions: bool) -> float:
    """CPU ms a task (or millions of instructions a task, ``instructions``) of ``tree``'s code."""
    env = {**os.environ, "PYTHONPATH": tree}
    args = [str(deaths), str(below), str(int(callback)), str(tasks), str(repeat), str(world)]
    where = "/"  # `python -c` puts its working directory first on the path: none that holds a slurm_resolver
    if not instructions:
        done = subprocess.run([sys.executable, "-c", TASK, *args], env=env, capture_output=True, text=True, check=True,
                              cwd=where)
        best, imported = done.stdout.split()
        assert imported.startswith(tree), f"{tree}'s code was to run, not {imported}"
        return 1000 * float(best)

    def counted(task_count: int) -> int:
        done = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-c",
                               TASK, *args[:3], str(task_count), "1", args[5]], env=env, capture_output=True,
                              text=True, check=True, cwd=where)
        found = re.search(r"Collected : (\d+)", done.stderr)
        assert found, done.stderr[-2000:]
        return int(found.group(1))

    return (counted(tasks) - counted(0)) / tasks / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--code", action="append", metavar="LABEL=DIR",
                        help="a directory holding a slurm_resolver package (default: this checkout)")
    parser.add_argument("--deaths", type=int, default=208, help="deaths heard, one rank a reason (default: 208)")
    parser.add_argument("--below", type=int, default=8, help="a leader's calls below (default: 8)")
    parser.add_argument("--world", type=int, default=16384, help="the job's tasks (default: 16,384)")
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=2, help="alternations of the trees (default: 2)")
    parser.add_argument("--instructions", action="store_true", help="instructions under callgrind, not CPU time")
    args = parser.parse_args()
    trees = {label: str(Path(tree).resolve()) for label, tree in
             (c.split("=", 1) for c in args.code or [f"this={REPOSITORY}"])}
    cases = [(0, False), (0, True), (args.below, False), (args.below, True)]
    results: dict[tuple[str, int, bool], list[float]] = {}
    tasks = min(args.tasks, 20) if args.instructions else args.tasks
    for _ in range(1 if args.instructions else args.rounds):
        for label, tree in trees.items():
            for below, callback in cases:
                results.setdefault((label, below, callback), []).append(
                    measure(tree, args.deaths, below, callback, tasks, args.repeat, args.world, args.instructions))
    unit = "M instructions" if args.instructions else "CPU ms"
    print(f"{args.deaths} deaths heard, one rank a reason, in a job of {args.world:,} tasks; {unit} a task")
    print()
    print("| code | a task | a task, a callback | a leader of " f"{args.below} calls below | the leader, a callback |")
    print("|---|---|---|---|---|")
    for label in trees:
        cells = [f"{min(results[(label, below, callback)]):.2f}" for below, callback in cases]
        print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
