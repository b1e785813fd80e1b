"""Errors: one root, a matching builtin, the variable named apart from the text, and hints."""

from __future__ import annotations

import pytest

from slurm_resolver.errors import (
    ConfigurationError,
    EnvironmentVariableError,
    MissingDependencyError,
    SlurmResolverError,
)
from slurm_resolver.optional import import_optional


def test_a_missing_variable_is_named_with_a_space() -> None:
    error = EnvironmentVariableError("SLURM_PROCID", None, "a rank")
    assert str(error).startswith("SLURM_PROCID is not set: expected a rank")
    assert str(EnvironmentVariableError("X", "y", "z")) == "X='y' is invalid: expected z"


def test_one_line_carries_the_hint() -> None:
    error = ConfigurationError("bad", "do this")
    assert error.one_line() == "bad (hint: do this)" and isinstance(error, ValueError)
    assert isinstance(error, SlurmResolverError) and str(error) == "bad\nHINT: do this"


def test_optional_imports_name_the_extra_to_install() -> None:
    with pytest.raises(MissingDependencyError) as info:
        import_optional("no_such_module_here", "tensorflow", "A TensorFlow server")
    assert info.value.hint == "pip install 'slurm_resolver[tensorflow]'" and isinstance(info.value, ImportError)


def test_a_dependency_of_every_installation_asks_for_a_reinstall_not_an_extra() -> None:
    with pytest.raises(MissingDependencyError) as info:
        import_optional("no_such_module_here", "", "A slurm_resolver Server")
    assert "[" not in str(info.value.hint) and "reinstall" in str(info.value.hint)
