"""The bootstrap at scale: 1,024 tasks in one process through the real protocol code, and 256 over
real gRPC in several processes (each simulated node on its own loopback address)."""

from __future__ import annotations

import tracemalloc

import pytest

from slurm_resolver.resolution import resolve
from slurm_resolver.rpc.simulation.loopback import over_grpc
from slurm_resolver.rpc.simulation.simulate import simulate, srun_environ
from slurm_resolver.rpc.tree import DEFAULT_FANOUT
from slurm_resolver.rpc.wire import CHUNK


def test_1024_tasks_agree_within_the_bounds() -> None:
    nodes, per_node = 256, 4
    run = simulate(nodes, per_node, timeout=60, keep=True)
    assert run.ok, run.errors
    tables = {tuple(r.cluster.bound_ports or ()) for r in run.results if r}
    assert len(tables) == 1 and len(next(iter(tables))) == 1024
    assert len({r.cluster.spec().to_json() for r in run.results[::97] if r}) == 1
    # No server hears from more than its node's tasks, its children and the one peer that checks it.
    assert run.max_connections_one_server <= (per_node - 1) + DEFAULT_FANOUT + 1
    # The largest message is one chunk; no server sends more than one table to each of its callers.
    table_bytes = 1024 * 8 + 200
    assert run.largest_message <= table_bytes
    assert run.max_bytes_sent_by_one_server <= (per_node - 1 + DEFAULT_FANOUT) * 2 * table_bytes
    assert run.wall_s < 30


def test_gpus_bound_per_task_are_parsed_once_for_every_task_of_the_process() -> None:
    """As on GPU nodes with ``--gpus-per-task``: every task reports its GPU, and the table carries one list a
    rank. The tasks of one process share its parse; each parsing the whole table made the simulation
    quadratic (16,384 tasks: 387 s and 24 GB)."""
    environ = {**srun_environ(128, 8), "CUDA_VISIBLE_DEVICES": "0", "SLURM_GPUS_PER_TASK": "1"}
    run = simulate(128, 8, timeout=60, keep=True, cluster=resolve(environ, resolves=lambda name: True))
    assert run.ok, run.errors
    clusters = [r.cluster for r in run.results if r]
    shared = clusters[1].reported_gpus  # the table every task but the root (which decided it) read
    assert len(clusters) == 1024 and all(c.reported_gpus is shared for c in clusters[1:])
    assert clusters[7].task(1000).gpus == ("0",) and len(clusters[0].reported_gpus or {}) == 1024


def _peak_bytes_a_task(nodes: int, per_node: int, environ: dict[str, str]) -> float:
    """The most memory the simulated bootstrap held at once (tracemalloc), over its tasks."""
    cluster = resolve({**srun_environ(nodes, per_node), **environ}, resolves=lambda name: True)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        run = simulate(nodes, per_node, timeout=60, cluster=cluster)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert run.ok, run.errors
    return peak / run.ranks


def test_a_simulated_task_holds_a_bounded_memory_whatever_the_size() -> None:
    """What lets 524,288 tasks bootstrap in one process (benchmarks/README.md): about 15 kB a task at the
    peak, when every task waits for the table, the same at 512 and 2,048 tasks. GPUs bound per task (the
    table then carries a list a rank) once made every task hold its own parse of the whole table: 370 kB
    a task at 4,096. Generous bounds, on memory, not on time."""
    gpu_nodes = {"CUDA_VISIBLE_DEVICES": "0", "SLURM_GPUS_PER_TASK": "1"}
    small, large = _peak_bytes_a_task(64, 8, gpu_nodes), _peak_bytes_a_task(256, 8, gpu_nodes)
    assert small < 24_000 and large < 24_000, (small, large)
    assert large < 1.25 * small, f"a task's memory grows with the job: {small:.0f} B at 512 tasks, {large:.0f} at 2,048"


