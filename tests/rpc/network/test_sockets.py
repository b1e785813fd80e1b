"""This host's TCP connections as the kernel says them, asked by address and filtered by port in the kernel."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator

import pytest

from slurm_resolver.rpc.network import sockets
from slurm_resolver.rpc.network.sockets import Socket, around, owner


@pytest.fixture()
def connected() -> Iterator[tuple[socket.socket, list[tuple[socket.socket, socket.socket]]]]:
    """A server on 127.0.0.1 with three connections to it: one from an IPv4 socket, two from dual-stack
    IPv6 sockets (as gRPC's channels make them)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    pairs = []
    for family, address in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::ffff:127.0.0.1"),
                            (socket.AF_INET6, "::ffff:127.0.0.1")):
        client = socket.socket(family)
        client.connect((address, server.getsockname()[1]))
        pairs.append((client, server.accept()[0]))
    yield server, pairs
    for client, accepted in pairs:
        client.close()
        accepted.close()
    server.close()


def _end(sock: socket.socket) -> tuple[str, int]:
    address, port = sock.getsockname()[:2]
    return address.removeprefix("::ffff:"), port


def test_the_owner_of_a_connections_other_end_is_found_by_its_addresses(connected: tuple) -> None:
    server, pairs = connected
    port = server.getsockname()[1]
    for client, _ in pairs:
        assert owner(_end(client), ("127.0.0.1", port)) == os.getuid()
    assert owner(("127.0.0.1", 1), ("127.0.0.1", port)) is None  # no such socket
    assert owner(("10.9.9.9", 5), ("127.0.0.1", port)) is None  # another host's


def test_a_ports_connections_are_both_their_ends_and_nothing_else(connected: tuple) -> None:
    server, pairs = connected
    port = server.getsockname()[1]
    with socket.socket() as other_server, socket.socket() as other:
        other_server.bind(("127.0.0.1", 0))
        other_server.listen()
        other.connect(other_server.getsockname())  # a connection to another port: not asked for
        found = around([port, 1, 2])  # several ports: a longer filter
        assert found is not None
        ends = {(s.local, s.remote) for s in found}
        expected = {(_end(a), _end(c)) for c, a in pairs} | {(_end(c), _end(a)) for c, a in pairs}
        assert ends == expected
        assert all(s.uid == os.getuid() and s.inode > 0 for s in found)
        assert around([]) == []


def test_where_the_kernel_does_not_say_the_answer_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    """A sandbox without netlink: callers are told apart by address only, and nothing is cut."""
    real = socket.socket

    def no_netlink(family: int = socket.AF_INET, *args: object, **kwargs: object) -> socket.socket:
        if family == socket.AF_NETLINK:
            raise PermissionError(1, "netlink is not allowed here")
        return real(family, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(sockets.socket, "socket", no_netlink)
    assert owner(("127.0.0.1", 5), ("127.0.0.1", 6)) is None and around([5]) is None


def test_a_socket_is_a_named_tuple_of_its_ends_owner_and_inode() -> None:
    assert Socket(("127.0.0.1", 1), ("127.0.0.1", 2), 0, 9).remote == ("127.0.0.1", 2)
