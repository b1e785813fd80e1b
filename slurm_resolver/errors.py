"""The exceptions of slurm_resolver: one root class, each also a matching builtin.

Every error says what was found, what was expected and how to fix it. Subclasses inherit
``ValueError`` or ``RuntimeError`` as well, so code written against TensorFlow's resolvers
(which raise those builtins) keeps working.
"""

from __future__ import annotations

__all__ = [
    "SlurmResolverError",
    "EnvironmentVariableError",
    "ConfigurationError",
    "ResolutionError",
    "PlacementError",
    "AddressError",
    "MissingDependencyError",
]


class SlurmResolverError(Exception):
    """Root of every error raised by slurm_resolver.

    Args:
        message: what was found and what was expected.
        hint: how to fix it; shown after ``HINT:``.
    """

    def __init__(self, message: str, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(f"{message}\nHINT: {hint}" if hint else message)

    def one_line(self) -> str:
        """The message and hint on one line, for the command line."""
        return f"{self.message} (hint: {self.hint})" if self.hint else self.message


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
