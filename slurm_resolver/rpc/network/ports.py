"""Where node leaders listen before anyone knows: ports derived from the launch's key.

Every task computes the same candidate list, so a task finds its leader by probing them
(another launch's server there refuses and is skipped). The range is below Linux's
ephemeral ports, so that no server bound to port 0 takes one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache

from ...errors import EnvironmentVariableError
from ..primitives import sha256

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)

_RANGE = (20000, 32768)  # below Linux's ephemeral ports (32768-60999): no port 0 server takes one


@lru_cache(maxsize=8)
def _derived_ports(key: str, count: int, span: tuple[int, int]) -> tuple[int, ...]:
    low, high = span
    digest = sha256(key.encode()).digest()
    ports: list[int] = []
    for i in range(0, len(digest) - 1, 2):
        port = low + int.from_bytes(digest[i:i + 2], "big") % (high - low)
        if port not in ports:
            ports.append(port)
    return tuple(ports[:count])


def rendezvous_ports(key: str, count: int = 12, span: tuple[int, int] = _RANGE) -> list[int]:
    """The ports leaders try to bind, derived from the launch's key (the same in every task).

    >>> rendezvous_ports("1234.0")[:3] == rendezvous_ports("1234.0")[:3]
    True
    """
    return list(_derived_ports(key, count, span))


def candidates_of(env: Mapping[str, str], key: str, rendezvous: Sequence[int] | None, port: int) -> list[int]:
    """The ports this task's leader may listen on: ``port``, else ``rendezvous``, else
    ``SLURM_RESOLVER_RENDEZVOUS_PORTS``, else `rendezvous_ports()` of the launch's key."""
    if port:
        return [port]
    if rendezvous:
        return list(rendezvous)
    text = env.get("SLURM_RESOLVER_RENDEZVOUS_PORTS")
    if text is None:
        return rendezvous_ports(key)
    ports = [p.strip() for p in text.split(",")]
    if not ports or not all(p.isascii() and p.isdigit() and 0 < int(p) < 65536 for p in ports) or len(ports) > 64:
        raise EnvironmentVariableError("SLURM_RESOLVER_RENDEZVOUS_PORTS", text,
                                       "up to 64 TCP ports such as 30001,30002")
    return [int(p) for p in ports]
