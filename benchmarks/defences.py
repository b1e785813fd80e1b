#!/usr/bin/env python3
"""Benchmark: what each defence of the bootstrap costs at scale, over real sockets.

Runs the bootstrap over real gRPC (`slurm_resolver.rpc.simulation.loopback.over_grpc`: 16,384 tasks in 16
processes by default, each simulated node on its own loopback address, tasks proving themselves
with a secret) with every defence on, as shipped, and alternately with one of them turned off, and
prints for each run the CPU a task, the system calls a task (counted by the kernel, `perf stat -e
raw_syscalls:sys_enter`, where perf runs), and what each defence did in that run:

- ``caller-bounds``: the bounds every call meets as it opens, per caller (`callers.Bound`: calls at
  once, calls not yet proven); callers are told apart (the kernel asked who owns one socket) only
  once a bound is contested;
- ``shedder``: the per-process thread that counts the process's open files every half second (two
  system calls) and asks the kernel for its ports' connections only once they grew past a slack
  (`slurm_resolver.rpc.network.connections`);
- ``first-message``: the deadline on a call's first message (`service._Due`, a timer a call, held
  only while a caller's share of waiting calls is full);
- ``unproven-wait``: a first-round call's server still silent after `uplink.unproven_wait()` asked
  who it is, and the search beside the call where it does not prove itself.

Turning one off means: its code does nothing (a bound takes every call, the shedder thread never
starts, a first message has no deadline, a silent server is never asked who it is nor searched around).

    python benchmarks/defences.py [--ranks 16384] [--procs 16] [--repeat 3] [--off shedder ...]

Prints one JSON line per run:
{"off": "shedder", "ranks": 16384, "ok": true, "wall_s": ..., "cpu_ms_per_rank": ..., "syscalls_per_rank": ...,
 "did": {"shedder_checks": ..., "table_reads": ..., ...}}
"""

from __future__ import annotations

import argparse
import atexit
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

DEFENCES = ("caller-bounds", "shedder", "first-message", "unproven-wait")
COUNTS = "SR_DEFENCE_COUNTS"
"""The folder where each process of a run writes what the defences did (read by the parent)."""
OFF = "SR_DEFENCE_OFF"
"""The defence turned off in a run ('' for none)."""

_did: collections.Counter[str] = collections.Counter()


def _count(owner: Any, name: str, key: str) -> None:
    """Count the calls of ``owner.name`` under ``key``."""
    original = getattr(owner, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        _did[key] += 1
        return original(*args, **kwargs)

    setattr(owner, name, counted)


def prepare() -> None:
    """In each process of a run: turn off the defence named in `OFF`, and count what the others do."""
    from slurm_resolver.rpc.network import callers, connections, service
    from slurm_resolver.rpc.rounds import uplink

    off = os.environ.get(OFF, "")
    if off == "caller-bounds":
        callers.Bound.take = lambda self, peer: None  # type: ignore[method-assign]
        callers.Bound.give = lambda self, peer: None  # type: ignore[method-assign]
    if off == "shedder":
        connections._SHEDDER.watch = lambda port: None  # type: ignore[method-assign]
        connections._SHEDDER.forget = lambda port: None  # type: ignore[method-assign]
    if off == "first-message":
        service._Due._due = lambda self: None  # type: ignore[method-assign]
    if off == "unproven-wait":
        uplink.unproven_wait = lambda timeout: 10 * timeout
    _count(connections, "around", "kernel_asked_for_a_ports_connections")
    connections._SHEDDER._sockets = connections.around
    _count(callers, "owner", "kernel_asked_for_a_sockets_owner")
    _count(connections.Shedder, "check", "shedder_checks")
    _count(connections, "lowest_free", "open_file_counts")
    connections._SHEDDER._count = connections.lowest_free
    _count(callers.Callers, "of", "callers_told_apart")
    _count(service._Due, "_due", "first_message_deadlines_due")
    _count(uplink.Uplink, "_search", "searches")
    _count(uplink.Uplink, "_doubt", "silent_servers_asked")
    folder = os.environ[COUNTS]
    atexit.register(lambda: Path(folder, f"{os.getpid()}.json").write_text(json.dumps(dict(_did))))


def _run(args: argparse.Namespace, off: str) -> dict[str, Any]:
    """One run (a child process of its own, under perf where perf runs), its figures."""
    folder = tempfile.mkdtemp(prefix="defences-")
    shape = f"{args.ranks // args.tasks_per_node}, {args.tasks_per_node}, procs={args.procs}, timeout={args.timeout}"
    code = (f"import sys, json; sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
            "from slurm_resolver.rpc.simulation.loopback import over_grpc\n"
            "if __name__ == '__main__':\n"
            f"    run = over_grpc({shape}, prepare='defences:prepare')\n"
            "    print('RUN ' + json.dumps({'ok': run.ok, 'wall_s': run.wall_s, 'cpu_s': run.cpu_s, "
            "'errors': list(run.errors.values())[:1]}))\n")
    script = Path(folder, "run.py")
    script.write_text(code)
    command = [sys.executable, str(script)]
    perf = shutil.which("perf") if not args.no_perf else None
    if perf:
        command = [perf, "stat", "-x", ",", "-e", "raw_syscalls:sys_enter", "--", *command]
    env = {**os.environ, COUNTS: folder, OFF: off}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=args.timeout + 600)
    line = next((x for x in done.stdout.splitlines() if x.startswith("RUN ")), None)
    if line is None:
        raise SystemExit(f"the run with {off or 'nothing'} off failed:\n{done.stderr[-3000:]}")
    run = json.loads(line[4:])
    syscalls = next((int(m.group(1)) for m in re.finditer(r"^(\d+),,raw_syscalls", done.stderr, re.M)), None)
    did: collections.Counter[str] = collections.Counter()
    for path in Path(folder).glob("*.json"):
        did.update(json.loads(path.read_text()))
    shutil.rmtree(folder, ignore_errors=True)
    row = {"off": off or "none", "ranks": args.ranks, "procs": args.procs, "ok": run["ok"],
           "wall_s": round(run["wall_s"], 1), "cpu_ms_per_rank": round(1000 * run["cpu_s"] / args.ranks, 2),
           "syscalls_per_rank": None if syscalls is None else round(syscalls / args.ranks, 1),
           "did": dict(sorted(did.items()))}
    if not run["ok"]:
        row["error"] = run["errors"][:1]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--ranks", type=int, default=16384)
    parser.add_argument("--tasks-per-node", type=int, default=4)
    parser.add_argument("--procs", type=int, default=16)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--repeat", type=int, default=3, help="rounds; each runs every mode once, alternated")
    parser.add_argument("--off", nargs="+", choices=DEFENCES, default=list(DEFENCES),
                        help="the defences to price (each run turns one off)")
    parser.add_argument("--no-perf", action="store_true", help="do not count system calls with perf")
    args = parser.parse_args()
    print(f"network: real gRPC on loopback addresses, {args.procs} processes; {args.ranks} ranks, "
          f"{args.tasks_per_node} tasks a node", file=sys.stderr)
    for _ in range(args.repeat):
        for off in ["", *args.off]:
            print(json.dumps(_run(args, off)), flush=True)


if __name__ == "__main__":
    main()
