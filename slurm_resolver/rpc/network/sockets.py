"""This host's TCP connections as the kernel knows them, asked of it by address (Linux's sock_diag).

Who owns the other end of a connection to one of this process's servers, and which connections a
port of this process holds: the two questions the per-caller bounds ask (`slurm_resolver.rpc.network.callers`,
`slurm_resolver.rpc.network.connections`). The kernel answers both without the host's whole table: one
socket is found in its hash by its four addresses, and a dump is filtered by port in the kernel
(`INET_DIAG_REQ_BYTECODE`), so that the work is the connections of this process's ports, however
many sockets the host holds. (``/proc/net/tcp`` is every socket of the host, formatted as text: at
16,384 simulated tasks on one host, 90,000 lines a read.)

Where the kernel refuses the question (no netlink in a sandbox), the answer is None: callers are
then told apart by address only, and nothing is cut.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
import struct
from collections.abc import Iterable, Iterator
from typing import NamedTuple

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)

_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST, _NLM_F_DUMP = 0x1, 0x300
_NLMSG_ERROR, _NLMSG_DONE = 2, 3
_ESTABLISHED = 1 << 1  # TCP_ESTABLISHED
_NO_COOKIE = 0xFFFFFFFF
_BYTECODE = 1  # INET_DIAG_REQ_BYTECODE
_JMP, _S_GE, _S_LE, _D_GE, _D_LE = 1, 2, 3, 4, 5  # INET_DIAG_BC_*
_HEADER = struct.Struct("=IHHII")  # struct nlmsghdr
_REQUEST = struct.Struct("=BBBxI")  # struct inet_diag_req_v2, up to its socket id
_MESSAGE = struct.Struct("=BBBB")  # struct inet_diag_msg, up to its socket id
_ID = struct.Struct(">HH16s16sI")  # struct inet_diag_sockid: ports and addresses big-endian...
_COOKIE = struct.Struct("=II")  # ... its cookie in the host's order
_TAIL = struct.Struct("=IIIII")  # expires, rqueue, wqueue, uid, inode


class Socket(NamedTuple):
    """One established TCP socket of this host."""

    local: tuple[str, int]
    """Its own end (address, port)."""
    remote: tuple[str, int]
    """The other end."""
    uid: int
    """The user who owns it."""
    inode: int
    """Its inode (0 while it waits in a listening socket's queue, not accepted yet)."""


def _packed(address: str, family: int) -> bytes:
    """``address`` as sock_diag holds it (16 bytes): an IPv4 one as it is, or mapped where ``family``
    is IPv6 (a dual-stack socket's view of an IPv4 peer)."""
    ip = ipaddress.ip_address(address)
    if family == socket.AF_INET6:
        return (ip if ip.version == 6 else ipaddress.IPv6Address(f"::ffff:{ip}")).packed
    return ip.packed.ljust(16, b"\0") if ip.version == 4 else b""


def _address(raw: bytes, family: int) -> str:
    """An address as sock_diag gives it, an IPv4 one mapped in IPv6 as IPv4."""
    if family == socket.AF_INET:
        return socket.inet_ntop(socket.AF_INET, raw[:4])
    ip = ipaddress.IPv6Address(raw)
    return str(ip.ipv4_mapped or ip)


def _request(family: int, flags: int, sockid: bytes, attributes: bytes = b"") -> bytes:
    body = _REQUEST.pack(family, socket.IPPROTO_TCP, 0, _ESTABLISHED) + sockid + attributes
    return _HEADER.pack(_HEADER.size + len(body), _SOCK_DIAG_BY_FAMILY, flags, 1, 0) + body


def _ask(request: bytes, dump: bool) -> Iterator[Socket]:
    """The sockets the kernel answers ``request`` with: one (or none), or a dump's, in its parts."""
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as link:
        link.settimeout(2.0)
        link.sendall(request)
        while True:
            data = link.recv(1 << 16)
            offset = 0
            while offset + _HEADER.size <= len(data):
                length, kind, _, _, _ = _HEADER.unpack_from(data, offset)
                if length < _HEADER.size or kind == _NLMSG_DONE:
                    return
                if kind == _NLMSG_ERROR:
                    code = -struct.unpack_from("=i", data, offset + _HEADER.size)[0]
                    if code in (0, errno.ENOENT):
                        return  # no such socket
                    raise OSError(code, os.strerror(code))
                if kind == _SOCK_DIAG_BY_FAMILY:
                    yield _socket(data, offset + _HEADER.size)
                    if not dump:
                        return
                offset += (length + 3) & ~3
            if not data:
                return


def _socket(data: bytes, at: int) -> Socket:
    family = data[at]
    local_port, remote_port, local, remote, _ = _ID.unpack_from(data, at + _MESSAGE.size)
    tail = at + _MESSAGE.size + _ID.size + _COOKIE.size
    _, _, _, uid, inode = _TAIL.unpack_from(data, tail)
    return Socket((_address(local, family), local_port), (_address(remote, family), remote_port), uid, inode)


def owner(local: tuple[str, int], remote: tuple[str, int]) -> int | None:
    """The user owning the established socket of this host whose own end is ``local`` and whose
    other end is ``remote`` (so: the caller of a connection whose ends are these, seen from the
    server); None where there is none (gone, or another host's) or the kernel does not say."""
    for family in (socket.AF_INET6, socket.AF_INET):
        own, other = _packed(local[0], family), _packed(remote[0], family)
        if not own or not other:
            continue
        sockid = _ID.pack(local[1], remote[1], own, other, 0) + _COOKIE.pack(_NO_COOKIE, _NO_COOKIE)
        try:
            for found in _ask(_request(family, _NLM_F_REQUEST, sockid), dump=False):
                return found.uid
        except OSError:
            return None
    return None


def _port_filter(ports: list[int]) -> bytes:
    """sock_diag's bytecode for "its own port, or its other end's, is one of ``ports``", as an
    ``INET_DIAG_REQ_BYTECODE`` attribute, laid out as ``ss`` lays out its filters (the kernel checks
    that every jump lands on the chain of "yes" steps): an OR of equalities, each ``>= p`` then
    ``<= p`` (the oldest kernels' comparisons, 8 bytes each: the op, then the port in a second op's
    ``no``), joined by jumps. A match goes on to the next jump, which leaves for the end (the socket
    is kept); a miss goes to the next equality, the last one's past the end (dropped)."""
    tests = [(low, high, port) for port in ports for low, high in ((_S_GE, _S_LE), (_D_GE, _D_LE))]
    size = 16 * len(tests) + 4 * (len(tests) - 1)
    code = b""
    for low, high, port in tests:
        code += struct.pack("=BBHBBH", low, 8, 20, 0, 0, port)  # a miss: 20 bytes on, the next equality
        code += struct.pack("=BBHBBH", high, 8, 12, 0, 0, port)
        if len(code) < size:
            code += struct.pack("=BBH", _JMP, 4, size - len(code))  # a match: on to the end
    return struct.pack("=HH", 4 + len(code), _BYTECODE) + code


def around(ports: Iterable[int]) -> list[Socket] | None:
    """Every established socket of this host whose own port or other end's is one of ``ports``:
    both ends of every connection to those ports, filtered by the kernel. None where it does not say."""
    wanted = sorted(set(ports))
    if not wanted:
        return []
    attributes = _port_filter(wanted)
    sockid = _ID.pack(0, 0, b"\0" * 16, b"\0" * 16, 0) + _COOKIE.pack(_NO_COOKIE, _NO_COOKIE)
    found: list[Socket] = []
    try:
        for family in (socket.AF_INET, socket.AF_INET6):
            found.extend(_ask(_request(family, _NLM_F_REQUEST | _NLM_F_DUMP, sockid, attributes), dump=True))
    except OSError:
        return None
    return found
