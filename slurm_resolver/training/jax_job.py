"""JAX on Slurm: ``jax.distributed.initialize`` with its coordinator from the bootstrap.

    srun python -m slurm_resolver.training.jax_job

Every task bootstraps; rank 0's spare port becomes JAX's coordinator, every task's rank
its ``process_id`` (and its GPUs, as ordinals of its process, its ``local_device_ids``).
The tasks then sum their ranks across processes with a ``psum`` over all devices and fit
a line by gradient descent, averaging gradients with the same collective; rank 0 prints
both.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ..environment import export_defaults, keep_grpc_off_proxies
from .report import Reporter
from .task import start_task

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run this task's part of the job; returns its exit code."""
    parser = argparse.ArgumentParser(prog="python -m slurm_resolver.training.jax_job",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", default=None, help="job names of the tasks (default: all workers)")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args(argv)
    from .. import adapters

    b = start_task("jax_job", args.jobs, args.timeout, needs="jax")
    if b is None:
        return 1
    say = Reporter(b)
    export_defaults(adapters.jax_platforms(b))  # CPU where the GPUs it sees are not its own; else JAX's choice
    arguments = adapters.jax_arguments(b)
    keep_grpc_off_proxies()  # JAX's coordination service is gRPC
    b.stop()  # JAX's coordinator takes rank 0's spare port from here

    import jax
    import jax.numpy as jnp
    from jax.experimental import multihost_utils

    jax.distributed.initialize(**arguments)
    total = multihost_utils.process_allgather(jnp.array([b.rank])).sum()
    if b.rank == 0:
        say(f"{jax.process_count()} processes, {jax.device_count()} devices; sum of ranks {int(total)}")
    x = jnp.linspace(-1.0, 1.0, 64) + b.rank  # each process holds its own shard of the data
    y = 3.0 * x - 2.0
    w = jnp.zeros(2)

    def loss(w: jnp.ndarray) -> jnp.ndarray:
        return jnp.mean((w[0] * x + w[1] - y) ** 2)

    step = jax.jit(jax.grad(loss))
    for _ in range(args.steps):
        grads = multihost_utils.process_allgather(step(w)).mean(axis=0)  # averaged over every process
        w = w - 0.2 * grads
    if b.rank == 0:
        say(f"fitted y = {float(w[0]):.3f} x + {float(w[1]):.3f} (true: 3 x - 2), loss {float(loss(w)):.5f}")
    jax.distributed.shutdown()  # type: ignore[no-untyped-call]
    return 0


if __name__ == "__main__":
    sys.exit(main())
