"""The resolver API raises from its public frame: the caller's line and one frame of ours, with the message
that says it all; the whole way down only where the ``slurm_resolver`` log is at DEBUG (``-v``)."""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable
from pathlib import Path

import pytest

import slurm_resolver
from slurm_resolver import (
    KubernetesClusterResolver,
    SimpleClusterResolver,
    SlurmClusterResolver,
    TFConfigClusterResolver,
    UnionClusterResolver,
    resolve,
)
from slurm_resolver.errors import SlurmResolverError

from ..conftest import captured

OURS = str(Path(slurm_resolver.__file__).parent)
FOUR_TASKS = captured("srun_N2_ntasks_per_node2")[3]
BAD_TF_CONFIG = {"TF_CONFIG": '{"cluster": {"worker": ["a:1"]}, "task": {"type": "ps", "index": 0}}'}

# each public entry point, called as a user would, and the start of its message
ENTRY_POINTS: list[tuple[str, Callable[[], object], str]] = [
    ("SlurmClusterResolver()", lambda: SlurmClusterResolver(jobs={"ps": 1, "worker": 2}, environ=FOUR_TASKS),
     "jobs={'ps': 1, 'worker': 2} ask for 3 tasks, but the job has 4"),
    ("resolve()", lambda: resolve(FOUR_TASKS, jobs={"ps": 1, "worker": 2}),
     "jobs={'ps': 1, 'worker': 2} ask for 3 tasks, but the job has 4"),
    ("resolve() of a malformed override", lambda: resolve({**FOUR_TASKS, "SLURM_RESOLVER_PORT_BASE": "x"}),
     "SLURM_RESOLVER_PORT_BASE='x' is invalid"),
    ("TFConfigClusterResolver().cluster_spec()", lambda: TFConfigClusterResolver(environ=BAD_TF_CONFIG).cluster_spec(),
     "TF_CONFIG="),
    ("TFConfigClusterResolver().task_type", lambda: TFConfigClusterResolver(environ=BAD_TF_CONFIG).task_type,
     "TF_CONFIG="),
    ("TFConfigClusterResolver().master()", lambda: TFConfigClusterResolver(environ=BAD_TF_CONFIG).master(),
     "TF_CONFIG="),
    ("UnionClusterResolver().cluster_spec()",
     lambda: UnionClusterResolver(TFConfigClusterResolver(environ=BAD_TF_CONFIG)).cluster_spec(), "TF_CONFIG="),
    ("tf_config()", lambda: SimpleClusterResolver({"worker": ["a:1"]}).tf_config(), "TF_CONFIG needs a task"),
    ("KubernetesClusterResolver()",
     lambda: KubernetesClusterResolver(override_client=object(), executable_location="pod"),  # type: ignore[arg-type]
     "The executable location provided is invalid"),
]


def _raised(call: Callable[[], object]) -> tuple[SlurmResolverError, list[traceback.FrameSummary]]:
    with pytest.raises(SlurmResolverError) as caught:
        call()
    frames = traceback.extract_tb(caught.value.__traceback__)
    return caught.value, [f for f in frames if f.filename.startswith(OURS)]


@pytest.mark.parametrize(("name", "call", "message"), ENTRY_POINTS, ids=[e[0] for e in ENTRY_POINTS])
def test_an_error_is_raised_from_the_public_call(name: str, call: Callable[[], object], message: str,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="slurm_resolver")  # as a program that configured no log
    error, ours = _raised(call)
    assert str(error).startswith(message), str(error)
    assert len(ours) == 1, [f"{f.filename}:{f.lineno} {f.name}" for f in ours]  # one frame of ours, not a walk
    assert error.__cause__ is None and error.__suppress_context__
    assert "".join(traceback.format_exception(error)).count("Traceback") == 1


@pytest.mark.parametrize(("name", "call", "message"), ENTRY_POINTS[:3], ids=[e[0] for e in ENTRY_POINTS[:3]])
def test_the_slurm_resolver_log_at_debug_keeps_the_whole_way_down(name: str, call: Callable[[], object],
                                                                   message: str,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="slurm_resolver")  # -v, or a user debugging it
    error, ours = _raised(call)
    assert str(error).startswith(message) and len(ours) > 2, [f.name for f in ours]
