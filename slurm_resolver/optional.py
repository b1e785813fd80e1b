"""Optional dependencies, imported on first use: one helper names the extra to install.

>>> import_optional("json", "test", "Parsing").__name__
'json'
"""

from __future__ import annotations

import importlib
from types import ModuleType

from .errors import MissingDependencyError

__all__: list[str] = []  # internal: no public names (docs/reference.md)

EXTRAS = ("tensorflow", "torch", "jax", "lightning", "kubernetes", "mpi", "pyslurm")
"""The extras of ``pip install 'slurm_resolver[...]'`` (grpc, NVML and hostlists are always installed)."""


def import_optional(module: str, extra: str, purpose: str) -> ModuleType:
    """Import ``module``; when it is missing, say which extra installs it.

    Args:
        module: the module to import, e.g. ``"tensorflow"``.
        extra: the extra of slurm_resolver that installs it (``"tensorflow"``), or
            ``""`` for a dependency every installation has.
        purpose: what needs it, for the message (``"A TensorFlow resolver"``).
    """
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingDependencyError(module, extra, purpose) from None
