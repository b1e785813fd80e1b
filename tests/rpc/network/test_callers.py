"""Who calls a server, as the kernel knows it, and the share of a server each caller may hold."""

from __future__ import annotations

import os
import socket

import pytest

from slurm_resolver.rpc.network.callers import Bound, Callers
from slurm_resolver.rpc.transport import Refusal, Refused


def test_a_local_caller_is_the_user_who_owns_the_other_end() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        with socket.create_connection(server.getsockname()) as client:
            end = client.getsockname()
            peer = f"ipv4:{end[0]}:{end[1]}"
            callers = Callers("127.0.0.1", server.getsockname()[1])
            gone = "ipv4:127.0.0.1:1"  # no such connection (any more): a caller of its own
            assert callers.of([peer, "ipv4:10.1.2.3:555", "unix:/tmp/x", gone]) == {
                peer: f"uid {os.getuid()}", "ipv4:10.1.2.3:555": "host 10.1.2.3", "unix:/tmp/x": "unix:/tmp/x",
                gone: f"connection {gone}"}


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
