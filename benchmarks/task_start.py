#!/usr/bin/env python3
"""Benchmark: what a task of an srun step spends, in CPU, from `python` to a verified cluster, beside the floor.

Every task of ``srun -N<nodes> --ntasks-per-node=<per node>`` on the test cluster reports its CPU
seconds (its own and its threads', gRPC's included: ``time.process_time()``) at each phase's end:

- ``interpreter``: Python's start, up to the script's first line (``site``, the venv's ``.pth`` files);
- ``grpc import``: ``import grpc`` and ``grpc.aio`` (with the settings every task's gRPC gets, written
  into the step's environment beforehand, so that both rows import it alike);
- ``our import``: ``from slurm_resolver import bootstrap``;
- ``resolve``, ``grpc``, ``server``, ``exchange`` (``verify`` and ``barrier`` where they run): the
  bootstrap's own laps (``Bootstrapped.timings``), timed in CPU as well by the task script; what the
  bootstrap imports lazily lands in the lap that imports it;
- ``total``: at the end of ``bootstrap()``, the cluster verified; ``children``: the CPU of the
  processes the task ran and waited for, up to then (not in ``total``).

The floor, in the same step shape: ``python``, ``import grpc``, and bare gRPC asyncio making the
bootstrap's calls with no code of slurm_resolver (the design of ``benchmarks/grpc_floor.py``:
every task serves; a node's tasks call its leader, which asks each of them who they are over a
connection of its own, and calls its parent leader in the tree of fan-out 8 once its node and
child nodes are in; every held call is answered when the answer comes down). gRPC runs with the
bootstrap's server and channel options, written into the task's script as values. The floor's
addresses are given to it (no resolution): a leader listens at a fixed port on its node's address,
the other tasks on a port of their own, which they tell their leader.

Each ``--code`` tree (a checkout's ``slurm_resolver``) is copied and byte-compiled as pip installs
it (``--source``: not compiled, and ``PYTHONDONTWRITEBYTECODE=1``: every task compiles every module,
as an editable checkout does where bytecode is not written); its tasks import it from there
(``PYTHONPATH``), which every task checks. Runs alternate: floor, then every tree, ``--rounds`` times.
Prints one Markdown table of CPU milliseconds a task (median over every task of every round, and the
max), each round's total above the floor's and its ratio to it, then ``--json`` rows of every task if
asked. ``--instructions`` runs every task under callgrind (about 50 times slower) and adds the
instructions of its whole process: repeatable where CPU time on a shared machine is not. Needs the
test cluster and SLURM_CONF.

    SLURM_CONF=... .venv/bin/python benchmarks/task_start.py --code before=/tmp/old/slurm_resolver \
        --code after=slurm_resolver --rounds 5 [--instructions]
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

REPOSITORY = Path(__file__).resolve().parent.parent
PORT_BASE = 15700
"""A floor leader's port on its node's address (the other tasks bind a free port)."""

# Each task script starts with this: its CPU so far (the interpreter's start) and the seconds since the
# process started (from /proc). Nothing is imported here that Python's start has not loaded already.
PREAMBLE = textwrap.dedent("""
    import time
    at_main = time.process_time()
    import os
    def since_start():
        ticks = os.sysconf("SC_CLK_TCK")
        start = int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19]) / ticks
        return float(open("/proc/uptime").read().split()[0]) - start
    def children():
        import resource
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime
    t = time.process_time()
    import grpc
    from grpc import aio
    grpc_import = time.process_time() - t
""")

OURS = PREAMBLE + textwrap.dedent("""
    import sys
    modules = len(sys.modules)
    t = time.process_time()
    from slurm_resolver import bootstrap
    our_import = time.process_time() - t
    from slurm_resolver.rpc import bootstrap as _module
    laps, last, timed = {}, [time.process_time()], _module._Laps.__call__
    def lap(self, phase):  # the bootstrap's laps, in CPU too
        timed(self, phase)
        now = time.process_time()
        laps[phase], last[0] = now - last[0], now
    _module._Laps.__call__ = lap
    b = bootstrap(timeout=120)
    total = time.process_time()
    modules = len(sys.modules) - modules
    import json, slurm_resolver
    print(json.dumps({"interpreter": at_main, "grpc import": grpc_import, "our import": our_import, **laps,
                      "total": total, "children": children(), "wall": since_start(),
                      "modules": modules, "code": slurm_resolver.__file__, "auth": b.authenticated}), flush=True)
    b.stop()
