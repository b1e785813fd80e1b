"""The bootstrap: servers, the tree of node leaders, the messages, and the networks they run on.

Its wings, each a sub-package that says what it owns (``tests/test_layers.py`` holds them to it:
the rounds and failure detection never import each other, nor do the network and trust, nor the
rounds and diagnosis; diagnosis never imports failure detection; the base imports no wing; only
benchmarks and tests import the simulation):

- the base: `messages` (the protocol's state as values: rounds, sources, records, failures and their
  causes), `refusals` (how a call fails: a server's refusal, what the caller sees), `shapes` (what a call
  is: its shape, its bounds, the part of a task's server that answers it: each call's row), `transport` (the
  networks' contract: links and servers; waits on calls), `wire` (the envelope every message opens with, and
  the limits), `waits` (a flag, a wait with a deadline, a value that comes later, and what the bootstrap
  agrees), `tree` (its shape, each task's place, its deadlines), `proto3` (protocol buffers' wire format,
  without protobuf), `protos` (the message classes, generated; and `coordination_pb2`, protoc's, for the
  tests), `primitives` (hashes, nonces and jitter without the modules that load OpenSSL);
- `rounds`: `codec` (Join's messages), `state` (the rounds one server keeps), `coordinator`
  (Join's server side, and its row), `uplink` (one task's calls up the tree), `member` (one task's
  rounds, barriers, votes and notices);
- `detection`: `beats` (the watch's messages), `deaths` (what both sides share), `watch` (a
  leader's side, and Watch's server side and row), `heartbeat` (a task's side), `detector` (one
  task's failure detection, and its judge of hangs on the progress marks the beats carry), `crashes`
  (an uncaught exception as the task's failure), `processes` (what a task sees of its node's
  processes in the kernel);
- `diagnosis`: where a hung job is: `marks` (sets of ranks and progress marks on the wire), `judge`
  (a hang said where every task is, and the step failed), `stacks_wire` (Stacks' messages: the ask, the
  answer, their bounds), and a call's module each (`*_call`: `stacks_call`, every task's stacks down the
  tree, merged on the way up);
- `trust`: `seals` (a secret's, MUNGE's, or none: made and checked), `choice` (which, from ``auth=``
  and the environment: the job's secret read once), `gate` (the checks every call meets), `identity`
  (WhoAreYou's both sides and row), `verify` (the peers found, checked);
- `network`: `service` (the service over gRPC, a method per shape, and the bounds every caller
  meets), `server` (a task's gRPC server), `grpc_network` and `in_process` (the two networks and
  their links), `loop` (a task's event loop thread), `ports`, `callers`, `connections`, `sockets`;
- `simulation` (benchmarks and tests only): `simulate` (many tasks in one process), `loopback`
  (many over real gRPC);
- the top: `calls` (the service's table, collected from each call's row), `handlers` (a task's
  server, built whole once: its parts behind one gate), `options` (every knob, checked once),
  `start` (a task's proof and its server started), `exchanges` (the tree rendezvous and MPI's
  allgather), `bootstrapped` and `view` (what the bootstrap returns), `bootstrap` (its phases),
  `learn` (a layout learned from the step's tasks).

A call's own module (``*_call``, in the wing it belongs to) holds its codec, its part and its row,
and needs no line here: `calls` names it.

Nothing here is imported by ``import slurm_resolver``; grpc loads with the first server.
"""

from __future__ import annotations

__all__: list[str] = []
