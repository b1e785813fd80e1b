"""The bootstrap: servers, the tree of node leaders, the messages, and the networks they run on.

- :mod:`.bootstrap`: ``bootstrap()``, the orchestration of one task;
- :mod:`.bootstrapped`: the verified cluster it returns;
- :mod:`.protocol`: rounds up and down the tree, for one task;
- :mod:`.tree`: the shape of the tree and its deadlines (pure);
- :mod:`.coordinator`: what one server coordinates (transport-agnostic);
- :mod:`.wire`: the messages of ``coordination.proto``, bounded and checked;
- :mod:`.transport`, :mod:`.grpc_network`, :mod:`.local`: the network contract, real
  gRPC, and an in-process network for tests and the scale benchmark;
- :mod:`.server`: the ``tf.train.Server``-shaped gRPC server of every task.

Nothing here is imported by ``import slurm_resolver``; grpc loads with the first server.
"""

from __future__ import annotations

__all__: list[str] = []
