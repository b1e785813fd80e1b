"""TensorFlow's tf.data service on Slurm: a dispatcher and workers from the verified cluster.

    srun python -m slurm_resolver.training.data_service --jobs data_worker=2,dispatcher=1,trainer=2

[`start()`][slurm_resolver.training.data_service.start] gives each task its part: the ``dispatcher`` task runs TF's
``DispatchServer`` on its spare port, with ``work_dir`` in the job's directory and
``fault_tolerant_mode=True`` (a restarted dispatcher keeps its state); ``data_worker``
tasks run ``WorkerServer`` on their spare ports and register with the address peers can
reach (TF's default ``localhost:%port%`` breaks every multi-node job); every other task
consumes with ``dataset.apply(tf.data.experimental.service.distribute(..., service=
service.target))``. When every consumer has called
[`DataService.finish()`][slurm_resolver.training.data_service.DataService.finish], the
dispatcher and the workers stop and return from
[`DataService.serve()`][slurm_resolver.training.data_service.DataService.serve], so the job
ends (tensorflow#56386, #56490: TF's servers do not end by themselves).

The job this module runs when started as a program: each trainer reads a dataset through
the service in each processing mode asked for, prints how many elements it read and writes
every element to its record (``--records``); the dispatcher then says, per mode, whether the
trainers got what the mode promises (see [delivery][slurm_resolver.training.delivery]).
"""

from __future__ import annotations

import argparse
import enum
import os
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..environment import keep_grpc_off_proxies
from ..errors import ConfigurationError, SlurmResolverError
from ..rpc.bootstrapped import Bootstrapped
from . import delivery
from .delivery import Mode
from .native_logs import drain, quiet_tensorflow
from .report import Reporter
from .task import start_task

__all__ = ["DataService", "Role", "start", "main"]

SERVICE_DONE = "data-service-done"


class Role(enum.Enum):
    """A task's part in the service, from its job (`start()`'s ``dispatcher`` and ``workers``)."""

    DISPATCHER = "dispatcher"
    WORKER = "worker"
    CONSUMER = "consumer"


def _finished(rank: int) -> str:
    return f"data-consumer-{rank}-done"


@dataclass
class DataService:
    """This task's view of the job's tf.data service.

    Attributes:
        target: ``grpc://host:port`` of the dispatcher, for ``distribute(service=...)``.
        role: this task's part: the dispatcher, a data worker or a consumer.
        server: this task's ``DispatchServer`` or ``WorkerServer`` (None for a consumer).
        config: the server's configuration (kept to restart it).
    """

    target: str
    role: Role
    b: Bootstrapped
    consumers: tuple[int, ...]
    workers: int
    """How many data workers serve."""
    server: Any = None
    config: Any = None

    def serve(self, timeout: float | None = None) -> None:
        """Dispatcher and workers: serve until every consumer has finished, then stop."""
        if self.role is Role.DISPATCHER:
            for rank in self.consumers:
                self.b.wait_for(_finished(rank), timeout)
            self.b.announce(SERVICE_DONE)
        elif self.role is Role.WORKER:
            self.b.wait_for(SERVICE_DONE, timeout)
        else:
            raise ConfigurationError("serve() is for the dispatcher and the workers", "consumers call finish()")
        if self.server is not None:
            self.server._stop()  # noqa: SLF001 - TF's public stop() is the same call, absent from some versions

    def restart(self) -> None:
        """Dispatcher: stop the server and start a new one on the same port and work_dir (it resumes)."""
        import tensorflow as tf

        if self.role is not Role.DISPATCHER:
            raise ConfigurationError("only the dispatcher restarts")
        self.server._stop()  # noqa: SLF001
        self.server = tf.data.experimental.service.DispatchServer(self.config)

    def finish(self) -> None:
        """Consumer: this task has read all it wants; when all have, the service ends."""
        if self.role is not Role.CONSUMER:
            raise ConfigurationError("finish() is for the consumers", "the dispatcher and workers call serve()")
        self.b.announce(_finished(self.b.rank))


