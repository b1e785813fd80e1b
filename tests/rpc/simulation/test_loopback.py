"""What runs bootstraps over real gRPC at scale: each simulated node's loopback address, and the helpers."""

from __future__ import annotations

import resource

import pytest

from slurm_resolver.rpc.simulation.loopback import cpu_seconds, loopback, many_open_files, next_report


def test_each_node_has_its_own_loopback_address() -> None:
    addresses = [loopback(p) for p in range(1000)]
    assert len(set(addresses)) == 1000 and all(a.startswith("127.77.") for a in addresses)
    assert loopback(0) == "127.77.0.1" and loopback(249) == "127.77.0.250" and loopback(250) == "127.77.1.1"


def test_cpu_seconds_add_user_and_system_time() -> None:
    before = resource.getrusage(resource.RUSAGE_SELF)
    sum(range(200_000))
    assert cpu_seconds(before, resource.getrusage(resource.RUSAGE_SELF)) >= 0


def test_many_open_files_raises_the_soft_limit_only() -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    many_open_files()
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[1] == hard


def test_a_report_that_never_comes_is_an_error_not_a_hang() -> None:
    import queue

    class Worker:
        exitcode = 1

    with pytest.raises(RuntimeError, match="exit codes \\[1\\]"):
        next_report(queue.Queue(), [Worker()], timeout=30)
