"""Open connections held per caller: what gRPC bounds, what is cut, and the check that cuts it."""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path

import pytest

from slurm_resolver.rpc.network import connections as c
from slurm_resolver.rpc.network.sockets import Socket

ME, STRANGER, OTHER = 1000, 2000, 3000


def accepted(port: int, peer: tuple[str, int], inode: int) -> Socket:
    """A connection a server of this process (user ME) accepted on ``port`` from ``peer``."""
    return Socket(("10.0.0.1", port), peer, ME, inode)


def from_here(uid: int, end: tuple[str, int]) -> Socket:
    """The caller's own end of a connection from this host."""
    return Socket(end, ("10.0.0.1", 0), uid, 1)


def strangers(port: int, uid: int, first: int, n: int, host: str = "10.0.0.1") -> list[Socket]:
    """``n`` connections of user ``uid`` of this host (or of ``host``, uid < 0) to ``port``, inodes from ``first``."""
    found = []
    for i in range(n):
        end = (host, 40000 + first + i)
        found.append(accepted(port, end, first + i))
        if uid >= 0:
            found.append(from_here(uid, end))
    return found


@pytest.mark.parametrize("sockets, ports, share, cut_these", [
    # within its share: nothing
    (strangers(5000, STRANGER, 100, 3), [5000], 3, {}),
    # beyond: the newest (highest inodes) beyond the share
    (strangers(5000, STRANGER, 100, 5), [5000], 3, {(5000, "uid 2000"): [104, 103]}),
    # the job's own user is never cut, however many
    (strangers(5000, ME, 100, 9), [5000], 3, {}),
    # two strangers, each held to its own share
    (strangers(5000, STRANGER, 100, 4) + strangers(5000, OTHER, 200, 2), [5000], 3, {(5000, "uid 2000"): [103]}),
    # a share per port: four on each of two ports is within a share of four
    (strangers(5000, STRANGER, 100, 4) + strangers(5001, STRANGER, 200, 4), [5000, 5001], 4, {}),
    # another host (its end is not in this host's table): a share per host
    (strangers(5000, -1, 100, 4, host="10.0.0.9"), [5000], 2, {(5000, "host 10.0.0.9"): [103, 102]}),
    # a port of no server of this process is none of its business
    (strangers(6000, STRANGER, 100, 9), [5000], 3, {}),
])
def test_each_caller_is_cut_to_its_share_newest_first(sockets: list[Socket], ports: list[int], share: int,
                                                      cut_these: dict[tuple[int, str], list[int]]) -> None:
    assert c.excess(sockets, {("10.0.0.1", port) for port in ports}, ME, share) == cut_these


def test_only_the_connections_this_process_accepted_are_counted() -> None:
    """A socket on the same port of another address (another process's server), and one still waiting
    in the listening socket's queue (inode 0), are neither counted nor cut."""
    elsewhere = [Socket(("10.0.0.2", 5000), ("10.0.0.1", 40100 + i), ME, 300 + i) for i in range(5)]
    sockets = strangers(5000, STRANGER, 100, 3) + elsewhere + [accepted(5000, ("10.0.0.1", 1), 0)]
    assert c.excess(sockets, {("10.0.0.1", 5000)}, ME, 2) == {(5000, "uid 2000"): [102]}


@pytest.mark.parametrize("files, most", [(1024, 1024 - c.OWN_FILES * 2), (256, 256 - c.OWN_FILES), (1 << 20, 7 << 17),
                                         (0, None)])
def test_grpc_bounds_a_servers_connections_below_the_processs_open_files(files: int, most: int | None) -> None:
    assert c.incoming_limit(files) == most


@pytest.mark.parametrize("servers, calm, files, expected", [
    (1, 30, 1024, 64),  # a task's process: a share past what it holds
    (1000, 100, 20_000, 8000),  # a thousand servers in one process (the benchmark): a few files each
    (1000, 900, 1024, 64),  # near the limit: a share at least
    (100, 400, 1024, 312),  # at most half of what is left
])
def test_the_count_grows_by_a_slack_before_the_connections_are_counted(servers: int, calm: int, files: int,
                                                                       expected: int) -> None:
    assert c.slack(servers, calm, files) == expected


