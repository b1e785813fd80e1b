"""Who calls a server, as the kernel knows it, and the bounds every caller meets on its own.

A stranger's flood must cost only that stranger's share of a server, never every caller's: calls
not yet proven (`UNPROVEN_SHARE` of `MOST_UNPROVEN`) and calls at once (`CALLS_SHARE` of
`MOST_CALLS`) are counted per caller, and so are open connections (`CONNECTIONS_SHARE`, held by
`slurm_resolver.rpc.network.connections`). On the server's own host a caller is the user who owns the
other end of the connection (the kernel says, asked for that one socket by its addresses:
`slurm_resolver.rpc.network.sockets.owner`); from another host, its address. Callers are told apart only
once the server is busy (a share is full if every call were one caller's), once per connection:
the bootstrap's own calls never pay for it.
"""

from __future__ import annotations

import ipaddress
import logging
from collections import Counter
from collections.abc import Iterable

from ..transport import Refusal, Refused
from .sockets import owner

__all__: list[str] = []  # internal (docs/protocol.md)

log = logging.getLogger("slurm_resolver")

MOST_UNPROVEN = 32
"""Calls at once, on one server, that have not yet proven they come from the job; beyond, ``busy``."""
UNPROVEN_SHARE = 16
"""Of those, calls of one caller (a local user, or a host); beyond, ``busy`` for that caller only."""
MOST_CALLS = 512
"""Calls at once on one server, whoever makes them (gRPC answers RESOURCE_EXHAUSTED beyond)."""
CALLS_SHARE = 128
"""Of those, calls of one caller; beyond, its next calls are refused at once (``busy``)."""
CONNECTIONS_SHARE = 64
"""Open connections to one server of one caller (not the job's own user); beyond, its newest are cut
(`slurm_resolver.rpc.network.connections`)."""
_KNOWN = 4096  # callers remembered (by connection)


def caller_name(remote: tuple[str, int], uid: int | None) -> str:
    """How a caller is named, for its bounds and in warnings: ``uid N`` where the other end
    ``remote`` of its connection is a socket of this host owned by ``uid``, else ``host A``."""
    return f"uid {uid}" if uid is not None else f"host {remote[0]}"


def caller_of(remote: tuple[str, int], owners: dict[tuple[str, int], int]) -> tuple[str, int | None]:
    """Who the other end ``remote`` of a connection is (`caller_name`), given the owners of this
    host's sockets by their own end (``owners``); and its uid, where it is on this host."""
    uid = owners.get(remote)
    return caller_name(remote, uid), uid


def _address(peer: str) -> tuple[str, int] | None:
    """``ipv4:127.0.0.1:5555`` or ``ipv6:[::1]:5555`` (gRPC's peer) as an address and port."""
    kind, _, rest = peer.partition(":")
    host, _, port = rest.rpartition(":")
    if kind not in ("ipv4", "ipv6") or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


class Callers:
    """Who the peers of one server are (a local user, else a host), looked up once per connection.

    Args:
        own: the address the server listens on (a caller from it, or from a loopback address, is on
            this host).
        port: the port it listens on (a local caller's socket is found by both ends).
    """

    def __init__(self, own: str = "", port: int = 0) -> None:
        self._own = own.strip("[]")
        self._port = port
        self._known: dict[str, str] = {}

    def local(self, host: str) -> bool:
        """Whether ``host`` (a caller's address) is this host's."""
        try:
            return host == self._own or ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False

    def of(self, peers: Iterable[str]) -> dict[str, str]:
        """Who each of ``peers`` (gRPC's peer strings) is: ``uid N`` on this host, else ``host A``."""
        for peer in {p for p in peers if p not in self._known}:
            address = _address(peer)
            if address is None:
                who = peer[:100]
            elif not self.local(address[0]):
                who = caller_name(address, None)
            else:
                uid = owner(address, (self._own or address[0], self._port))
                who = caller_name(address, uid) if uid is not None else f"connection {peer[:100]}"  # gone
            if len(self._known) >= _KNOWN:
                self._known.pop(next(iter(self._known)))
            self._known[peer] = who
        return {p: self._known[p] for p in peers}


class Bound:
    """At most ``most`` calls at once, and ``share`` of them from one caller (told apart only where
    the calls reach ``share``)."""

    def __init__(self, callers: Callers, most: int, share: int, what: str) -> None:
        self._callers = callers
        self.most, self.share, self._what = most, share, what
        self._peers: Counter[str] = Counter()
        self.held = 0

    @property
    def contested(self) -> bool:
        """Whether the calls held reach one caller's share: a caller may be refused now."""
        return self.held >= self.share

    def holding(self, peer: str) -> _Holding:
        """Around one call of ``peer`` (``with bound.holding(peer): ...``); `Refused` (``busy``) as it
        begins where the server, or its caller's share, is full."""
        return _Holding(self, peer)

    def take(self, peer: str) -> None:
        """One more call of ``peer``; `Refused` (``busy``) where the server, or its caller's share, is full."""
        if self.held >= self.most:
            raise Refused(Refusal.BUSY, f"{self.most} {self._what} wait here: ask again")
        if self.held >= self.share:
            who = self._callers.of([*self._peers, peer])
            mine = who[peer]
            if sum(n for p, n in self._peers.items() if who[p] == mine) >= self.share:
                raise Refused(Refusal.BUSY, f"{self.share} {self._what} of {mine} wait here: ask again")
        self.held += 1
        self._peers[peer] += 1

    def give(self, peer: str) -> None:
        """A call of ``peer`` (`take`n) ended."""
        self.held -= 1
        self._peers[peer] -= 1
        if not self._peers[peer]:
            del self._peers[peer]


class _Holding:
    """One call held in a `Bound` while its block runs (a plain context manager: one for every call)."""

    __slots__ = ("_bound", "_peer")

    def __init__(self, bound: Bound, peer: str) -> None:
        self._bound, self._peer = bound, peer

    def __enter__(self) -> None:
        self._bound.take(self._peer)

    def __exit__(self, *exc: object) -> None:
        self._bound.give(self._peer)
