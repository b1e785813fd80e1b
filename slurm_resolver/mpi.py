"""The seam to MPI (mpi4py), imported only when an exchange needs it.

``import mpi4py.MPI`` initialises MPI, so nothing here runs at import time of
slurm_resolver; only `world()` does, and only when the launcher is an MPI one.
"""

from __future__ import annotations

import time
from typing import Any

from .errors import ResolutionError
from .optional import import_optional

__all__: list[str] = []  # internal: no public names (docs/reference.md)


def world() -> Any:
    """``MPI.COMM_WORLD``, initialising MPI on first use."""
    return import_optional("mpi4py.MPI", "mpi", "An exchange between MPI ranks").COMM_WORLD


def allgather_bytes(comm: Any, data: bytes, timeout: float) -> list[bytes]:
    """Gather one byte string from every rank, failing after ``timeout`` seconds.

    Non-blocking collectives are polled, so a rank that never arrives is an error
    rather than a hang.
    """
    import array

    from mpi4py import MPI

    size = comm.Get_size()
    deadline = time.monotonic() + timeout
    # Every buffer of a non-blocking collective must outlive the request: keep them named.
    mine = array.array("q", [len(data)])
    lengths = array.array("q", [0] * size)
    _poll(comm.Iallgather([mine, MPI.INT64_T], [lengths, MPI.INT64_T]), deadline, timeout, size)
    counts = [int(n) for n in lengths]
    displacements = [sum(counts[:i]) for i in range(size)]
    buffer = bytearray(sum(counts))
    send = bytearray(data)
    request = comm.Iallgatherv([send, MPI.BYTE], [buffer, counts, displacements, MPI.BYTE])
    _poll(request, deadline, timeout, size)
    del mine, send
    return [bytes(buffer[d:d + c]) for d, c in zip(displacements, counts)]


def _poll(request: Any, deadline: float, timeout: float, size: int) -> None:
    pause = 0.0005
    while not request.Test():
        if time.monotonic() > deadline:
            raise ResolutionError(
                f"the MPI exchange between {size} ranks did not complete within {timeout:g} s: "
                "at least one rank did not start, crashed, or does not call slurm_resolver",
                "make every rank resolve the cluster, or raise the timeout",
            )
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


def finalize() -> None:
    """Finalize MPI if this process initialised it (before ``exec`` hands the task to a command)."""
    import sys

    module = sys.modules.get("mpi4py.MPI")
    if module is not None and module.Is_initialized() and not module.Is_finalized():
        module.Finalize()
