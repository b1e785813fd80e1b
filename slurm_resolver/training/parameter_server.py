"""Parameter-server training on Slurm, as a real job that ends.

    srun python -m slurm_resolver.training.parameter_server --jobs chief=1,ps=2,worker=2 [--epochs 5]

Every task bootstraps in-process. ps and worker tasks start TensorFlow's servers on their
spare ports and wait; the chief trains a small Keras model (``tf_keras``: TensorFlow 2.16+
ships Keras 3, which has no ParameterServerStrategy) on synthetic data with
TensorFlow's ``ParameterServerStrategy`` and a ``ClusterCoordinator``, writes a
checkpoint, then announces the end through the bootstrap's coordination service, and
every task exits. TensorFlow's own servers never end (``server.join()`` blocks forever,
tensorflow#4713): here they do.

What TensorFlow leaves to the user, done here: a chief is required (without one the
strategy stalls, tensorflow#48957); ps tasks get no GPU; an evaluator runs beside the
training cluster, not in its TF_CONFIG (tensorflow#46169), and evaluates the final
checkpoint; a worker that dies is TensorFlow's to handle (the coordinator reschedules its
steps on the others); a ps that dies ends the job with an error naming it.
"""

from __future__ import annotations

import argparse
import enum
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..cluster_spec import ClusterSpec
from ..environment import keep_grpc_off_proxies
from ..errors import ConfigurationError, SlurmResolverError
from ..rpc.bootstrapped import Bootstrapped
from .native_logs import drain, quiet_tensorflow
from .report import Reporter
from .task import start_task

__all__ = ["Role", "main", "training_spec"]

DONE = "training-done"
SERVERS_UP = "tensorflow-servers"
_FEATURES = 8


class Role(enum.Enum):
    """A task's part in parameter-server training: its job's name, in TensorFlow's words."""

    CHIEF = "chief"
    """Trains: the strategy's coordinator, which writes the checkpoint and announces the end."""
    PS = "ps"
    WORKER = "worker"
    EVALUATOR = "evaluator"
    """Evaluates the final checkpoint beside the training cluster, outside its TF_CONFIG (tensorflow#46169)."""

    @property
    def trains(self) -> bool:
        """Whether its tasks are in the cluster TensorFlow trains on."""
        return self is not Role.EVALUATOR

    @property
    def serves(self) -> bool:
        """Whether its tasks serve TensorFlow's servers until the end (ps and workers)."""
        return self in (Role.PS, Role.WORKER)


def training_spec(b: Bootstrapped) -> ClusterSpec:
    """The cluster TensorFlow trains on: every job but the evaluator, on the spare ports."""
    spec = b.framework_spec().as_dict()
    return ClusterSpec({job: tasks for job, tasks in spec.items() if job not in _OUTSIDE})


_OUTSIDE = frozenset(role.value for role in Role if not role.trains)
"""The jobs whose tasks are no part of the training cluster (the evaluator's)."""


def _data(tf: Any, seed: int, count: int) -> Any:
    """A synthetic regression: y = x . w + 0.5, the same w everywhere."""
    x = tf.random.stateless_uniform([count, _FEATURES], seed=[seed, 7], minval=-1.0, maxval=1.0)
    w = tf.constant([[0.5], [-1.0], [2.0], [0.25], [-0.75], [1.5], [0.0], [1.0]])
    return x, tf.matmul(x, w) + 0.5


def _model(keras: Any) -> Any:
    return keras.Sequential([keras.Input(shape=(_FEATURES,)), keras.layers.Dense(32, activation="relu"),
                             keras.layers.Dense(1)])


def _failed_task(b: Bootstrapped, error: Exception) -> str:
    """The task a TensorFlow error names (``/job:ps/replica:0/task:1``), as ``ps:1 (rank 2) on node2``."""
    import re

    found = re.search(r"/job:(\w+)/replica:\d+/task:(\d+)", str(error))
    if not found:
        return "a task of the training cluster"
    job, index = found.group(1), int(found.group(2))
    try:
        return b.task(b.cluster.rank_of(job, index)).label
    except ValueError:
        return f"{job}:{index}"


