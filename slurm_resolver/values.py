"""Frozen value classes made without compiling code at import: what a task's start creates.

A `dataclasses.dataclass` compiles its ``__init__``, ``__repr__``, ``__eq__``, ``__hash__``,
``__setattr__`` and ``__delattr__`` from text (``exec``) when its module is imported: about a millisecond
of CPU a class on Python 3.11, in every task of every job (benchmarks/README.md, issue 47). A `Value`
gets the same behaviour from methods written once here: a subclass lists its fields in ``__slots__``
(after its parents', in the order of its ``__init__``'s parameters), writes its ``__init__`` (which sets
them with `fill`), and is a frozen dataclass to its callers: equal and hashed by its fields, shown as
``Name(field=value, ...)``, refusing assignment (`dataclasses.FrozenInstanceError`), pickled by its
fields. The dataclass's options that the package uses: an `OrderedValue` is ordered by its fields, as a
tuple of them (``order=True``), and the class keyword ``hidden=("name",)`` makes a field set and pickled but
neither compared, hashed nor shown (``field(compare=False, repr=False)``). `Value` is for the bootstrap's
and the stacks' own (`JobStacks`, which `Bootstrapped.stacks()` returns, and `Verify`, the type of
``verify=``, among them).

The resolution's public values (`Cluster`, `Task`, `BootstrapOptions`, ...) are dataclasses to everyone
(`dataclasses.fields`, `replace`, `asdict` and `is_dataclass` work on them), each a `PublicValue`: its fields
declared as a dataclass's, its ``__init__`` written in the class (it sets the fields with `fill`, and
checks what ``__post_init__`` would), every other method `Value`'s, so that nothing is compiled either.

>>> class Size(PublicValue):
...     'A size.'
...     width: int
...     height: int = 1
...     def __init__(self, width: int, height: int = 1) -> None:
...         fill(self, width, height)
>>> import dataclasses
>>> Size(2), dataclasses.replace(Size(2), height=3), dataclasses.asdict(Size(2)), Size(2) == Size(2, 1)
(Size(width=2, height=1), Size(width=2, height=3), {'width': 2, 'height': 1}, True)

>>> class Point(Value):
...     __slots__ = ("x", "y")
...     def __init__(self, x: int, y: int = 0) -> None:
...         fill(self, x, y)
>>> Point(1), Point(1) == Point(1, 0), len({Point(1), Point(1, 0)})
(Point(x=1, y=0), True, 1)
>>> class Seen(OrderedValue, hidden=("raw",)):
...     __slots__ = ("at", "raw")
...     def __init__(self, at: int, raw: bytes = b"") -> None:
...         fill(self, at, raw)
>>> Seen(2, b"x") == Seen(2), Seen(1) < Seen(2), Seen(2, b"x")
(True, True, Seen(at=2))
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import FrozenInstanceError, dataclass, field, fields
from functools import cached_property
from itertools import repeat
from operator import attrgetter
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

if TYPE_CHECKING:
    from typing_extensions import dataclass_transform
else:
    def dataclass_transform(**_: Any) -> Callable[[type], type]:
        """Type checkers' mark (`typing.dataclass_transform`, from Python 3.11): nothing at run time."""
        return lambda cls: cls

__all__: list[str] = []  # internal: the package's own values (docs/protocol.md, "Where the code lives")

_set = object.__setattr__
_Public = TypeVar("_Public", bound="PublicValue")


def fill(value: Value, *values: object) -> None:
    """Set ``value``'s fields, in the order of its `Value.FIELDS`, from ``values`` (its ``__init__`` calls this)."""
    any(map(_set, repeat(value), value.FIELDS, values))  # a loop in C: `_set` returns None


