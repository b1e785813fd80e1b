"""The bootstrap: servers, the tree of node leaders, the messages, and the networks they run on.

Its modules, from the bottom up (each imports only modules below it; ``tests/test_layers.py``
holds them to that):

- `messages` (the protocol's state as values: rounds, sources, records, failures),
  `transport` (what a server answers, how a task calls, and how calls fail),
  `ports` (where leaders listen), `loop` (a task's event loop thread), `callers`
  (who calls a server, and each caller's share of it);
- `wire` (every message built and read, bounded and checked; `beats` and `identity`
  for the watch's and WhoAreYou's), `auth` (seals:
  a secret, MUNGE, or none), `tree` (its shape, each task's place, its deadlines);
- `rounds` (the rounds one server keeps), `deaths` (what both sides of
  failure detection share), `options` (every knob, checked once);
- `coordinator` (one server's handlers), `uplink` (one task's calls up the
  tree), `server` and `local` (gRPC servers, and the in-process network),
  `watch` and `heartbeat` (failure detection: a leader's side, a task's side);
- `grpc_network` (the real network), `member` (one task's rounds, barriers,
  votes and notices), `detector` (one task's failure detection);
- `bootstrapped` (what the bootstrap returns), `bootstrap` (its phases);
- `learn` (a layout learned from the step's tasks) and `simulate` (many tasks
  in one process).

Nothing here is imported by ``import slurm_resolver``; grpc loads with the first server.
"""

from __future__ import annotations

__all__: list[str] = []
