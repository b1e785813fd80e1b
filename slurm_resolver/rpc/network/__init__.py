"""The network: where servers listen and how calls travel, over gRPC or inside one process.

It owns the coordination service over gRPC and the bounds every caller meets as its call opens
(`service`), a task's gRPC server (`server`), the gRPC links (`grpc_network`) and the in-process
ones (`in_process`), a task's event loop thread (`loop`), where leaders listen (`ports`), who calls
(`callers`), their connections (`connections`) and the kernel's view of them (`sockets`). It
carries bytes: it knows nothing of seals, rounds or heartbeats.
"""

from __future__ import annotations

__all__: list[str] = []