""")

FLOOR = PREAMBLE + textwrap.dedent("""
    import asyncio, sys
    t = time.process_time()
    addresses = os.environ["FLOOR_ADDRESSES"].split(",")  # node n's address
    parents = [int(p) for p in os.environ["FLOOR_PARENTS"].split(",")]  # node n's parent node, -1 at the root
    per_node, node, local = int(os.environ["FLOOR_PER_NODE"]), int(os.environ["SLURM_NODEID"]), \\
        int(os.environ["SLURM_LOCALID"])
    below = sum(p == node for p in parents)  # child nodes
    table = bytes(6 * len(addresses) * per_node)  # what comes down: 6 bytes a task, as the bootstrap's table

    async def main():
        held, checks, arrived = [], [], asyncio.Event()
        loop = asyncio.get_running_loop()
        async def call(address, port, message, ready):
            channel = aio.insecure_channel(f"ipv4:{address}:{port}", options=CHANNEL_OPTIONS)
            return await channel.unary_unary("/floor/Call")(message, timeout=120, wait_for_ready=ready)
        async def answer(request, context):
            if request.startswith(b"who"):
                return b"me"
            if request.startswith(b"mate "):  # a task of the node: asked who it is over a connection of its own
                checks.append(asyncio.ensure_future(call(addresses[node], int(request[5:]), b"who", False)))
            answered = loop.create_future()
            held.append(answered)
            if len(held) == per_node - 1 + below:
                arrived.set()
            return await answered
        class Handler(grpc.GenericRpcHandler):
            def service(self, details):
                return grpc.unary_unary_rpc_method_handler(answer)
        server = aio.server(options=SERVER_OPTIONS, maximum_concurrent_rpcs=MOST_RPCS)
        port = server.add_insecure_port(f"{addresses[node]}:{PORT_BASE if local == 0 else 0}")
        server.add_generic_rpc_handlers((Handler(),))
        await server.start()
        if local:
            await call(addresses[node], PORT_BASE, b"mate %d" % port, True)
        else:
            if per_node - 1 + below:
                await arrived.wait()
            await asyncio.gather(*checks)
            down = table if parents[node] < 0 else await call(addresses[parents[node]], PORT_BASE, b"node", True)
            for answered in held:
                answered.set_result(down)
        return server
    loop = asyncio.new_event_loop()
    server = loop.run_until_complete(main())
    total = time.process_time()
    exchange = total - t
    import json
    print(json.dumps({"interpreter": at_main, "grpc import": grpc_import, "exchange": exchange, "total": total,
                      "children": children(), "wall": since_start()}), flush=True)
    loop.run_until_complete(asyncio.sleep(1.0))  # answers in flight reach their callers
""")

PHASES = ("interpreter", "grpc import", "our import", "resolve", "grpc", "server", "exchange", "verify", "barrier",
          "total", "children")

# --instructions: each task runs under callgrind, which counts the instructions of its whole process (its JSON
# line gets them): repeatable where CPU time is not, on a machine shared with others. Slow (about 50 times).
COUNTED = textwrap.dedent("""
    import json, re, subprocess, sys
    done = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
                           *sys.argv[1:]], capture_output=True, text=True)
    count = re.search(r"Collected : ([0-9]+)", done.stderr)
    for line in done.stdout.splitlines():
        print(json.dumps({**json.loads(line), "instructions": int(count[1])}) if line.startswith("{") and count
              else line)
    if done.returncode:
        print(done.stderr[-3000:], file=sys.stderr)
    sys.exit(done.returncode)
