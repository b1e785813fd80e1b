"""Who calls a server, as the kernel knows it, and the share of a server each caller may hold."""

from __future__ import annotations

import os
import socket

import pytest

from slurm_resolver.rpc.callers import Bound, Callers, Socket, _endpoint, established, socket_owners
from slurm_resolver.rpc.transport import Refusal, Refused


def test_the_kernels_socket_table_is_read_as_addresses() -> None:
    assert _endpoint("0100007F:1F90", v6=False) == ("127.0.0.1", 8080)
    assert _endpoint("0000000000000000FFFF00000100007F:0016", v6=True) == ("127.0.0.1", 22)
    assert _endpoint("00000000000000000000000001000000:0016", v6=True) == ("::1", 22)


TCP = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:41B3 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 5020 1 0 100 0 0 10 0
   1: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000  1000        0 77 1 0 20 4 30 10 -1
   2: 0100007F:D431 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  2000        0 78 1 0 20 4 30 10 -1
   3: 0100007F:1F90 0100007F:D432 06 00000000:00000000 03:00000000 00000000     0        0 0 3 0
   4: 0100007F:1F90 0900000A:D433 01 00000000:00000000 00:00000000 00000000  1000        0 0 1 0 20 4 30 10 -1
   5: ZZ00007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000  1000        0 79 1 0 20 4 30 10 -1
"""
TCP6 = """\
  sl  local_address                         remote_address                        st ... uid  timeout inode
   0: 00000000000000000000000001000000:1F90 00000000000000000000000001000000:D431 01 0:0 0:0 0 1000 0 91
   1: 0000000000000000FFFF00000100007F:1F90 0000000000000000FFFF00000900000A:D433 01 0:0 0:0 0 1000 0 92
"""  # the fields that count: the rest of a line as the kernel writes it is left out


@pytest.mark.parametrize("text, v6, sockets", [
    # established only (not LISTEN, not TIME_WAIT), one in a listener's queue (inode 0) too; not a malformed line
    (TCP, False, [Socket(("127.0.0.1", 8080), ("127.0.0.1", 54321), 1000, 77),
                  Socket(("127.0.0.1", 54321), ("127.0.0.1", 8080), 2000, 78),
                  Socket(("127.0.0.1", 8080), ("10.0.0.9", 54323), 1000, 0)]),
    (TCP6, True, [Socket(("::1", 8080), ("::1", 54321), 1000, 91),
                  Socket(("127.0.0.1", 8080), ("10.0.0.9", 54323), 1000, 92)]),
    ("", False, []),
])
def test_the_kernels_table_is_read_as_established_sockets(text: str, v6: bool, sockets: list[Socket]) -> None:
    assert list(established(text, v6)) == sockets


def test_a_local_caller_is_the_user_who_owns_the_other_end() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        with socket.create_connection(server.getsockname()) as client:
            end = client.getsockname()
            assert socket_owners({end}) == {end: os.getuid()}
            peer = f"ipv4:{end[0]}:{end[1]}"
            callers = Callers("127.0.0.1")
            assert callers.of([peer, "ipv4:10.1.2.3:555", "unix:/tmp/x"]) == {
                peer: f"uid {os.getuid()}", "ipv4:10.1.2.3:555": "host 10.1.2.3", "unix:/tmp/x": "unix:/tmp/x"}


class Known(Callers):
    """Callers told apart by a table (ports 1-9: uid 1000; others: uid 2000)."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = 0

    def of(self, peers):  # type: ignore[no-untyped-def]
        self.asked += 1
        return {p: "uid 1000" if int(p.rpartition(":")[2]) < 10 else "uid 2000" for p in peers}


def test_one_callers_calls_beyond_its_share_are_busy_and_the_others_still_get_in() -> None:
    callers = Known()
    bound = Bound(callers, most=6, share=3, what="calls")
    held = [bound.holding(f"ipv4:127.0.0.1:{port}") for port in (1, 2, 3)]
    for h in held:
        h.__enter__()
    assert callers.asked == 0  # not busy yet: nobody is told apart
    with pytest.raises(Refused) as busy:
        with bound.holding("ipv4:127.0.0.1:4"):
            pass
    assert busy.value.code is Refusal.BUSY and "3 calls of uid 1000" in busy.value.detail
    with bound.holding("ipv4:127.0.0.1:11"), bound.holding("ipv4:127.0.0.1:12"):  # another user's
        assert bound.held == 5
    held[0].__exit__(None, None, None)
    with bound.holding("ipv4:127.0.0.1:5"):  # a slot of its own share came free
        pass
    assert bound.held == 2