def test_tables_larger_than_a_chunk_travel_in_chunks() -> None:
    run = simulate(CHUNK // 2 + 1, 2, timeout=60)
    assert run.ok and run.largest_message < 64 * 1024


def test_absent_tasks_are_named_by_everyone_within_the_timeout() -> None:
    run = simulate(64, 4, timeout=2, absent={5})
    assert not run.ok and run.failed == 255 and run.wall_s < 3
    assert all("1 of 256 tasks did not join the bootstrap within 2 s: worker:5 (rank 5) on node2" in e
               for e in run.errors.values())


def test_an_absent_leader_is_named_by_its_node_and_the_rest() -> None:
    run = simulate(64, 4, timeout=2, absent={4})
    assert not run.ok and run.failed == 255
    for rank, error in run.errors.items():
        if rank in (5, 6, 7):  # its own node's tasks: it never answered them
            assert "rank 4 (worker:4 on node2) did not answer" in error
        else:
            assert "worker:4 (rank 4) on node2" in error


def test_an_absent_rank_0_is_named_by_everyone() -> None:
    run = simulate(16, 2, timeout=1.5, absent={0})
    assert not run.ok and run.failed == 31
    assert all("rank 0 (worker:0 on node1) did not answer" in e or "worker:0 (rank 0)" in e
               for e in run.errors.values())


def test_256_tasks_over_real_grpc_in_two_processes() -> None:
    run = over_grpc(64, 4, procs=2, timeout=60)
    assert run.ok, run.errors
    assert run.wall_s < 30 and run.cpu_s > 0


def test_failure_detection_over_real_grpc_declares_nobody_dead_while_every_task_lives() -> None:
    """256 tasks' watch calls and beats (the default heartbeat) over real sockets, in two processes:
    nobody is taken for dead, and the count would show it (the run's deaths are those of every task)."""
    run = over_grpc(64, 4, procs=2, timeout=60, heartbeat=1.0, hold=3.0)
    assert run.ok, run.errors
    assert run.dead == [] and run.held_s == 3.0 and run.held_cpu_s > 0
    assert run.summary()["deaths"] == 0


def test_a_process_that_dies_with_its_nodes_is_heard_of_by_every_living_task_at_once() -> None:
    """One of four processes ends abruptly, with its 4 nodes' 16 tasks (as nodes that fail): the
    tasks that watched them name them, nobody alive is named, and every living task hears of a
    death within about a second (a broken call is noticed at once, not after the patience of 5 s). The living
    child nodes of node 1 (10 to 12, 14, 15: nodes 9 and 13 died too) move their calls to the root, which takes
    them, one to two heartbeats later: every living task still watches, and knows every death declared, by the
    hold's end (4 s after the kill)."""
    run = over_grpc(16, 4, procs=4, timeout=60, heartbeat=1.0, hold=6.0, kill=1)
    assert run.ok, run.errors
    assert len(run.killed) == 16 and run.dead and set(run.dead) <= set(run.killed)
    assert run.unheard == 0 and 0 < run.heard_median_s <= run.heard_s < 2.0  # 0.1 s on the project's VM
    assert run.summary()["declared_dead_but_alive"] == 0
    assert run.unwatching == 0 and run.known == [len(run.dead)] * 48, (run.unwatching, run.known, run.dead)


def test_a_process_that_stops_with_its_nodes_is_found_by_pings_and_its_child_nodes_told() -> None:
    """One of four processes stops (SIGSTOP: its connections stay open and silent, as a node's that loses power)
    with its 20 nodes (1, 5, 9, ...: a node in four), in a tree of fan-out 8 over 80 nodes. Their parent nodes'
    pings find them, and the leaders of their child nodes, who ping them only rarely, are told (`Lost`, over
    real gRPC): node 1's by the root; and node 9, a child of node 1, silent too, takes no word and is lost over
    the network, so that the root tells its own living child nodes (74 to 76, 78 and 79). Every living task
    hears within a few patiences, and nobody alive is named. A stopped node's other task is found silent too, by
    whoever found its leader (before, only the 20 leaders were named; 38 on the project's VM)."""
    run = over_grpc(80, 2, procs=4, timeout=60, heartbeat=0.5, hold=15.0, kill=1, stop=True)
    assert run.ok, run.errors
    assert len(run.killed) == 40 and len(run.dead) >= 30 and set(run.dead) <= set(run.killed), run.dead
    assert run.unheard == 0 and 0 < run.heard_s < 9.5, (run.unheard, run.heard_s)  # patience 2.5 s
    assert run.summary()["declared_dead_but_alive"] == 0


def test_a_hold_needs_failure_detection_and_a_kill_another_process() -> None:
    with pytest.raises(ValueError, match="heartbeat"):
        over_grpc(1, 1, procs=1, hold=1.0)
    with pytest.raises(ValueError, match="kill=1 needs a hold"):
        over_grpc(1, 1, procs=1, heartbeat=1.0, hold=1.0, kill=1)
    with pytest.raises(ValueError, match="stop= needs kill="):
        over_grpc(1, 1, procs=2, heartbeat=1.0, hold=1.0, stop=True)
