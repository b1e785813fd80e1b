"""A Griffe extension for the API reference (mkdocs.yml): a parameter whose default is a module
constant is shown with the constant's value, not its name: a private sentinel (``port_base=_PORT_BASE``,
told apart from an explicit value) as Python prints it (``port_base=8888``), a constant in capitals
that holds a number or a string (``fanout=DEFAULT_FANOUT``, from an internal module) as that value."""

from __future__ import annotations

import re
from typing import Any

import griffe

__all__ = ["ConstantDefaults"]

PRIVATE = re.compile(r"_[A-Za-z]\w*")
CONSTANT = re.compile(r"[A-Z][A-Z0-9_]*")


class ConstantDefaults(griffe.Extension):
    """Replace a default that names a module constant by ``repr()`` of its value."""

    def on_function(self, *, func: griffe.Function, **kwargs: Any) -> None:
        for parameter in func.parameters:
            name = str(parameter.default) if parameter.default is not None else ""
            if PRIVATE.fullmatch(name) or CONSTANT.fullmatch(name):
                value = griffe.dynamic_import(f"{func.module.path}.{name}")
                if PRIVATE.fullmatch(name) or isinstance(value, (int, float, str)):
                    parameter.default = repr(value)
