"""Frozen value classes made without compiling code at import: what a task's start creates.

A `dataclasses.dataclass` compiles its ``__init__``, ``__repr__``, ``__eq__``, ``__hash__``,
``__setattr__`` and ``__delattr__`` from text (``exec``) when its module is imported: about a millisecond
of CPU a class on Python 3.11, in every task of every job (benchmarks/README.md, issue 47). A `Value`
gets the same behaviour from methods written once here: a subclass lists its fields in ``__slots__``
(after its parents', in the order of its ``__init__``'s parameters), writes its ``__init__`` (which sets
them with `fill`), and is a frozen dataclass to its callers: equal and hashed by its fields, shown as
``Name(field=value, ...)``, refusing assignment (`dataclasses.FrozenInstanceError`), pickled by its
fields. The resolution's public values (`Cluster`, `Task`, `BootstrapOptions`, ...) stay dataclasses
(`dataclasses.replace` and `fields` work on them); `Value` is for the bootstrap's and the stacks' own
(`JobStacks`, which `Bootstrapped.stacks()` returns, and `Verify`, the type of ``verify=``, among them).

>>> class Point(Value):
...     __slots__ = ("x", "y")
...     def __init__(self, x: int, y: int = 0) -> None:
...         fill(self, x, y)
>>> Point(1), Point(1) == Point(1, 0), len({Point(1), Point(1, 0)})
(Point(x=1, y=0), True, 1)
"""

from __future__ import annotations

from dataclasses import FrozenInstanceError
from itertools import repeat
from operator import attrgetter
from typing import Any, ClassVar

__all__: list[str] = []  # internal: the package's own values (docs/protocol.md, "Where the code lives")

_set = object.__setattr__


def fill(value: Value, *values: object) -> None:
    """Set ``value``'s fields, in the order of its `Value.FIELDS`, from ``values`` (its ``__init__`` calls this)."""
    any(map(_set, repeat(value), value.FIELDS, values))  # a loop in C: `_set` returns None


class Value:
    """A frozen value whose fields are its classes' ``__slots__`` (see the module's docstring)."""

    __slots__ = ()
    FIELDS: ClassVar[tuple[str, ...]] = ()
    """Every field's name, parents' first (``__dict__`` and ``__weakref__`` are no fields)."""

    @staticmethod
    def _values(value: Any) -> tuple[Any, ...]:
        """``value``'s fields, in `FIELDS` order (made for each class, in C: `operator.attrgetter`)."""
        return ()

    def __init_subclass__(cls, **keywords: Any) -> None:
        super().__init_subclass__(**keywords)
        own = cls.__dict__.get("__slots__", ())
        cls.FIELDS = cls.FIELDS + tuple(name for name in ((own,) if isinstance(own, str) else own)
                                        if not name.startswith("__"))
        if cls.FIELDS:
            fetch = attrgetter(*cls.FIELDS)

            def one(value: Any) -> tuple[Any, ...]:
                return (fetch(value),)
            cls._values = staticmethod(fetch if len(cls.FIELDS) > 1 else one)  # type: ignore[method-assign,assignment]

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values(self) == self._values(other)

    def __hash__(self) -> int:
        return hash(self._values(self))

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={given!r}" for name, given in zip(self.FIELDS, self._values(self)))
        return f"{self.__class__.__qualname__}({shown})"

    def __setattr__(self, name: str, given: object) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __reduce__(self) -> tuple[Any, ...]:
        return self.__class__, self._values(self)
