"""What the tf.data service delivered: each trainer's record in a file, one verdict per mode for the job.

A trainer writes every element it read, per mode, to ``<dir>/trainer-<index>.json`` and
prints only counts; once every trainer has finished, the dispatcher reads the records
and says whether the job got what each mode promises (every element exactly once across
the trainers, a full epoch from every worker, ...). The records stay for a closer look.
"""

from __future__ import annotations

import enum
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["Mode", "write", "read", "verdict"]


class Mode(enum.Enum):
    """How a trainer reads (``--modes``), what it asks of the service, and what it promises."""

    DISTRIBUTED_EPOCH = "distributed_epoch"
    """Every element once across the trainers (TF's ``distributed_epoch``)."""
    PARALLEL_EPOCHS = "parallel_epochs"
    """A full epoch from every worker to every trainer."""
    SHARED_PARALLEL = "shared_parallel"
    """Two trainers splitting the workers' epochs (one job name)."""
    TRAIN = "train"
    """Steps of an endless stream from every worker, which goes on when a worker is lost."""
    LOCAL = "local"
    """The same pipeline run in the trainer itself, without the service (to compare)."""

    @property
    def processing(self) -> str:
        """TF's ``processing_mode`` for it."""
        return "distributed_epoch" if self is Mode.DISTRIBUTED_EPOCH else "parallel_epochs"

    @property
    def shared_job(self) -> str | None:
        """The job name its trainers share, where they split one job's elements (None: each its own)."""
        return {Mode.DISTRIBUTED_EPOCH: "shared-distributed", Mode.SHARED_PARALLEL: "shared-parallel"}.get(self)

    @property
    def endless(self) -> bool:
        """Whether a trainer reads steps of an endless stream (in batches) rather than epochs."""
        return self in (Mode.TRAIN, Mode.LOCAL)

    @property
    def served(self) -> bool:
        """Whether it reads through the service."""
        return self is not Mode.LOCAL

    def copies(self, workers: int) -> int | None:
        """How many times every element reaches the trainers together; None where that is not the promise."""
        return {Mode.DISTRIBUTED_EPOCH: 1, Mode.SHARED_PARALLEL: workers}.get(self)


def write(directory: Path, trainer: int, seen: Mapping[str, Any]) -> Path:
    """Write trainer ``trainer``'s record (mode -> the elements it read) into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"trainer-{trainer}.json"
    path.write_text(json.dumps(dict(seen)) + "\n")
    return path


def read(directory: Path, trainers: int) -> list[dict[str, Any]] | str:
    """The records of trainers 0 to ``trainers - 1``, or why they cannot be read."""
    records = []
    for trainer in range(trainers):
        path = directory / f"trainer-{trainer}.json"
        try:
            records.append(json.loads(path.read_text()))
        except (OSError, ValueError) as exc:
            return f"no verdict: trainer {trainer}'s record {path} cannot be read ({exc.__class__.__name__}; " \
                   "is the directory on a file system every node shares?)"
    return records


def _difference(got: Counter[int], expected: Counter[int]) -> str:
    missing, extra = sum((expected - got).values()), sum((got - expected).values())
    if not missing and not extra:
        return ""
    return ", ".join(part for part in (f"{missing} missing" if missing else "",
                                       f"{extra} more than expected" if extra else "") if part)


def verdict(mode: Mode, seen: Sequence[Sequence[int]], elements: int, workers: int) -> str:
    """One line on what the trainers read in ``mode`` (one list of elements per trainer) against what it promises.

    >>> verdict(Mode.DISTRIBUTED_EPOCH, [[0, 2], [1, 3]], 4, 2)
    'distributed_epoch: 4 elements across 2 trainers (2 + 2): every element exactly once'
    >>> verdict(Mode.DISTRIBUTED_EPOCH, [[0, 2], [2]], 4, 2).split(": ", 2)[2]
    'NOT every element exactly once: 2 missing, 1 more than expected'
    """
    counts = " + ".join(str(len(s)) for s in seen)
    total = sum(len(s) for s in seen)
    epoch = Counter(range(elements))
    across = f"{mode.value}: {total} elements across {len(seen)} trainers ({counts})"
    copies = mode.copies(workers)
    if copies is not None:
        wrong = _difference(Counter(v for s in seen for v in s), Counter({k: copies for k in epoch}))
        promise = "every element exactly once" if copies == 1 else f"every element once from each of the {workers} " \
                                                                   "workers"
        return f"{across}: {'NOT ' + promise + ': ' + wrong if wrong else promise}"
    if mode is Mode.PARALLEL_EPOCHS:
        each = [f"trainer {i}: {w}" for i, s in enumerate(seen)
                if (w := _difference(Counter(s), Counter({k: workers for k in epoch})))]
        promise = f"each trainer read every element once from each of the {workers} workers"
        return f"{across}: {'NOT ' + promise + ': ' + '; '.join(each) if each else promise}"
    return f"{across}: steps of an endless stream (no element count is promised)"