def _train(b: Bootstrapped, say: Reporter, args: argparse.Namespace) -> int:
    import tensorflow as tf
    import tf_keras as keras

    from ..resolvers.base import SimpleClusterResolver

    resolver = SimpleClusterResolver(training_spec(b), task_type="chief", task_id=0, rpc_layer="grpc")
    strategy = tf.distribute.experimental.ParameterServerStrategy(resolver.to_tensorflow())
    coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        model = _model(keras)
        optimizer = keras.optimizers.SGD(learning_rate=args.learning_rate)

    def dataset_fn() -> Any:
        x, y = _data(tf, 1, 4096)
        return tf.data.Dataset.from_tensor_slices((x, y)).shuffle(4096).batch(args.batch).repeat()

    iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))

    @tf.function  # type: ignore[untyped-decorator]
    def step(iterator: Any) -> Any:
        def replica(x: Any, y: Any) -> Any:
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(model(x, training=True) - y))
            optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
            return loss

        x, y = next(iterator)
        return strategy.reduce(tf.distribute.ReduceOp.MEAN, strategy.run(replica, args=(x, y)), axis=None)

    workers = len(training_spec(b).as_dict().get("worker", []))
    say(f"training on {workers} workers and {len(training_spec(b).as_dict().get('ps', []))} ps: "
        f"{args.epochs} epochs of {args.steps} steps")
    try:
        for epoch in range(1, args.epochs + 1):
            last = None
            for _ in range(args.steps):
                last = coordinator.schedule(step, args=(iterator,))
            coordinator.join()
            assert last is not None
            say(f"epoch {epoch}/{args.epochs}: loss {float(last.fetch()):.4f}")
    except (tf.errors.UnavailableError, tf.errors.AbortedError, tf.errors.CancelledError,
            tf.errors.InternalError) as exc:
        say(f"FAILED: {_failed_task(b, exc)} failed during training; the job ends "
            f"({exc.__class__.__name__}: {str(exc).splitlines()[0][:200]})")
        return 1
    tf.train.Checkpoint(model=model).write(str(Path(args.checkpoint_dir) / "final"))
    say(f"trained; checkpoint in {args.checkpoint_dir}")
    return 0


def _evaluate(b: Bootstrapped, say: Reporter, args: argparse.Namespace) -> int:
    import tensorflow as tf
    import tf_keras as keras

    say("waiting for the chief's checkpoint")
    b.wait_for(DONE)
    model = _model(keras)
    path = tf.train.latest_checkpoint(args.checkpoint_dir) or str(Path(args.checkpoint_dir) / "final")
    tf.train.Checkpoint(model=model).read(path).expect_partial()
    x, y = _data(tf, 2, 1024)  # held-out data
    say(f"evaluated the final checkpoint: loss {float(tf.reduce_mean(tf.square(model(x) - y))):.4f}")
    return 0


def _serve(b: Bootstrapped, say: Reporter, args: argparse.Namespace) -> int:
    import tensorflow as tf

    server = tf.distribute.Server(training_spec(b).as_cluster_def(), job_name=b.task_type, task_index=b.task_id,
                                  protocol="grpc", start=True)
    b.barrier(SERVERS_UP, args.timeout)
    say(f"serving at {server.target.decode() if isinstance(server.target, bytes) else server.target}")
    b.wait_for(DONE)
    say("the chief is done: leaving")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run this task's part of the job; returns its exit code."""
    parser = argparse.ArgumentParser(prog="python -m slurm_resolver.training.parameter_server",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", default="chief=1,ps=2,worker=2", help="e.g. chief=1,ps=2,worker=2[,evaluator=1]")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20, help="steps per epoch")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--learning-rate", type=float, default=0.05)
    parser.add_argument("--checkpoint-dir", default=os.path.join(os.getcwd(), "checkpoints-%j"))
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds for the bootstrap and barriers")
    args = parser.parse_args(argv)
    def needs_chief_ps_and_workers(jobs: dict[str, int] | list[str] | None) -> None:
        if not isinstance(jobs, dict) or jobs.get(Role.CHIEF.value) != 1 or not jobs.get(Role.PS.value) \
                or not jobs.get(Role.WORKER.value):
            raise ConfigurationError(f"--jobs {args.jobs!r} must have one chief, ps and workers",
                                     "e.g. --jobs chief=1,ps=2,worker=2: without a chief the strategy stalls")
        unknown = sorted(set(jobs) - {role.value for role in Role})
        if unknown:
            raise ConfigurationError(f"--jobs {args.jobs!r} names {', '.join(unknown)}, no part of parameter-server "
                                     "training", f"use {', '.join(role.value for role in Role)}")

    quiet_tensorflow()  # before TensorFlow is imported
    keep_grpc_off_proxies()  # before its first channel
    b = start_task("parameter_server", args.jobs, args.timeout, needs_chief_ps_and_workers, needs="tensorflow",
                   gpus_per_task={"ps": 0})
    if b is None:
        return 1
    args.checkpoint_dir = args.checkpoint_dir.replace("%j", b.cluster.job_id or "local")
    say = Reporter(b)
    role = Role(b.task_type)  # one of them: --jobs was checked
    try:
        if role.serves:
            code = _serve(b, say, args)
        elif role is Role.CHIEF:
            b.barrier(SERVERS_UP, args.timeout)
            code = _train(b, say, args)
            b.announce(DONE)
        else:
            b.barrier(SERVERS_UP, args.timeout)
            code = _evaluate(b, say, args)
    except SlurmResolverError as exc:
        say(f"FAILED: {exc.one_line()}")
        code = 1
    b.stop()
    sys.stdout.flush()
    drain()
    os._exit(code)  # TensorFlow's servers have no clean way out (tensorflow#4713): leave without waiting on them


if __name__ == "__main__":
    sys.exit(main())