""")


def _floor_values() -> str:
    """The bootstrap's gRPC settings as literals for the floor's script (which imports nothing of ours)."""
    import resource

    from slurm_resolver.rpc.network.grpc_network import CHANNEL_OPTIONS
    from slurm_resolver.rpc.network.server import MOST_RPCS, server_options

    files = resource.getrlimit(resource.RLIMIT_NOFILE)[1]  # the bootstrap raises the limit to the hard one
    return (f"CHANNEL_OPTIONS = {CHANNEL_OPTIONS!r}\nSERVER_OPTIONS = {server_options(files)!r}\n"
            f"MOST_RPCS = {MOST_RPCS!r}\nPORT_BASE = {PORT_BASE!r}\n")


def _nodes(count: int) -> list[str]:
    """The cluster's first ``count`` nodes (in Slurm's order): every step of the run is given them."""
    names = subprocess.run(["sinfo", "-h", "-N", "-o", "%N"], capture_output=True, text=True, check=True).stdout
    found = sorted(dict.fromkeys(names.split()), key=lambda n: (n.rstrip("0123456789"), len(n), n))
    if len(found) < count:
        raise SystemExit(f"the cluster has {len(found)} nodes, not {count}")
    return found[:count]


def _step_environment(nodes: list[str]) -> dict[str, str]:
    """gRPC's settings of every task (as `grpc_module()` writes them), and the floor's addresses."""
    import socket

    from slurm_resolver.rpc.network.server import GRPC_DEFAULTS
    from slurm_resolver.rpc.tree import DEFAULT_FANOUT, Tree

    tree = Tree(len(nodes), DEFAULT_FANOUT)
    parents = [tree.parent(n) for n in range(len(nodes))]
    return {**{k: os.environ.get(k, v) for k, v in GRPC_DEFAULTS.items()},
            "FLOOR_ADDRESSES": ",".join(socket.gethostbyname(n) for n in nodes),
            "FLOOR_PARENTS": ",".join(str(-1 if p is None else p) for p in parents)}


def _prepare(label: str, tree: Path, into: Path, source: bool) -> Path:
    """A copy of the package ``tree`` under ``into``/``label``, byte-compiled unless ``source``."""
    root = into / label
    shutil.copytree(tree, root / "slurm_resolver", ignore=shutil.ignore_patterns("__pycache__"))
    if not source and not compileall.compile_dir(root / "slurm_resolver", quiet=1):
        raise SystemExit(f"{tree}: does not compile")
    return root


def _srun(code: str, nodes: list[str], per_node: int, env: dict[str, str],
          counted: str | None = None) -> tuple[list[dict[str, Any]], float]:
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(code)
    start = time.perf_counter()
    try:
        out = subprocess.run(["srun", f"-N{len(nodes)}", "-w", ",".join(nodes), f"--ntasks-per-node={per_node}",
                              sys.executable, *([counted] if counted else []), f.name],
                             capture_output=True, text=True, timeout=1800 if counted else 600, env=env, cwd="/")
    finally:
        os.unlink(f.name)
    wall = time.perf_counter() - start
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    if len(rows) != len(nodes) * per_node:
        raise SystemExit(f"srun failed ({len(rows)} of {len(nodes) * per_node} tasks reported):\n{out.stderr[-3000:]}")
    return rows, wall


def _cells(rows: list[dict[str, Any]]) -> list[str]:
    """Per phase: the median and the max over tasks, in ms of CPU."""
    cells = []
    for phase in PHASES:
        values = [1000 * r[phase] for r in rows if phase in r]
        cells.append(f"{statistics.median(values):.0f} ({max(values):.0f})" if values else "-")
    return cells


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--code", action="append", metavar="LABEL=DIR",
                        help="a slurm_resolver package directory to measure (default: this checkout's)")
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--per-node", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--source", action="store_true", help="no bytecode: every task compiles our modules")
    parser.add_argument("--json", action="store_true", help="then every task's row")
    parser.add_argument("--instructions", action="store_true",
                        help="each task under callgrind: the instructions of its whole process too (slow)")
    args = parser.parse_args()
    trees = dict(c.split("=", 1) for c in args.code or [f"slurm_resolver={REPOSITORY / 'slurm_resolver'}"])
    nodes = _nodes(args.nodes)
    base = {**os.environ, **_step_environment(nodes), "FLOOR_PER_NODE": str(args.per_node)}
    if args.source:
        base["PYTHONDONTWRITEBYTECODE"] = "1"
    floor = FLOOR.replace("import asyncio, sys\n", "import asyncio, sys\n" + _floor_values(), 1)
    results: dict[str, list[dict[str, Any]]] = {"floor": [], **{label: [] for label in trees}}
    walls: dict[str, list[float]] = {label: [] for label in results}
    with tempfile.TemporaryDirectory() as scratch:
        roots = {label: _prepare(label, Path(tree), Path(scratch), args.source) for label, tree in trees.items()}
        counted = None
        if args.instructions:
            counted = str(Path(scratch) / "counted.py")
            Path(counted).write_text(COUNTED)
        for _ in range(args.rounds):
            runs = [("floor", floor, base)] + [(label, OURS, {**base, "PYTHONPATH": str(root)})
                                               for label, root in roots.items()]
            for label, code, env in runs:
                rows, wall = _srun(code, nodes, args.per_node, env, counted)
                if label != "floor" and any(not r["code"].startswith(str(roots[label])) for r in rows):
                    raise SystemExit(f"{label}: a task imported {rows[0]['code']}, not the tree given")
                results[label] += rows
                walls[label].append(wall)
                cpu = statistics.median(r["total"] for r in rows)
                print(f"# {label}: srun {wall:.2f} s, total CPU median {cpu:.3f} s", file=sys.stderr, flush=True)
    print(f"CPU ms a task, median (max) over {args.rounds} x {args.nodes}x{args.per_node} tasks, "
          f"{'source only' if args.source else 'bytecode cached'}; wall: srun's, median of rounds\n")
    print("| run | " + " | ".join(PHASES) + " | modules | process start to verified (s) | srun (s) |")
    print("|---|" + "---|" * (len(PHASES) + 3))
    for label, rows in results.items():
        modules = statistics.median(r["modules"] for r in rows) if "modules" in rows[0] else None
        print(f"| {label} | " + " | ".join(_cells(rows)) + f" | {'-' if modules is None else f'{modules:.0f}'} | "
              f"{statistics.median(r['wall'] for r in rows):.2f} ({max(r['wall'] for r in rows):.2f}) | "
              f"{statistics.median(walls[label]):.2f} |")
    print("\ntotal CPU ms a task, median of each round (the machine's speed drifts within a run), above the "
          "floor's of the same round, and its ratio to it:")
    tasks = args.nodes * args.per_node
    totals = {label: [1000 * statistics.median(r["total"] for r in rows[i:i + tasks])
                      for i in range(0, len(rows), tasks)] for label, rows in results.items()}
    for label, medians in totals.items():
        above = [m - f for m, f in zip(medians, totals["floor"])]
        ratios = [m / f for m, f in zip(medians, totals["floor"])]
        print(f"- {label}: " + ", ".join(f"{m:.0f}" for m in medians) + ("" if label == "floor" else
              f"; above the floor: {statistics.median(above):.0f} (" + ", ".join(f"{a:.0f}" for a in above) + ")"
              f"; of the floor: {statistics.median(ratios):.2f} (" + ", ".join(f"{x:.2f}" for x in ratios) + ")"))
    if args.instructions:
        print("\ninstructions a task (whole process, millions), median of each round, and its ratio to the floor's:")
        counts = {label: [statistics.median(r["instructions"] for r in rows[i:i + tasks]) / 1e6
                          for i in range(0, len(rows), tasks)] for label, rows in results.items()}
        for label, medians in counts.items():
            ratios = [m / f for m, f in zip(medians, counts["floor"])]
            print(f"- {label}: " + ", ".join(f"{m:.0f}" for m in medians) + ("" if label == "floor" else
                  f"; of the floor: {statistics.median(ratios):.2f} (" + ", ".join(f"{x:.2f}" for x in ratios) + ")"))
    proofs = {r["auth"] for rows in results.values() for r in rows if "auth" in r}
    print(f"\ncalls proven by: {', '.join(sorted(proofs))}")
    if args.json:
        for label, rows in results.items():
            for row in rows:
                print(json.dumps({"run": label, **row}))


if __name__ == "__main__":
    main()
