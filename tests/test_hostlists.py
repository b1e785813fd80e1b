from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurm_resolver.errors import EnvironmentVariableError, SlurmResolverError
from slurm_resolver.hostlists import _expand_one_bracket, collapse, collapse_counts, expand, expand_counts

EXPAND = [
    ("node1", ("node1",)),
    ("node[1-3]", ("node1", "node2", "node3")),
    ("node[9-10]", ("node9", "node10")),  # Slurm's order, never sorted as strings
    ("node[10,9]", ("node10", "node9")),
    ("r[1-2]n[01-02]", ("r1n01", "r1n02", "r2n01", "r2n02")),  # rejected by TensorFlow's parser
    ("node[1-3]-ib", ("node1-ib", "node2-ib", "node3-ib")),  # rejected by TensorFlow's parser
    ("gpu[001-003],cpu7", ("gpu001", "gpu002", "gpu003", "cpu7")),
    ("a,b[2,4-5]", ("a", "b2", "b4", "b5")),
]


@pytest.mark.parametrize(("text", "hosts"), EXPAND)
def test_expand(text: str, hosts: tuple[str, ...]) -> None:
    assert expand(text) == hosts


@pytest.mark.parametrize("text", ["", " ", "node[1-", "node[3-1]", "node]", "node[a-b]", "n[1-2]]"])
def test_expand_rejects_with_variable_name(text: str) -> None:
    with pytest.raises(EnvironmentVariableError, match="SLURM_JOB_NODELIST"):
        expand(text, "SLURM_JOB_NODELIST")


COUNTS = [("4", (4,)), ("4,1(x2)", (4, 1, 1)), ("2(x3)", (2, 2, 2)), ("1,2,1", (1, 2, 1))]


@pytest.mark.parametrize(("text", "counts"), COUNTS)
def test_counts_round_trip(text: str, counts: tuple[int, ...]) -> None:
    assert expand_counts(text) == counts
    assert collapse_counts(counts) == text


@pytest.mark.parametrize("text", ["", "x", "4,", "(x2)", "4(x0)", "4(x)", "-1", "4(x2", "1(x99999999)"])
def test_counts_reject(text: str) -> None:
    with pytest.raises(EnvironmentVariableError, match="SLURM_TASKS_PER_NODE"):
        expand_counts(text)


def test_collapse() -> None:
    assert collapse(["node10", "node9"]) == "node[9-10]"


@given(st.lists(st.integers(0, 64), min_size=1, max_size=30))
def test_counts_round_trip_property(counts: list[int]) -> None:
    assert expand_counts(collapse_counts(counts)) == tuple(counts)


@given(st.lists(st.from_regex(r"[a-z]{1,4}[0-9]{1,3}", fullmatch=True), min_size=1, max_size=20, unique=True))
def test_hostlist_round_trip_property(hosts: list[str]) -> None:
    assert sorted(expand(collapse(hosts))) == sorted(hosts)


@given(st.text(max_size=40))
def test_malformed_hostlists_only_raise_our_errors(text: str) -> None:
    try:
        expand(text, "SLURM_STEP_NODELIST")
    except SlurmResolverError:
        pass


@given(st.text(max_size=40))
def test_malformed_counts_only_raise_our_errors(text: str) -> None:
    try:
        expand_counts(text)
    except SlurmResolverError:
        pass


@given(st.from_regex(r"[a-c0%\-]{0,3}(\[[0-9]{1,3}(-[0-9]{1,3})?(,[0-9]{1,3}(-[0-9]{1,3})?){0,2}\])?[a-c%\-]{0,2}",
                     fullmatch=True))
def test_the_fast_path_agrees_with_python_hostlist(text: str) -> None:
    """``prefix[ranges]suffix`` is expanded in C-level passes; python-hostlist stays the authority."""
    import hostlist

    fast = _expand_one_bracket(text)
    if fast is None:
        return
    assert fast == hostlist.expand_hostlist(text, allow_duplicates=True)


def test_the_fast_path_takes_the_common_forms_only() -> None:
    assert _expand_one_bracket("node[1-4096]") is not None and _expand_one_bracket("n[001-010]x") is not None
    for other in ("node1", "a[1-2],b", "r[1-2]n[1-2]", "n[2-1]", "n[a-b]", "n[1-200000]"):
        assert _expand_one_bracket(other) is None
