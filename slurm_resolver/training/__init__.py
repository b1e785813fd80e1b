"""Real distributed jobs on Slurm, wired by the bootstrap: run them as modules under srun.

- [`parameter_server`][slurm_resolver.training.parameter_server]: TensorFlow's ParameterServerStrategy with
a ClusterCoordinator
  (chief, ps, workers, an optional evaluator beside them), which ends cleanly;
- [`data_service`][slurm_resolver.training.data_service]: TensorFlow's tf.data service (a dispatcher and
workers) started
  from the verified cluster, and trainers that consume from it;
- [`ddp`][slurm_resolver.training.ddp]: PyTorch DistributedDataParallel (gloo on CPU, NCCL on GPUs);
- [`jax_job`][slurm_resolver.training.jax_job]: JAX's ``jax.distributed.initialize`` from the bootstrap.

Each bootstraps in-process (its server stays up for the job's notices and barriers) and
prints one line per event, prefixed with the task that says it.
"""

from __future__ import annotations

__all__: list[str] = []
