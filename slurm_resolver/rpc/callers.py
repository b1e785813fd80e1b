"""Who calls a server, as the kernel knows it, and the bounds every caller meets on its own.

A stranger's flood must cost only that stranger's share of a server, never every caller's: calls
not yet proven (`UNPROVEN_SHARE` of `MOST_UNPROVEN`) and calls at once (`CALLS_SHARE` of
`MOST_CALLS`) are counted per caller, and so are open connections (`CONNECTIONS_SHARE`, held by
`slurm_resolver.rpc.connections`). On the server's own host a caller is the user who owns the
other end of the connection (the kernel's table of sockets, ``/proc/net/tcp``: the socket whose
local end is the caller's address and port); from another host, its address. Callers are told
apart only once the server is busy (a share is full if every call were one caller's): the
bootstrap's own calls never pay for it.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from .transport import Refusal, Refused

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)

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
(`slurm_resolver.rpc.connections`)."""
_KNOWN = 4096  # callers remembered (by connection)


def _endpoint(text: str, v6: bool) -> tuple[str, int]:
    """``0100007F:1F90`` (as /proc/net/tcp writes a socket's end) as ``('127.0.0.1', 8080)``."""
    address, _, port = text.partition(":")
    raw = bytes.fromhex(address)
    if not v6:
        return socket.inet_ntop(socket.AF_INET, raw[::-1]), int(port, 16)
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
    found = ipaddress.IPv6Address(words)
    mapped = found.ipv4_mapped
    return (str(mapped) if mapped is not None else str(found)), int(port, 16)


class Socket(NamedTuple):
    """One established TCP socket of this host, as the kernel's table says it."""

    local: tuple[str, int]
    """Its own end (address, port)."""
    remote: tuple[str, int]
    """The other end."""
    uid: int
    """The user who owns it."""
    inode: int
    """Its inode (0 while it waits in a listening socket's queue, not accepted yet)."""


def established(text: str, v6: bool) -> Iterator[Socket]:
    """The established sockets of one kernel table (``/proc/net/tcp``, or ``tcp6`` where ``v6``), given
    as its text; an old socket in TIME_WAIT (root's) and a malformed line are passed over."""
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) > 9 and fields[3] == "01":
            try:
                yield Socket(_endpoint(fields[1], v6), _endpoint(fields[2], v6), int(fields[7]), int(fields[9]))
            except ValueError:
                continue


TABLES = ("/proc/net/tcp", "/proc/net/tcp6")
"""The kernel's tables of this host's TCP sockets (its network namespace's)."""


def host_sockets(tables: Iterable[str] = TABLES) -> list[Socket]:
    """Every established TCP socket of this host (a table that cannot be read is passed over)."""
    found: list[Socket] = []
    for table in tables:
        try:
            with open(table) as f:
                text = f.read()
        except OSError:
            continue
        found.extend(established(text, table.endswith("6")))
    return found


def socket_owners(ends: set[tuple[str, int]], tables: Iterable[str] = TABLES) -> dict[tuple[str, int], int]:
    """The uid owning each local socket whose own end is one of ``ends`` (address, port): what the
    kernel says of the other end of a connection from this host."""
    return {s.local: s.uid for s in host_sockets(tables) if s.local in ends}


def caller_of(remote: tuple[str, int], owners: dict[tuple[str, int], int]) -> tuple[str, int | None]:
    """Who the other end ``remote`` of a connection is: ``uid N`` where its socket is in this host's
    table (``owners``: each local socket's own end and uid), else ``host A``; and that uid."""
    uid = owners.get(remote)
    return (f"uid {uid}", uid) if uid is not None else (f"host {remote[0]}", None)


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
    """

    def __init__(self, own: str = "") -> None:
        self._own = own.strip("[]")
        self._known: dict[str, str] = {}

    def local(self, host: str) -> bool:
        """Whether ``host`` (a caller's address) is this host's."""
        try:
            return host == self._own or ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False

    def of(self, peers: Iterable[str]) -> dict[str, str]:
        """Who each of ``peers`` (gRPC's peer strings) is: ``uid N`` on this host, else ``host A``."""
        wanted = {p for p in peers if p not in self._known}
        ends = {a for a in map(_address, wanted) if a is not None and self.local(a[0])}
        owners = socket_owners(ends) if ends else {}
        for peer in wanted:
            address = _address(peer)
            if address is None:
                who = peer[:100]
            elif address not in owners and self.local(address[0]):  # gone already: a caller of its own
                who = f"connection {peer[:100]}"
            else:
                who = caller_of(address, owners)[0]
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
