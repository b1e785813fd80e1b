"""Many tasks of one launch in one process, for benchmarks and tests only: over the in-process network
(`simulate`) or over real gRPC on loopback addresses (`loopback`). Nothing of the package imports it.
"""

from __future__ import annotations

__all__: list[str] = []