@pytest.mark.parametrize("link, inode", [("socket:[123]", 123), ("pipe:[5]", None), ("/dev/null", None),
                                         ("socket:[]", None), ("anon_inode:[eventfd]", None)])
def test_a_socket_is_known_by_its_link(link: str, inode: int | None) -> None:
    assert c.socket_inode(link) == inode


def test_a_cut_shuts_the_socket_down_and_leaves_its_fd_to_its_owner() -> None:
    mine, theirs = socket.socketpair()
    with mine, theirs:
        assert not c.cut(mine.fileno(), os.fstat(mine.fileno()).st_ino + 1)  # another file has that fd now
        assert theirs.send(b"x") == 1
        assert c.cut(mine.fileno(), os.fstat(mine.fileno()).st_ino)
        assert theirs.recv(1) == b""  # the other end sees the end
        os.fstat(mine.fileno())  # still open: its owner closes it


def test_the_check_reads_the_sockets_only_once_the_count_grew(tmp_path: Path,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    """Counted, a check costs two system calls; past the slack, the kernel is asked and a stranger's
    connections beyond its share are cut, newest first (a warning once per caller and port); a
    server stopped is forgotten."""
    fds = tmp_path / "fd"  # this process's open files, as /proc/self/fd shows them
    fds.mkdir()
    for fd in range(10):
        (fds / str(1000 + fd)).symlink_to("/dev/null")
    table: list[Socket] = []
    reads = []

    def sockets(ports: list[int]) -> list[Socket]:
        reads.append(ports)
        return table

    shedder = c.Shedder(share=2, fds=str(fds), sockets=sockets, files=lambda: 1024,
                      count=lambda: len(list(fds.iterdir())))
    shedder._calm = 10  # noqa: SLF001 - as `watch` finds it, without its thread
    shedder._servers[("127.0.0.1", 5000)] += 1  # noqa: SLF001
    assert shedder.check() == 0 and not reads  # nothing grew
    pairs = [socket.socketpair() for _ in range(80)]
    try:
        inodes = [os.fstat(mine.fileno()).st_ino for mine, _ in pairs]
        for i, ((mine, _), inode) in enumerate(zip(pairs, inodes)):
            (fds / str(mine.fileno())).symlink_to(f"socket:[{inode}]")
            table.extend([Socket(("127.0.0.1", 5000), ("127.0.0.1", 40000 + i), ME, inode),
                          from_here(os.geteuid() + 1, ("127.0.0.1", 40000 + i))])
        with caplog.at_level(logging.WARNING, "slurm_resolver"):
            assert shedder.check() == 78
            shedder.check()
        assert caplog.text.count("held more than 2 connections") == 1, caplog.text
        kept = {inode for inode in sorted(inodes)[:2]}
        for (_, theirs), inode in zip(pairs, inodes):
            theirs.setblocking(False)
            try:
                ended = theirs.recv(1) == b""
            except BlockingIOError:
                ended = False
            assert ended is (inode not in kept)
    finally:
        for mine, theirs in pairs:
            mine.close()
            theirs.close()
    assert reads and reads[0] == [5000]  # the kernel is asked for that port's connections only
    shedder.forget(("127.0.0.1", 5000))
    assert not shedder._servers  # noqa: SLF001


def test_the_lowest_free_file_number_counts_the_files_below_it() -> None:
    """Every file below it is open, and the kernel gives the next file that number."""
    free = c.lowest_free()
    assert free is not None and set(range(free)) <= {int(name) for name in os.listdir("/proc/self/fd")}
    fd = os.open(os.devnull, os.O_RDONLY)
    try:
        assert fd == free
    finally:
        os.close(fd)