class Value:
    """A frozen value whose fields are its classes' ``__slots__`` (see the module's docstring)."""

    __slots__ = ()
    FIELDS: ClassVar[tuple[str, ...]] = ()
    """Every field's name, parents' first (``__dict__`` and ``__weakref__`` are no fields)."""
    COMPARED: ClassVar[tuple[str, ...]] = ()
    """The fields compared, hashed and shown: all but the ``hidden``."""
    _hidden: ClassVar[frozenset[str]] = frozenset()

    @staticmethod
    def _values(value: Any) -> tuple[Any, ...]:
        """``value``'s fields, in `FIELDS` order (made for each class, in C: `operator.attrgetter`)."""
        return ()

    @staticmethod
    def _compared(value: Any) -> tuple[Any, ...]:
        """``value``'s `COMPARED` fields, in their order (made for each class, as `_values`)."""
        return ()

    def __init_subclass__(cls, *, hidden: tuple[str, ...] = (), **keywords: Any) -> None:
        super().__init_subclass__(**keywords)
        own = cls.__dict__.get("__slots__", ())
        cls.FIELDS = cls.FIELDS + tuple(name for name in ((own,) if isinstance(own, str) else own)
                                        if not name.startswith("__"))
        cls._hidden = cls._hidden | frozenset(hidden)
        cls.COMPARED = tuple(name for name in cls.FIELDS if name not in cls._hidden)
        cls._values = staticmethod(_getter(cls.FIELDS))  # type: ignore[method-assign,assignment]
        cls._compared = staticmethod(_getter(cls.COMPARED))  # type: ignore[method-assign,assignment]

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._compared(self) == self._compared(other)

    def __hash__(self) -> int:
        return hash(self._compared(self))

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={given!r}" for name, given in zip(self.COMPARED, self._compared(self)))
        return f"{self.__class__.__qualname__}({shown})"

    def __setattr__(self, name: str, given: object) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __reduce__(self) -> tuple[Any, ...]:
        return self.__class__, self._values(self)


def _getter(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """A value's fields ``names`` as a tuple, fetched in C (`operator.attrgetter`: a tuple for two or more)."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        fetch = attrgetter(names[0])
        return lambda value: (fetch(value),)
    return lambda value: ()


class OrderedValue(Value):
    """A `Value` ordered by its compared fields, as a tuple of them, against values of its own class only
    (else TypeError): a dataclass's ``order=True``."""

    __slots__ = ()

    def __lt__(self, other: object) -> bool:
        return self._compared(self) < self._compared(other) if other.__class__ is self.__class__ else NotImplemented

    def __le__(self, other: object) -> bool:
        return self._compared(self) <= self._compared(other) if other.__class__ is self.__class__ else NotImplemented

    def __gt__(self, other: object) -> bool:
        return self._compared(self) > self._compared(other) if other.__class__ is self.__class__ else NotImplemented

    def __ge__(self, other: object) -> bool:
        return self._compared(self) >= self._compared(other) if other.__class__ is self.__class__ else NotImplemented


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
class PublicValue(Value):
    """A frozen dataclass made without compiling a method (see the module's docstring): a subclass
    annotates its fields as a dataclass does (``field(compare=False, repr=False)`` hides one), writes its
    own ``__init__``, and takes the rest from `Value`; the class keyword ``eq=False`` keeps identity's
    equality and hash, as the dataclass option does. A method the class writes itself stays."""

    __slots__ = ()
    __dataclass_fields__: ClassVar[dict[str, Any]]
    _caches: ClassVar[bool] = False
    """Whether the class keeps values computed from its fields (cached properties): `_evolve` copies the fields
    alone, else the whole instance dictionary (a third cheaper)."""

    def __init_subclass__(cls, *, eq: bool = True, **keywords: Any) -> None:
        super().__init_subclass__(**keywords)
        dataclass(init=False, repr=False, eq=False)(cls)  # the fields only: no method is generated
        params = cls.__dataclass_params__  # type: ignore[attr-defined]
        params.init, params.repr, params.eq, params.frozen = True, True, eq, True  # what it is to its callers
        given = fields(cls)
        cls.FIELDS = tuple(f.name for f in given)
        cls._hidden = frozenset(f.name for f in given if not f.compare)
        cls.COMPARED = tuple(f.name for f in given if f.compare)
        cls._values = staticmethod(_getter(cls.FIELDS))  # type: ignore[method-assign,assignment]
        cls._compared = staticmethod(_getter(cls.COMPARED))  # type: ignore[method-assign,assignment]
        cls._caches = any(isinstance(v, cached_property) for k in cls.__mro__ for v in vars(k).values())
        if not eq:
            for name in ("__eq__", "__hash__"):
                if name not in vars(cls):  # a method the class writes stays
                    setattr(cls, name, getattr(object, name))

    def _evolve(self: _Public, **changes: Any) -> _Public:
        """This value with ``changes`` to its fields, as `dataclasses.replace` makes it but without its walk of
        every field, nor the class's ``__init__`` (so none of its checks: only for changes that need none).
        Values computed from the fields (cached properties) are not carried over. A real task gains under a
        microsecond; a simulation of thousands of tasks in one process, 15% of a task's bytecodes
        (`Cluster.as_rank`, benchmarks/README.md, issue 40 item 6), and a burst of deaths heard, a `Fault` made for
        every rank in every task where asked (`Fault.of`)."""
        copy = object.__new__(type(self))
        vars(copy).update(zip(self.FIELDS, self._values(self)) if self._caches else vars(self), **changes)
        return copy
