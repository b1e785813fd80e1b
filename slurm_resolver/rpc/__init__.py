"""The bootstrap: servers, the tree of node leaders, the messages, and the networks they run on.

Its modules, from the bottom up (each imports only modules below it; ``tests/test_layers.py``
holds them to that):

- :mod:`.messages` (the protocol's state as values: rounds, sources, records, failures),
  :mod:`.transport` (what a server answers, how a task calls, and how calls fail),
  :mod:`.ports` (where leaders listen), :mod:`.loop` (a task's event loop thread);
- :mod:`.wire` (every message built and read, bounded and checked), :mod:`.auth` (seals:
  a secret, MUNGE, or none), :mod:`.tree` (its shape, each task's place, its deadlines);
- :mod:`.rounds` (the rounds one server keeps), :mod:`.heartbeat` (what both sides of
  failure detection share), :mod:`.options` (every knob, checked once);
- :mod:`.coordinator` (one server's handlers), :mod:`.uplink` (one task's calls up the
  tree), :mod:`.server` and :mod:`.local` (gRPC servers, and the in-process network),
  :mod:`.watch` and :mod:`.listen` (failure detection: a leader's side, a task's side);
- :mod:`.grpc_network` (the real network), :mod:`.member` (one task's rounds, barriers,
  votes and notices), :mod:`.detector` (one task's failure detection);
- :mod:`.bootstrapped` (what the bootstrap returns), :mod:`.bootstrap` (its phases);
- :mod:`.learn` (a layout learned from the step's tasks) and :mod:`.simulate` (many tasks
  in one process).

Nothing here is imported by ``import slurm_resolver``; grpc loads with the first server.
"""

from __future__ import annotations

__all__: list[str] = []
