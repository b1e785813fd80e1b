"""An address every peer can reach, for each node, without a lookup storm: one rule for every caller.

The rule (`address_map`): a node whose name resolves is reached by its name; a node whose name
does not resolve, by Slurm's ``NodeAddr``, asked once for all of them; a node with neither is an
error that names it. The job's tasks bind their servers by it and reach each other by it, and a
client outside the job (``slurm-resolver stacks``) finds a task by it (`node_address`): where
slurm.conf's ``NodeAddr`` differs from the name's address (a site that gives Slurm's daemons one
network and its nodes' names another), the tasks are on the name's. Names first, because that is
the network a site names its nodes on for its users' programs (``MASTER_ADDR`` from ``scontrol
show hostnames``), and because each task checks only its own node's name (one ``getaddrinfo``;
an exchange carries what every task found), where ``NodeAddr`` needs slurmctld. A slurmd itself
is reached at its ``NodeAddr`` (`slurmctl.node_health`): that address is Slurm's, for Slurm's daemon.
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from .errors import AddressError

__all__: list[str] = []  # internal: no public names (docs/reference.md)


class OwnNames(Mapping[str, str]):
    """The address map where every node's name is its address: no per-node work.

    >>> OwnNames(("n1", "n2"))["n2"]
    'n2'
    """

    def __init__(self, nodes: Sequence[str]) -> None:
        self.nodes = nodes

    def __getitem__(self, node: str) -> str:
        if not isinstance(node, str):
            raise KeyError(node)
        return node

    def __iter__(self) -> Iterator[str]:
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self.nodes)

    def __contains__(self, node: object) -> bool:
        return node in self.nodes


def abridged(items: Sequence[object], shown: int = 8) -> str:
    """At most ``shown`` items and a count of the rest: messages stay short whatever the job's size.

    >>> abridged(["node2", "node3"])
    'node2, node3'
    >>> abridged([f"n{i}" for i in range(10)], 2)
    'n0, n1 and 8 more'
    """
    text = ", ".join(map(str, items[:shown]))
    return f"{text} and {len(items) - shown} more" if len(items) > shown else text


def lookup(host: str, port: int | None = None, **hints: int) -> list[tuple[Any, ...]]:
    """`socket.getaddrinfo` of ``host``, given as bytes where it is ASCII (every Slurm name is): a name given
    as text is encoded with the ``idna`` codec, whose first use imports it (with ``stringprep`` and a regular
    expression compiled), about 5 ms of a task's start for nothing."""
    name: str | bytes = host.encode("ascii") if host.isascii() else host
    return socket.getaddrinfo(name, port, **hints)


def resolves(name: str) -> bool:
    """Whether ``name`` resolves to an address on this host."""
    try:
        return bool(lookup(name, proto=socket.IPPROTO_TCP))
    except (OSError, UnicodeError):
        return False


def address_map(
    nodes: Sequence[str],
    checked: Mapping[str, bool],
    node_addresses: Callable[[Sequence[str]], Mapping[str, str]],
) -> Mapping[str, str]:
    """Node name to address, by the one rule (the module's docstring).

    Args:
        nodes: every node of the job.
        checked: nodes whose name was checked, and whether it resolved. Unchecked
            nodes are taken to behave as the checked ones (names of one cluster
            follow one scheme); if any checked name failed, they are looked up too.
        node_addresses: asks Slurm for ``NodeAddr`` (called at most once; the caller's seam to
            Slurm's commands, ``slurmctl.node_addresses``, a level above this module).
    """
    if all(checked.values()):
        return OwnNames(nodes)
    failed = [n for n in dict.fromkeys(nodes) if checked.get(n) is False]
    if failed and any(n not in checked for n in nodes):
        failed = [n for n in dict.fromkeys(nodes) if checked.get(n) is not True]
    if not failed:
        return OwnNames(nodes)
    found = node_addresses(failed)
    missing = [n for n in failed if not found.get(n) or found[n] == n]
    if missing:
        others = f" (also {abridged(missing[1:])})" if len(missing) > 1 else ""
        raise AddressError(
            f"node {missing[0]} has no reachable address: its name does not resolve and Slurm "
            f"gives no other NodeAddr{others}",
            "add the node names to DNS or /etc/hosts on every node, or set NodeAddr in slurm.conf",
        )
    return {n: found.get(n, n) for n in nodes}


def node_address(
    node: str,
    node_addresses: Callable[[Sequence[str]], Mapping[str, str]],
    resolves: Callable[[str], bool] = resolves,
) -> str:
    """The address of one node, by the rule the job's tasks follow (`address_map`), its name checked here:
    where a client outside the job (``slurm-resolver stacks``) finds a task's server.

    >>> node_address("node1", node_addresses=lambda names: {}, resolves=lambda name: True)
    'node1'
    >>> node_address("node1", resolves=lambda name: False, node_addresses=lambda names: {"node1": "10.1.0.1"})
    '10.1.0.1'
    """
    return address_map([node], {node: resolves(node)}, node_addresses)[node]


def port_in_use(host: str, port: int) -> bool:
    """Whether another socket already listens on ``host:port`` (a bind test, then closed).

    Only ``EADDRINUSE`` counts; an address that is not this host's says nothing.
    """
    try:
        family, _, _, _, address = lookup(host, port, type=socket.SOCK_STREAM)[0]
    except (OSError, UnicodeError):
        return False
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)  # the address looked up once, not the name again
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False
