"""PyTorch DistributedDataParallel on Slurm, wired by the bootstrap.

    srun python -m slurm_resolver.training.ddp [--epochs 5]

Every task bootstraps, takes ``MASTER_ADDR``/``MASTER_PORT``/``RANK``/``WORLD_SIZE`` from
the bootstrap's adapter (rank 0's spare port: free, and reserved for this), and trains a
small regression model with ``DistributedDataParallel`` over a ``DistributedSampler``:
gloo on CPUs, NCCL where the task has GPUs (one device each, from Slurm's binding).
Rank 0 prints the loss of every epoch, averaged over all ranks, and a summary.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence

from ..environment import export_defaults
from .report import Reporter
from .task import start_task

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run this task's part of the job; returns its exit code."""
    parser = argparse.ArgumentParser(prog="python -m slurm_resolver.training.ddp", description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", default=None, help="ignored by DDP beyond naming the tasks (default: all workers)")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--samples", type=int, default=4096)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--learning-rate", type=float, default=0.05)
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args(argv)
    from .. import adapters

    b = start_task("ddp", args.jobs, args.timeout, needs="torch")
    if b is None:
        return 1
    adapters.apply(adapters.torch_env(b), overwrite=True)
    say = Reporter(b)
    env = adapters.torch_env(b)
    say(f"bootstrapped in {sum(b.timings.values()):.2f} s: rank {b.rank} of {b.world_size}, local rank "
        f"{env['LOCAL_RANK']}; PyTorch meets at {env['MASTER_ADDR']}:{env['MASTER_PORT']}")
    b.stop()  # the cluster is verified; PyTorch's store takes rank 0's spare port from here

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data import DataLoader, TensorDataset
    from torch.utils.data.distributed import DistributedSampler

    cuda = torch.cuda.is_available() and bool(b.me.gpus)
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    start = time.monotonic()
    dist.init_process_group("nccl" if cuda else "gloo", init_method="env://")
    if b.rank == 0:
        say(f"process group up ({dist.get_backend()}, {dist.get_world_size()} ranks) in "
            f"{time.monotonic() - start:.2f} s")
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(args.samples, 8, generator=generator) * 2 - 1
    y = x @ torch.tensor([[0.5], [-1.0], [2.0], [0.25], [-0.75], [1.5], [0.0], [1.0]]) + 0.5
    sampler: DistributedSampler[tuple[torch.Tensor, ...]] = DistributedSampler(TensorDataset(x, y), shuffle=True,
                                                                               seed=0)
    loader = DataLoader(TensorDataset(x, y), batch_size=args.batch, sampler=sampler)
    torch.manual_seed(0)
    first_loss = None
    model = DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(),
                                                        torch.nn.Linear(32, 1)).to(device),
                                    device_ids=[0] if cuda else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.learning_rate)
    for epoch in range(1, args.epochs + 1):
        sampler.set_epoch(epoch)
        total, batches = torch.zeros(2, device=device), 0
        for features, target in loader:
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(features.to(device)), target.to(device))
            loss.backward()  # type: ignore[no-untyped-call]
            optimizer.step()
            total[0] += loss.detach()
            batches += 1
        total[1] = batches
        dist.all_reduce(total)
        loss_now = float(total[0] / total[1])
        first_loss = loss_now if first_loss is None else first_loss
        if b.rank == 0:
            say(f"epoch {epoch}/{args.epochs}: loss {loss_now:.4f} "
                f"({int(total[1])} batches over {dist.get_world_size()} ranks)")
    dist.barrier()
    if b.rank == 0:
        say(f"summary: {args.epochs} epochs on {dist.get_world_size()} ranks ({len(set(b.cluster.nodes))} nodes) in "
            f"{time.monotonic() - start:.1f} s at learning rate {args.learning_rate:g}; loss {first_loss:.4f} -> "
            f"{loss_now:.4f}")
    dist.destroy_process_group()
    return 0


def leave(code: int) -> None:
    """End the process with ``code`` without Python's finalization.

    PyTorch keeps a gloo process group alive after ``destroy_process_group()`` once a
    ``DistributedDataParallel`` was built on it, so its worker threads outlive ``main``. A worker
    that drops its last reference to a finished collective's tensors takes the GIL to do it; if
    that happens once the interpreter is finalizing, CPython 3.11 ends the thread inside a
    ``noexcept`` destructor and the whole task aborts ("terminate called without an active
    exception", about 1 run in 10 on a loaded node). The job's work is done and its output
    flushed here, so nothing is lost by skipping the finalization.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    export_defaults({"OMP_NUM_THREADS": "1"})
    leave(main())
