"""The exceptions of slurm_resolver: one root class, each also a matching builtin.

Every error says what was found, what was expected and how to fix it. Subclasses inherit
``ValueError`` or ``RuntimeError`` as well, so code written against TensorFlow's resolvers
(which raise those builtins) keeps working.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from .speakers import Speaker

__all__ = [
    "raised_from_public_call",
    "trimmed",
    "NO_JOB",
    "alone",
    "SlurmResolverError",
    "EnvironmentVariableError",
    "ConfigurationError",
    "ResolutionError",
    "UnansweredError",
    "PlacementError",
    "AddressError",
    "MissingDependencyError",
]


NO_JOB = "no Slurm job or MPI launch found"
"""How every message about a process outside any job begins (it describes one local process)."""


def alone(what: str) -> str:
    """The one line that says ``what`` describes one local process, no job having been found.

    >>> alone("bootstrap()")[:78]
    'no Slurm job or MPI launch found: bootstrap() describes this one local process'
    """
    return (f"{NO_JOB}: {what} describes this one local process alone (rank 0 of 1); run it inside srun, sbatch or "
            "salloc to see a job")


class SlurmResolverError(Exception):
    """Root of every error raised by slurm_resolver.

    Args:
        message: what was found and what was expected.
        hint: how to fix it; shown after ``HINT:``.
        speaker: which task of a launch says it, where every task raises it (`slurm_resolver.speakers`).
    """

    def __init__(self, message: str, hint: str | None = None, *, speaker: Speaker = Speaker.TASK) -> None:
        self.message = message
        self.hint = hint
        self.speaker = speaker
        super().__init__(f"{message}\nHINT: {hint}" if hint else message)

    def one_line(self) -> str:
        """The message and hint on one line, for the command line."""
        return f"{self.message} (hint: {self.hint})" if self.hint else self.message

    def said_by(self, rank: int | None) -> bool:
        """Whether the task of ``rank`` (None: no task of a launch) says this error for the job.

        >>> [SlurmResolverError("x", speaker=Speaker.FIRST).said_by(r) for r in (None, 0, 3)]
        [True, True, False]
        """
        return self.speaker.says(rank)


def trimmed(error: SlurmResolverError) -> SlurmResolverError | None:
    """``error`` without its frames inside slurm_resolver and without its cause, to be raised from a
    public call (its message says it all); None where the ``slurm_resolver`` log is at DEBUG (``-v``),
    which keeps the whole way down for whoever debugs it."""
    if logging.getLogger("slurm_resolver").isEnabledFor(logging.DEBUG):
        return None
    error.__cause__ = None
    error.__suppress_context__ = True
    return error.with_traceback(None)


_Parameters = ParamSpec("_Parameters")
_Result = TypeVar("_Result")


def raised_from_public_call(function: Callable[_Parameters, _Result]) -> Callable[_Parameters, _Result]:
    """``function``, a public entry point, whose `SlurmResolverError` is raised from the caller's frame
    with one frame of ours (`trimmed()`), not through resolution and packing.

    >>> @raised_from_public_call
    ... def resolve_nothing() -> None:
    ...     raise ConfigurationError("nothing to resolve")
    >>> try:
    ...     resolve_nothing()
    ... except ConfigurationError as error:
    ...     import traceback; print([frame.name for frame in traceback.extract_tb(error.__traceback__)])
    ['<module>', 'public_call']
    """
    @functools.wraps(function)
    def public_call(*args: _Parameters.args, **kwargs: _Parameters.kwargs) -> _Result:
        try:
            return function(*args, **kwargs)
        except SlurmResolverError as error:
            short = trimmed(error)
            if short is None:
                raise
            raise short from None

    return public_call


class EnvironmentVariableError(SlurmResolverError, ValueError):
    """A launcher variable is malformed or missing; the message names it and its value."""

    def __init__(self, variable: str, value: str | None, expected: str, hint: str | None = None):
        self.variable = variable
        self.value = value
        shown = " is not set" if value is None else f"={value!r} is invalid"
        super().__init__(f"{variable}{shown}: expected {expected}", hint)


class ConfigurationError(SlurmResolverError, ValueError):
    """An argument or override asks for something impossible or malformed."""


class ResolutionError(SlurmResolverError, RuntimeError):
    """The environment is well formed but the cluster cannot be resolved from it."""


class UnansweredError(ResolutionError):
    """Tasks of the launch never answered within the bootstrap's timeout (their node may be lost).

    ``missing`` maps the rank of each (the lowest few) to its node ('' where it is not known), for
    whoever acts on a lost node (``slurm-resolver run`` records them as its tasks' deaths).
    """

    def __init__(self, message: str, hint: str | None = None, *, missing: dict[int, str],
                 speaker: Speaker = Speaker.TASK) -> None:
        super().__init__(message, hint, speaker=speaker)
        self.missing = missing


class PlacementError(ResolutionError):
    """The host of every rank cannot be known without an exchange that is not available."""


class AddressError(ResolutionError):
    """A node has no address that its peers can reach."""


class MissingDependencyError(SlurmResolverError, ImportError):
    """An optional dependency is needed; the message says which extra to install."""

    def __init__(self, module: str, extra: str, purpose: str) -> None:
        self.module = module
        self.extra = extra
        super().__init__(
            f"{purpose} needs the Python module {module!r}, which is not installed",
            f"pip install 'slurm_resolver[{extra}]'" if extra else
            "reinstall slurm_resolver: pip install --force-reinstall slurm_resolver",
        )