def start(b: Bootstrapped, work_dir: str | os.PathLike[str], *, dispatcher: str = "dispatcher",
          workers: str = "data_worker", fault_tolerant: bool = True) -> DataService:
    """Start this task's part of the tf.data service (see the module's description)."""
    import tensorflow as tf

    spec = b.cluster.packing
    if spec.rank_of(dispatcher, 0) is None or spec.rank_of(workers, 0) is None:
        raise ConfigurationError(f"a tf.data service needs a {dispatcher!r} task and {workers!r} tasks",
                                 f"e.g. --jobs {workers}=2,{dispatcher}=1,trainer=2")
    head = b.task(b.cluster.rank_of(dispatcher, 0))
    target = f"grpc://{head.host}:{head.spare_port}"
    consumers = tuple(r for r, job in enumerate(b.cluster.jobs) if job not in (dispatcher, workers))
    count = sum(1 for job in b.cluster.jobs if job == workers)
    me = b.me
    service = tf.data.experimental.service
    if me.job == dispatcher:
        path = Path(work_dir)
        path.mkdir(parents=True, exist_ok=True)
        config = service.DispatcherConfig(port=me.spare_port, work_dir=str(path),
                                          fault_tolerant_mode=fault_tolerant, worker_timeout_ms=5000)
        return DataService(target, Role.DISPATCHER, b, consumers, count, service.DispatchServer(config), config)
    if me.job == workers:
        config = service.WorkerConfig(dispatcher_address=f"{head.host}:{head.spare_port}",
                                      worker_address=f"{me.host}:%port%", port=me.spare_port,
                                      data_transfer_address=f"{me.host}:%dts_port%", heartbeat_interval_ms=1000)
        return DataService(target, Role.WORKER, b, consumers, count, service.WorkerServer(config), config)
    return DataService(target, Role.CONSUMER, b, consumers, count)


def _heavy(tf: Any, value: Any, work: int) -> Any:
    """A CPU-heavy map: ``work`` rounds of a small matrix product, keeping the value."""
    m = tf.fill([32, 32], tf.cast(value % 7, tf.float32) / 7.0)
    for _ in range(work):
        m = tf.tanh(tf.matmul(m, m))
    return value + tf.cast(tf.reduce_sum(m) * 0.0, tf.int64)


