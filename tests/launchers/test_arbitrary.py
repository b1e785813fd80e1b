"""``srun -m arbitrary``: each rank's node read from the host file (SLURM_HOSTFILE) where the task can
read it, learned from every task where it cannot; never guessed. Two emulated nodes on this host
(127.0.0.1 and 127.0.0.2); the host file puts the ranks out of node order: node2, node1, node2."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurm_resolver import SlurmClusterResolver
from slurm_resolver.errors import EnvironmentVariableError, PlacementError
from slurm_resolver.layout import host_file
from slurm_resolver.resolution import resolve
from slurm_resolver.rpc.bootstrap import bootstrap
from slurm_resolver.rpc.bootstrapped import Bootstrapped

from ..conftest import captured, in_threads

NODES = ("127.0.0.1", "127.0.0.2")
TRUTH = ("127.0.0.2", "127.0.0.1", "127.0.0.2")


@pytest.mark.parametrize(("text", "tasks", "hosts"), [
    ("node2\nnode1\nnode2\n", 3, ("node2", "node1", "node2")),
    ("node2\r\nnode1\r\nnode2", 3, ("node2", "node1", "node2")),
    ("node2,node1,node2", 3, ("node2", "node1", "node2")),
    ("# a layout\n\nnode2  # rank 0\n  node1 , node2  \n", 3, ("node2", "node1", "node2")),
    ("n1*2\nn2*3", 5, ("n1", "n1", "n2", "n2", "n2")),
    ("n1*4", 2, ("n1", "n1")),
    ("n1\nn2\nn3\nn4", 2, ("n1", "n2")),
    ("n1,,n2", 2, ("n1", "n2")),
    ("gpu-a100.rack3_7\n", 1, ("gpu-a100.rack3_7",)),
])
def test_host_files_read_as_slurm_reads_them(text: str, tasks: int, hosts: tuple[str, ...]) -> None:
    assert host_file(text, tasks, "/h") == hosts


@pytest.mark.parametrize(("text", "tasks", "error"), [
    ("node[1-2]\n", 2, r"line 1 has 'node\[1-2\]' \(a range: Slurm reads no ranges here\)"),
    ("node1\n-node2\n", 2, "line 2 has '-node2'"),
    ("node1 node2\n", 2, "line 1 has 'node1 node2'"),
    ("node1*x\n", 2, r"line 1 has 'node1\*x'"),
    ("node1*0\n", 2, r"line 1 has 'node1\*0'"),
    ("node1\n", 3, "a node for each of the step's 3 ranks; it names 1"),
    ("", 1, "a node for each of the step's 1 ranks; it names 0"),
    ("# only a comment\n", 1, "it names 0"),
])
def test_malformed_host_files_name_the_variable_the_line_and_the_fix(text: str, tasks: int, error: str) -> None:
    with pytest.raises(EnvironmentVariableError, match=error) as info:
        host_file(text, tasks, "/tmp/hosts")
    assert info.value.variable == "SLURM_HOSTFILE" and "SLURM_HOSTFILE='/tmp/hosts' is invalid" in info.value.message
    assert "one node name for each rank" in (info.value.hint or "")


@given(st.text(max_size=200), st.integers(1, 40))
def test_any_text_gives_every_rank_a_node_or_an_error_naming_the_host_file(text: str, tasks: int) -> None:
    try:
        hosts = host_file(text, tasks, "/h")
    except EnvironmentVariableError as exc:
        assert exc.variable == "SLURM_HOSTFILE"
        return
    assert len(hosts) == tasks and all(h and "," not in h and "#" not in h for h in hosts)


def env(rank: int, hostfile: str | None, step: str = "0") -> dict[str, str]:
    node = TRUTH[rank]
    gtids = ",".join(str(r) for r, n in enumerate(TRUTH) if n == node)
    variables = {"SLURM_JOB_ID": "89", "SLURM_STEP_ID": step, "SLURM_PROCID": str(rank),
                 "SLURM_LOCALID": str(gtids.split(",").index(str(rank))), "SLURMD_NODENAME": node,
                 "SLURM_NODEID": str(NODES.index(node)), "SLURM_GTIDS": gtids, "SLURM_STEP_NUM_TASKS": "3",
                 "SLURM_STEP_NODELIST": ",".join(NODES), "SLURM_STEP_TASKS_PER_NODE": "1,2",
                 "SLURM_DISTRIBUTION": "arbitrary", "CUDA_VISIBLE_DEVICES": ""}
    return variables | ({"SLURM_HOSTFILE": hostfile} if hostfile else {})


@pytest.fixture
def hosts(tmp_path: Path) -> str:
    path = tmp_path / "hosts"
    path.write_text("\n".join(TRUTH) + "\n")
    return str(path)


def always(name: str) -> bool:
    return True


def test_a_readable_host_file_places_every_rank_without_an_exchange(hosts: str) -> None:
    cluster = resolve(env(0, hosts), exchange="none", resolves=always)
    assert cluster.nodes == TRUTH and cluster.placement.exact and cluster.me is not None
    assert cluster.me.node == "127.0.0.2" and cluster.local_ranks == (0, 0, 1)
    assert cluster.spec().as_dict() == {"worker": ["127.0.0.2:8888", "127.0.0.1:8888", "127.0.0.2:8889"]}


def test_one_task_per_node_is_not_in_node_order_either(tmp_path: Path) -> None:
    """srun -m arbitrary -w node2,node1: one task per node, yet rank 0 runs on the second node."""
    path = tmp_path / "hosts"
    path.write_text("127.0.0.2\n127.0.0.1\n")
    two = {**env(0, str(path)), "SLURM_STEP_NUM_TASKS": "2", "SLURM_STEP_TASKS_PER_NODE": "1(x2)",
           "SLURM_GTIDS": "0", "SLURM_LOCALID": "0"}
    assert resolve(two, exchange="none", resolves=always).nodes == ("127.0.0.2", "127.0.0.1")
    with pytest.raises(PlacementError, match="SLURM_HOSTFILE"):
        resolve({k: v for k, v in two.items() if k != "SLURM_HOSTFILE"}, exchange="none", resolves=always)


def test_without_a_host_file_nor_an_exchange_the_layout_is_refused_with_the_fix(tmp_path: Path) -> None:
    for hostfile in (None, str(tmp_path / "not-here")):
        with pytest.raises(PlacementError, match="cannot read its host file .SLURM_HOSTFILE.") as info:
            resolve(env(0, hostfile), exchange="none", resolves=always)
        assert "make SLURM_HOSTFILE readable by every task" in (info.value.hint or "")


@pytest.mark.parametrize(("text", "error"), [
    ("127.0.0.1\n127.0.0.1\n127.0.0.2\n", "it puts 2 ranks on 127.0.0.1, where SLURM_STEP_TASKS_PER_NODE has 1"),
    ("127.0.0.2\n127.0.0.1\n127.0.0.3\n", "it puts 1 ranks on 127.0.0.2, where SLURM_STEP_TASKS_PER_NODE has 2"),
])
def test_a_host_file_that_is_not_the_steps_is_refused(tmp_path: Path, text: str, error: str) -> None:
    path = tmp_path / "hosts"
    path.write_text(text)
    with pytest.raises(EnvironmentVariableError, match=error) as info:
        resolve(env(0, str(path)), resolves=always)
    assert "the file changed since srun read it" in info.value.message
    assert "env -u SLURM_HOSTFILE" in str(info.value.hint)


def test_a_host_file_that_moved_this_rank_is_caught(tmp_path: Path) -> None:
    path = tmp_path / "hosts"
    path.write_text("127.0.0.1\n127.0.0.2\n127.0.0.2\n")  # the same counts, rank 0 and 1 swapped
    with pytest.raises(PlacementError, match="rank 0 runs on 127.0.0.2, but the host file SLURM_HOSTFILE puts it on"):
        resolve(env(0, str(path)), exchange="none", resolves=always)


def every_task(run: Any) -> list[Any]:
    return in_threads(run, len(TRUTH))


@pytest.mark.parametrize("readable", ["none", "some", "all"])
def test_bootstrap_learns_the_layout_where_the_host_file_is_anywhere_or_nowhere(hosts: str, readable: str) -> None:
    """The bootstrap's exchange carries every task's node anyway: it learns the layout, right even where
    only some tasks can read the file (a file in one node's /tmp)."""
    def hostfile(rank: int) -> str | None:
        return hosts if readable == "all" or (readable == "some" and rank == 1) else None

    step = {"none": "1", "some": "2", "all": "3"}[readable]
    results = every_task(lambda rank: bootstrap(environ=env(rank, hostfile(rank), step), timeout=20))
    try:
        assert all(isinstance(r, Bootstrapped) for r in results), results
        for r in results:
            assert r.cluster.placement.exact and r.cluster.nodes == TRUTH and r.me.node == TRUTH[r.rank]
        assert len({str(r.cluster_spec().as_dict()) for r in results}) == 1
    finally:
        for r in results:
            if isinstance(r, Bootstrapped):
                r.stop(0)


def test_the_resolver_without_the_host_file_learns_from_every_task() -> None:
    results = every_task(lambda rank: SlurmClusterResolver(environ=env(rank, None, "4"), check_port=False,
                                                           auto_set_gpu=False))
    assert all(isinstance(r, SlurmClusterResolver) for r in results), results
    for r in results:
        assert r.cluster.nodes == TRUTH and r.cluster.placement.exact


@pytest.mark.parametrize("rank", [0, 1, 2])
def test_captured_arbitrary_steps(tmp_path: Path, rank: int) -> None:
    """Real environments of `srun -m arbitrary -n3` (host file node2, node1, node2) and of
    `srun -m arbitrary -w node2,node1,node2 -n3` (no host file): Slurm's node list is sorted."""
    hosts = tmp_path / "hosts"
    hosts.write_text("node2\nnode1\nnode2\n")
    listed = dict(captured("srun_arbitrary_hostfile")[rank], SLURM_HOSTFILE=str(hosts))
    assert listed["SLURM_STEP_NODELIST"] == "node[1-2]" and listed["SLURM_STEP_TASKS_PER_NODE"] == "1,2"
    cluster = resolve(listed, exchange="none", resolves=always)
    assert cluster.rank == rank and cluster.nodes == ("node2", "node1", "node2")
    told = captured("srun_arbitrary_nodelist")[rank]
    assert "SLURM_HOSTFILE" not in told
    with pytest.raises(PlacementError, match="cannot read its host file"):
        resolve(told, exchange="none", resolves=always)
    guess = resolve(told, resolves=always).placement  # provisional: what the bootstrap starts from
    assert not guess.exact and guess.node_of(rank) == ("node2", "node1", "node2")[rank]
