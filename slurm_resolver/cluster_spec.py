"""ClusterSpec: job names to task addresses, with the behaviour of ``tf.train.ClusterSpec``.

Jobs keep the order they were given in and tasks are sorted by index, as TensorFlow 2.21
keeps them; a job may be
sparse (``{'worker': {1: 'h:2222'}}``). Unknown jobs and tasks raise ``ValueError`` with
TensorFlow's wording, followed by what exists.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .errors import ConfigurationError

__all__ = ["ClusterSpec", "ClusterDict"]

ClusterDict = Mapping[str, Sequence[str] | Mapping[int, str]]
"""A cluster as plain data: job name to a list of addresses, or to ``{task index: address}`` (sparse)."""


def _tasks_of(job: object, tasks: object) -> dict[int, str]:
    if isinstance(tasks, (list, tuple)):
        items: list[tuple[Any, Any]] = list(enumerate(tasks))
    elif isinstance(tasks, Mapping):
        items = list(tasks.items())
    else:
        raise TypeError(
            f"The tasks for job {job!r} must be a list or a dictionary from integers to strings."
        )
    result: dict[int, str] = {}
    for index, address in items:
        try:
            number = int(index)
        except (TypeError, ValueError):
            raise TypeError(f"Task index {index!r} of job {job!r} must be an integer.") from None
        if number < 0:
            raise ValueError(f"Task index {number} of job {job!r} must not be negative.")
        if isinstance(address, bytes):
            address = address.decode()
        if not isinstance(address, str):
            raise TypeError(f"Task address {address!r} must be bytes or unicode")
        result[number] = address
    return dict(sorted(result.items()))


def _dense(tasks: dict[int, str]) -> list[str] | dict[int, str]:
    """A list where the indices are 0..n-1 (TensorFlow's dense job), else the dict."""
    return list(tasks.values()) if tasks and max(tasks) + 1 == len(tasks) else tasks


class ClusterSpec:
    """Represents a cluster as a set of jobs, each a set of tasks with an address.

    Args:
        cluster: a dict of job name to a list of addresses or to a dict of index to
            address; another ``ClusterSpec`` (ours or TensorFlow's); or a TensorFlow
            ``ClusterDef``.

    >>> spec = ClusterSpec({"worker": ["w0:2222", "w1:2222"], "ps": {1: "p1:2222"}})
    >>> spec.jobs
    ['worker', 'ps']
    >>> spec.as_dict()
    {'worker': ['w0:2222', 'w1:2222'], 'ps': {1: 'p1:2222'}}
    >>> spec.task_address("worker", 1)
    'w1:2222'
    """

    def __init__(self, cluster: Any) -> None:
        if isinstance(cluster, ClusterSpec):
            self._jobs: dict[str, list[str] | dict[int, str]] = {
                name: tasks.copy() for name, tasks in cluster._jobs.items()}
            return
        if isinstance(cluster, Mapping):
            jobs: dict[str, dict[int, str]] = {}
            for name, tasks in cluster.items():
                if isinstance(name, bytes):
                    name = name.decode()
                if not isinstance(name, str):
                    raise TypeError(f"Job name {name!r} must be bytes or unicode")
                jobs[name] = _tasks_of(name, tasks)
        elif hasattr(cluster, "as_dict") and callable(cluster.as_dict):  # TensorFlow's ClusterSpec
            jobs = {name: _tasks_of(name, tasks) for name, tasks in cluster.as_dict().items()}
        elif hasattr(cluster, "job"):  # a TensorFlow ClusterDef
            jobs = {j.name: dict(sorted(j.tasks.items())) for j in cluster.job}
        else:
            raise TypeError(
                "`cluster` must be a dictionary mapping one or more job names to lists of "
                "network addresses, or a `ClusterDef` protocol buffer"
            )
        self._jobs = {name: _dense(tasks) for name, tasks in jobs.items()}

    @classmethod
    def _trusted(cls, jobs: Mapping[str, list[str]]) -> ClusterSpec:
        """A spec from dense lists of address strings that are known to be valid (no copy)."""
        spec = cls.__new__(cls)
        spec._jobs = dict(jobs)
        return spec

    def __bool__(self) -> bool:
        return bool(self._jobs)

    def _indexed(self) -> dict[str, dict[int, str]]:
        return {n: (dict(enumerate(t)) if isinstance(t, list) else t) for n, t in self._jobs.items()}

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            try:
                other = ClusterSpec(other)
            except (TypeError, ValueError):
                return False
        if isinstance(other, ClusterSpec):
            return self._jobs == other._jobs or self._indexed() == other._indexed()
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    __hash__ = None  # type: ignore[assignment]  # mutable-looking, as TensorFlow's

    def __repr__(self) -> str:
        items = self.as_dict()
        return "ClusterSpec({" + ", ".join(f"{k!r}: {items[k]!r}" for k in sorted(items)) + "})"

    __str__ = __repr__

    @property
    def jobs(self) -> list[str]:
        """The job names, in the order the cluster was given."""
        return list(self._jobs)

    def _job(self, job_name: str) -> list[str] | dict[int, str]:
        try:
            return self._jobs[job_name]
        except (KeyError, TypeError):
            raise ValueError(
                f"No such job in cluster: {job_name!r} (jobs in the cluster: "
                f"{', '.join(map(repr, self._jobs)) or 'none'})"
            ) from None

    def num_tasks(self, job_name: str) -> int:
        """The number of tasks defined in ``job_name``."""
        return len(self._job(job_name))

    def task_indices(self, job_name: str) -> list[int]:
        """The sorted task indices of ``job_name``."""
        job = self._job(job_name)
        return list(range(len(job))) if isinstance(job, list) else list(job)

    def task_address(self, job_name: str, task_index: int) -> str:
        """The address of task ``task_index`` of ``job_name``."""
        job = self._job(job_name)
        if isinstance(job, list):
            if isinstance(task_index, int) and not isinstance(task_index, bool) and 0 <= task_index < len(job):
                return job[task_index]
            shown = {0: "none", 1: "0"}.get(len(job), f"0-{len(job) - 1}")
        else:
            if task_index in job:
                return job[task_index]
            shown = ", ".join(map(str, job)) or "none"
        raise ValueError(f"No task with index {task_index!r} in job {job_name!r} (indices: {shown})")

    def job_tasks(self, job_name: str) -> list[str | None]:
        """The addresses of ``job_name`` by index; gaps of a sparse job are ``None``."""
        job = self._job(job_name)
        if isinstance(job, list):
            return list(job)
        if not job:
            return []
        tasks: list[str | None] = [None] * (max(job) + 1)
        for index, address in job.items():
            tasks[index] = address
        return tasks

    def as_dict(self) -> dict[str, list[str] | dict[int, str]]:
        """Jobs to lists of addresses, or to index dicts where a job is sparse."""
        return {name: (list(job) if isinstance(job, list) else dict(job)) if job else {}
                for name, job in self._jobs.items()}

    def to_json(self) -> str:
        """The ``cluster`` member of TF_CONFIG, as JSON text."""
        import json  # here: a task's start has no use for it (benchmarks/README.md)

        return json.dumps(self.as_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ClusterSpec:
        """Parse the ``cluster`` member of TF_CONFIG."""
        import json

        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ConfigurationError(f"cluster JSON is malformed: {exc}") from None
        if not isinstance(data, dict):
            raise ConfigurationError(f"cluster JSON must be an object of jobs, not {type(data).__name__}")
        return cls(data)

    def as_cluster_def(self) -> Any:
        """The cluster as a TensorFlow ``ClusterDef`` protocol buffer (needs TensorFlow)."""
        return self.to_tensorflow().as_cluster_def()

    def to_tensorflow(self) -> Any:
        """An equivalent ``tf.train.ClusterSpec`` (needs TensorFlow)."""
        from .optional import import_optional

        server_lib = import_optional("tensorflow.python.training.server_lib", "tensorflow", "A TensorFlow ClusterSpec")
        return server_lib.ClusterSpec(self.as_dict())
