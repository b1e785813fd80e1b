"""Exchanges: every rank contributes a value and receives everyone's, in rank order.

[`MPIExchange`][slurm_resolver.exchange.MPIExchange] runs over MPI;
[`LocalExchange`][slurm_resolver.exchange.LocalExchange] runs N ranks in one process
(threads), for tests and single-node runs. Resolution and the bootstrap take any object
with ``rank``, ``size`` and ``allgather``, or one of the [`MODES`][slurm_resolver.exchange.MODES]:

- ``'auto'``: MPI where the launch can initialise it (an MPI launcher; srun with PMIx),
  else the bootstrap's gRPC rendezvous;
- ``'mpi'``: MPI, always;
- ``'rendezvous'``: the bootstrap's gRPC rendezvous, never MPI;
- ``'none'``: no exchange: resolution uses only what the environment says, and fails
  where that does not place every rank.

Resolution alone (no servers) exchanges only through MPI; ``'rendezvous'`` is the
bootstrap's.
"""

from __future__ import annotations

import enum
import logging
import threading
from typing import TYPE_CHECKING, Any, Protocol, cast

from .errors import ConfigurationError, ResolutionError

if TYPE_CHECKING:  # pragma: no cover
    from .launchers.base import Launch

__all__ = ["Exchange", "ExchangeMode", "MPIExchange", "LocalExchange", "MODES", "parse_mode", "mpi_exchange"]

log = logging.getLogger("slurm_resolver")

class ExchangeMode(enum.Enum):
    """How ranks exchange what they cannot compute (``exchange=``, ``SLURM_RESOLVER_EXCHANGE``)."""

    AUTO = "auto"
    MPI = "mpi"
    RENDEZVOUS = "rendezvous"
    NONE = "none"


MODES = tuple(m.value for m in ExchangeMode)
"""Every value of ``exchange=`` and of ``SLURM_RESOLVER_EXCHANGE``."""


def parse_mode(mode: object, source: str = "exchange") -> ExchangeMode | Exchange:
    """``mode`` as an `ExchangeMode` (one of [`MODES`][slurm_resolver.exchange.MODES]), or the
    [`Exchange`][slurm_resolver.exchange.Exchange] object given; a `ConfigurationError` for anything else.

    >>> parse_mode("auto")
    <ExchangeMode.AUTO: 'auto'>
    """
    if isinstance(mode, ExchangeMode):
        return mode
    if isinstance(mode, str):
        try:
            return ExchangeMode(mode)
        except ValueError:
            raise ConfigurationError(f"{source}={mode!r} is not known", f"use one of {', '.join(MODES)}") from None
    if not all(hasattr(mode, a) for a in ("rank", "size", "allgather")):
        raise ConfigurationError(f"{source}={mode!r} is neither a mode nor an exchange",
                                 f"pass one of {', '.join(MODES)}, or an object with rank, size and allgather()")
    return cast(Exchange, mode)


class Exchange(Protocol):
    """Rank, size and an allgather of JSON-serialisable values."""

    rank: int
    size: int

    def allgather(self, value: Any) -> list[Any]:
        """Every rank's value, indexed by rank."""
        ...


class MPIExchange:
    """Allgather over ``MPI.COMM_WORLD`` (or a given communicator), with a timeout."""

    def __init__(self, comm: Any = None, timeout: float = 60.0) -> None:
        from . import mpi

        self.comm = mpi.world() if comm is None else comm
        self.rank = int(self.comm.Get_rank())
        self.size = int(self.comm.Get_size())
        self.timeout = timeout

    def allgather(self, value: Any) -> list[Any]:
        import json  # here: a task's start has no use for it (benchmarks/README.md)

        from . import mpi

        data = json.dumps(value).encode()
        return [json.loads(b) for b in mpi.allgather_bytes(self.comm, data, self.timeout)]


def mpi_exchange(launch: Launch, mode: ExchangeMode | Exchange, timeout: float) -> Exchange | None:
    """The exchange through MPI for ``mode``, or None where the tasks use the rendezvous.

    ``'mpi'``, and ``'auto'`` under mpirun, need MPI (an error if it does not initialise);
    ``'auto'`` in an srun step uses MPI where it initialises (PMI/PMIx), else the rendezvous.
    """
    if not isinstance(mode, ExchangeMode):
        return mode
    if mode is ExchangeMode.MPI or (mode is ExchangeMode.AUTO and launch.mpi_launched):
        return MPIExchange(timeout=timeout)
    if mode is ExchangeMode.AUTO and launch.mpi_capable:
        try:
            return MPIExchange(timeout=timeout)
        except Exception as exc:  # noqa: BLE001 - any failure to initialise MPI falls back
            log.debug("MPI did not initialise under %s (%s); using the rendezvous", launch.launcher, exc)
    return None


class LocalExchange:
    """One rank of an in-process group; make the group with [`group()`][slurm_resolver.exchange.LocalExchange.group]."""

    def __init__(self, rank: int, size: int, shared: dict[str, Any]) -> None:
        self.rank = rank
        self.size = size
        self._shared = shared

    @classmethod
    def group(cls, size: int, timeout: float = 10.0) -> list[LocalExchange]:
        """``size`` connected ranks, to be used from ``size`` threads."""
        if size < 1:
            raise ConfigurationError(f"an exchange group needs at least one rank, not {size}")
        shared: dict[str, Any] = {"barrier": threading.Barrier(size, timeout=timeout), "values": [None] * size}
        return [cls(rank, size, shared) for rank in range(size)]

    def allgather(self, value: Any) -> list[Any]:
        import json

        barrier: threading.Barrier = self._shared["barrier"]
        self._shared["values"][self.rank] = json.loads(json.dumps(value))
        try:
            barrier.wait()
            result = list(self._shared["values"])
            barrier.wait()
        except threading.BrokenBarrierError:
            raise ResolutionError(f"the in-process exchange of {self.size} ranks timed out",
                                  "every rank must call allgather") from None
        return result
