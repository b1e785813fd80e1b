"""`slurm_resolver.values`: frozen values made without compiling a method, behaving as frozen dataclasses."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from dataclasses import field

import pytest

from slurm_resolver.cluster import Cluster, Task
from slurm_resolver.environment import Snapshot
from slurm_resolver.layout import Distribution, Spread
from slurm_resolver.packing import Packing
from slurm_resolver.rpc.options import BootstrapOptions
from slurm_resolver.values import PublicValue, fill


class Size(PublicValue):
    """A value of the tests: one field hidden."""

    width: int
    height: int = 1
    note: str = field(default="", compare=False, repr=False)

    def __init__(self, width: int, height: int = 1, note: str = "") -> None:
        fill(self, width, height, note)


class Named(PublicValue, eq=False):
    """A value equal to itself only."""

    name: str

    def __init__(self, name: str) -> None:
        fill(self, name)


def test_a_public_value_is_a_frozen_dataclass_to_its_users() -> None:
    size = Size(2, note="x")
    assert dataclasses.is_dataclass(size) and [f.name for f in dataclasses.fields(Size)] == ["width", "height", "note"]
    assert dataclasses.replace(size, height=3) == Size(2, 3) and dataclasses.replace(size, height=3).note == "x"
    assert dataclasses.asdict(size) == {"width": 2, "height": 1, "note": "x"}
    assert Size.__dataclass_params__.frozen and Size.__match_args__ == ("width", "height", "note")  # type: ignore[attr-defined]
    with pytest.raises(dataclasses.FrozenInstanceError):
        size.width = 3  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del size.width


@pytest.mark.parametrize(("left", "right", "equal"), [
    (Size(2), Size(2, 1), True),
    (Size(2, note="a"), Size(2, note="b"), True),  # a hidden field is neither compared nor hashed
    (Size(2), Size(3), False),
    (Distribution(Spread.UNKNOWN, word="a"), Distribution(Spread.UNKNOWN, word="b"), True),
    (Task(0, "worker", 0, "n", "n", 1, 0), Task(0, "worker", 0, "n", "n", 1, 0), True),
    (Task(0, "worker", 0, "n", "n", 1, 0), Task(1, "worker", 1, "n", "n", 2, 1), False),
])
def test_equal_and_hashed_by_the_compared_fields(left: object, right: object, equal: bool) -> None:
    assert (left == right) is equal and (not equal or hash(left) == hash(right))


def test_shown_as_a_dataclass_without_its_hidden_fields() -> None:
    assert repr(Size(2, note="x")) == "Size(width=2, height=1)"
    assert repr(Distribution.parse("plane=2")) == "Distribution(spread=<Spread.PLANE: 'plane'>, plane=2)"


def test_eq_false_keeps_identity() -> None:
    one = Named("a")
    assert one == one and one != Named("a") and len({one, Named("a")}) == 2
    packing = Packing((("worker", 2),))
    assert packing != Packing((("worker", 2),)) and repr(packing) == "Packing(runs=(('worker', 2),))"


def test_copied_and_pickled_by_its_fields() -> None:
    for value in (Size(2, 3, "x"), BootstrapOptions(timeout=5), Snapshot({"SLURM_PROCID": "1"}),
                  Task(0, "worker", 0, "n", "n", 1, 0, ("0",), 7)):
        assert pickle.loads(pickle.dumps(value)) == value and copy.deepcopy(value) == value
    assert pickle.loads(pickle.dumps(Size(2, 3, "x"))).note == "x"


def test_the_checks_of_init_hold_for_replace() -> None:
    with pytest.raises(Exception, match="fanout"):
        dataclasses.replace(BootstrapOptions(), fanout=0)
    assert dataclasses.replace(BootstrapOptions(), exchange="rendezvous").exchange.value == "rendezvous"  # type: ignore[arg-type,union-attr]


def test_a_class_keeps_the_methods_it_writes() -> None:
    assert Cluster.__repr__ is not PublicValue.__repr__ and Cluster.__eq__ is not PublicValue.__eq__
    assert Cluster.__hash__ is None and Snapshot.__hash__ is not PublicValue.__hash__


def test_evolve_copies_the_fields_with_the_changes_and_no_value_computed_from_them() -> None:
    from functools import cached_property

    class Area(PublicValue):
        width: int
        height: int

        def __init__(self, width: int, height: int) -> None:
            fill(self, width, height)

        @cached_property
        def area(self) -> int:
            return self.width * self.height

    wide = Area(3, 2)
    assert wide.area == 6 and Area._caches and not Size._caches
    taller = wide._evolve(height=5)
    assert taller == Area(3, 5) and taller.area == 15 and wide.area == 6  # computed again, not copied
    noted = Size(4, note="x")._evolve(width=7)
    assert (noted.width, noted.height, noted.note) == (7, 1, "x") and noted == Size(7)
