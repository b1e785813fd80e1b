"""The bootstrap: servers, the tree of node leaders, the messages, and the networks they run on.

Its wings, each a sub-package that says what it owns (``tests/test_layers.py`` holds them to it:
the rounds and failure detection never import each other, nor do the network and trust; the base
imports no wing; only benchmarks and tests import the simulation):

- the base: `messages` (the protocol's state as values: rounds, sources, records, failures and
  their causes), `transport` (what a server answers, how a task calls, and how calls fail),
  `calls` (the table of the service's calls: each declared once), `wire` (the envelope every
  message opens with, and the limits), `waits` (a flag and a wait with a deadline, cheap),
  `tree` (its shape, each task's place, its deadlines), `protos` (the message classes;
  `coordination_pb2` and `coordination_descriptor`, generated);
- `rounds`: `codec` (Join's messages), `state` (the rounds one server keeps), `coordinator`
  (Join's server side), `uplink` (one task's calls up the tree), `member` (one task's rounds,
  barriers, votes and notices);
- `detection`: `beats` (the watch's messages), `deaths` (what both sides share), `watch` (a
  leader's side, and Watch's server side), `heartbeat` (a task's side), `detector` (one task's
  failure detection, and its judge of hangs on the progress marks the beats carry), `crashes` (an
  uncaught exception as the task's failure), `stacks_call` (Stacks: every task's stacks down the
  tree, merged on the way up);
- `trust`: `seals` (a secret's, MUNGE's, or none: made and checked), `choice` (which, from ``auth=``
  and the environment: the job's secret read once), `gate` (the checks every call meets), `identity`
  (WhoAreYou's both sides), `verify` (the peers found, checked);
- `network`: `service` (the service over gRPC, and the bounds every caller meets), `server`
  (a task's gRPC server), `grpc_network` and `in_process` (the two networks and their links),
  `loop` (a task's event loop thread), `ports`, `callers`, `connections`, `sockets`;
- `simulation` (benchmarks and tests only): `simulate` (many tasks in one process), `loopback`
  (many over real gRPC);
- the top: `handlers` (a task's server: the wings' handlers behind one gate), `options` (every
  knob, checked once), `bootstrapped` and `view` (what the bootstrap returns), `bootstrap` (its
  phases), `learn` (a layout learned from the step's tasks).

Nothing here is imported by ``import slurm_resolver``; grpc loads with the first server.
"""

from __future__ import annotations

__all__: list[str] = []
