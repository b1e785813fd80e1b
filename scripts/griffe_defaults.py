"""A Griffe extension for the API reference (mkdocs.yml): a parameter whose default is a private
module constant (``port_base=_PORT_BASE``, a sentinel told apart from an explicit value) is shown
with the constant's value as Python prints it (``port_base=8888``), not the private name."""

from __future__ import annotations

import re
from typing import Any

import griffe

__all__ = ["PrivateDefaults"]

PRIVATE_NAME = re.compile(r"_[A-Za-z]\w*")


class PrivateDefaults(griffe.Extension):
    """Replace each private name given as a default by ``repr()`` of its value."""

    def on_function(self, *, func: griffe.Function, **kwargs: Any) -> None:
        for parameter in func.parameters:
            if parameter.default is not None and PRIVATE_NAME.fullmatch(str(parameter.default)):
                value = griffe.dynamic_import(f"{func.module.path}.{parameter.default}")
                parameter.default = repr(value)