def _consume(b: Bootstrapped, service: DataService, say: Reporter, args: argparse.Namespace) -> dict[str, Any]:
    import tensorflow as tf

    seen: dict[str, Any] = {"rank": b.rank, "trainer": b.task_id}  # and each mode's elements
    dataset = tf.data.Dataset.range(args.elements)
    if args.work:
        dataset = dataset.map(lambda v: _heavy(tf, v, args.work))
    for mode in args.modes:
        source = dataset
        if mode.endless:  # training reads steps from an endless stream, in batches
            source = dataset.repeat().batch(args.batch) if args.batch > 1 else dataset.repeat()
        steps = -(-args.elements // max(1, args.batch))
        through = source
        if mode.served:
            through = source.apply(tf.data.experimental.service.distribute(
                processing_mode=mode.processing, service=service.target, job_name=mode.shared_job))
        if mode.endless:
            through = through.take(steps)
        start = time.monotonic()
        values: list[int] = []
        for value in through:
            values.extend(int(v) for v in tf.reshape(value, [-1]).numpy())
            if args.halfway_notice and len(values) == args.elements // 4 and b.task_id == 0:
                b.announce("halfway")
        elapsed = time.monotonic() - start
        seen[mode.value] = sorted(values)
        say(f"{mode.value}: {len(values)} elements in {elapsed:.2f} s ({len(values) / max(elapsed, 1e-9):.0f}/s)")
    return seen


def _judge(service: DataService, say: Reporter, args: argparse.Namespace, records: Path) -> None:
    """The dispatcher's verdict on what the trainers read, one line per mode."""
    found = delivery.read(records, len(service.consumers))
    if isinstance(found, str):
        say(found)
        return
    for mode in args.modes:
        say(delivery.verdict(mode, [record[mode.value] for record in found], args.elements, service.workers))


def _modes(text: str) -> tuple[Mode, ...]:
    """``--modes``, read once into modes; a word that is none names them all.

    >>> _modes("train,local")
    (<Mode.TRAIN: 'train'>, <Mode.LOCAL: 'local'>)
    """
    modes = []
    for word in text.split(","):
        try:
            modes.append(Mode(word))
        except ValueError:
            raise argparse.ArgumentTypeError(f"{word!r} is no mode: use {', '.join(m.value for m in Mode)}") from None
    return tuple(modes)


def main(argv: Sequence[str] | None = None) -> int:
    """Run this task's part of the job; returns its exit code."""
    parser = argparse.ArgumentParser(prog="python -m slurm_resolver.training.data_service",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", default="data_worker=2,dispatcher=1,trainer=2")
    parser.add_argument("--elements", type=int, default=200, help="size of the dataset, range(N)")
    parser.add_argument("--work", type=int, default=0, help="rounds of CPU-heavy work per element")
    parser.add_argument("--modes", type=_modes, default="distributed_epoch,parallel_epochs,shared_parallel",
                        help=f"how each trainer reads, in turn: {', '.join(mode.value for mode in Mode)}")
    parser.add_argument("--work-dir", default=os.path.join(os.getcwd(), "tf-data-service-%j"),
                        help="the dispatcher's journal, on a shared file system (%%j: the job id)")
    parser.add_argument("--keep-work-dir", action="store_true",
                        help="keep the work dir once every consumer finished (by default a work dir this "
                             "job made is removed; one that existed before is left as it was)")
    parser.add_argument("--restart-dispatcher", action="store_true",
                        help="the dispatcher restarts (same port and work_dir) when trainer 0 is a quarter through")
    parser.add_argument("--batch", type=int, default=1, help="elements per batch in the train and local modes")
    parser.add_argument("--threads", type=int, default=0, help="TensorFlow's threads per task (0: its default)")
    parser.add_argument("--records", default=os.path.join(os.getcwd(), "data-service-%j"),
                        help="where each trainer writes every element it read (trainer-<index>.json), on a shared "
                             "file system, for the dispatcher's verdict (%%j: the job id; '': no records)")
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args(argv)
    args.halfway_notice = args.restart_dispatcher
    quiet_tensorflow()  # before TensorFlow is imported
    keep_grpc_off_proxies()  # before its first channel
    b = start_task("data_service", args.jobs, args.timeout, needs="tensorflow", own_gpus=False)
    if b is None:
        return 1
    say = Reporter(b)
    code = 0
    if args.threads:
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    try:
        work_dir = args.work_dir.replace("%j", b.cluster.job_id or "local")
        made_here = not os.path.exists(work_dir)  # only a work dir this job made is removed at the end
        service = start(b, work_dir)
        b.barrier("tf-data-service-up", args.timeout)
        records = Path(args.records.replace("%j", b.cluster.job_id or "local")) if args.records else None
        if service.role is Role.CONSUMER:
            seen = _consume(b, service, say, args)
            if records is not None:
                say(f"every element read: {delivery.write(records, b.task_id, seen)}")
            service.finish()
        else:
            say(f"{service.role.value} serving for {len(service.consumers)} consumers (dispatcher {service.target})")
            if service.role is Role.DISPATCHER and args.restart_dispatcher:
                b.wait_for("halfway", args.timeout)
                service.restart()
                say("dispatcher restarted from its work_dir")
            service.serve()
            say("every consumer finished: stopped")
            if service.role is Role.DISPATCHER and made_here and not args.keep_work_dir:
                shutil.rmtree(work_dir, ignore_errors=True)  # nothing left to resume
            if service.role is Role.DISPATCHER and records is not None:
                _judge(service, say, args, records)
    except SlurmResolverError as exc:
        say(f"FAILED: {exc.one_line()}")
        code = 1
    b.stop()
    sys.stdout.flush()
    drain()
    os._exit(code)  # leave without waiting on TensorFlow's server threads


if __name__ == "__main__":
    sys.exit(main())
