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

SLURM_READS = [  # each as `scontrol show hostnames` (Slurm 22.05) reads it: whitespace separates hosts
    ("alpha beta gamma", ("alpha", "beta", "gamma")),
    ("1.1.1.1, 1.1.1.2", ("1.1.1.1", "1.1.1.2")),
    ("node3, node4", ("node3", "node4")),
    ("a\tb\nc", ("a", "b", "c")),
    ("n[1-2] m[3-4]", ("n1", "n2", "m3", "m4")),
    ("n[1-2]  ,  m[3-4]", ("n1", "n2", "m3", "m4")),
    ("a,,b", ("a", "b")),
    (",a", ("a",)),
    (" n1", ("n1",)),
    ("n1 ,n2", ("n1", "n2")),
    # inside brackets, whitespace before a bound is part of its width (Slurm's strtoul and strlen)
    ("1.2.3.[089, 100-110]", ("1.2.3.089", *(f"1.2.3.0{n}" for n in range(100, 111)))),
    ("n[1, 3]", ("n1", "n03")),
    ("n[ 1,3]", ("n01", "n3")),
    ("n[1 - 3]", ("n01", "n02", "n03")),
    ("n[01, 2]", ("n01", "n02")),
    ("n[08, 9]", ("n08", "n09")),
    ("n[1,  3]", ("n1", "n003")),
]
"""Host lists with whitespace, and what Slurm makes of them (``tests/test_hostlists.py::test_slurm_agrees``
asks the test cluster's ``scontrol`` again)."""

SLURM_REFUSES = ["n[5 ,7]", "n[1-3 ]", "n[1,,3]"]
"""Whitespace (or nothing) where Slurm reads no bound: ``Invalid hostlist`` from ``scontrol``."""

COLLAPSE = [  # as `scontrol show hostlist` (the given order) and `scontrol show hostlistsorted`
    (["node10", "node9", "node11"], "node[10,9,11]", "node[9-11]"),
    (["node3", "node1", "node2", "node1"], "node[3,1-2,1]", "node[1,1-3]"),
    (["b1", "a1", "a2", "b2"], "b1,a[1-2],b2", "a[1-2],b[1-2]"),
    (["n1", "n2", "n3", "n5", "n4"], "n[1-3,5,4]", "n[1-5]"),
    (["123", "124"], "[123-124]", "[123-124]"),
    (["n1", "n02"], "n[1,02]", "n[1,02]"),
    (["n9", "n10", "n11"], "n[9-11]", "n[9-11]"),
    (["n99", "n100"], "n[99-100]", "n[99-100]"),
    (["n08", "n09", "n10"], "n[08-10]", "n[08-10]"),
    (["a", "b1", "b2", "a"], "a,b[1-2],a", "a,a,b[1-2]"),
    (["node1-ib", "node2-ib"], "node1-ib,node2-ib", "node1-ib,node2-ib"),
]


MIXED_PADDING = [  # (names, `scontrol show hostlist`, `scontrol show hostlistsorted`), captured from Slurm 22.05.8
    ("n09,n9", "n[09,9]", "n[9,09]"),
    ("n009,n10", "n[009,10]", "n[10,009]"),
    ("n9,n09", "n[9,09]", "n[9,09]"),
    ("n09,n10", "n[09-10]", "n[09-10]"),
    ("n08,n10", "n[08,10]", "n[08,10]"),
    ("n10,n08", "n[10,08]", "n[08,10]"),
    ("n08,n9", "n[08,9]", "n[9,08]"),
    ("n08,n9,n10", "n[08,9-10]", "n[9-10,08]"),
    ("n9,n10,n08", "n[9-10,08]", "n[9-10,08]"),
    ("n10,n9,n08", "n[10,9,08]", "n[9,08,10]"),
    ("n10,n09,n9,n8", "n[10,09,9,8]", "n[8-9,09-10]"),
    ("n08,n9,n10,n010", "n[08,9-10,010]", "n[9-10,08,010]"),
    ("n08,n010,n10", "n[08,010,10]", "n[08,10,010]"),
    ("n10,n010", "n[10,010]", "n[10,010]"),
    ("n1,n01,n001,n2,n02", "n[1,01,001,2,02]", "n[1-2,01-02,001]"),
    ("n001,n01,n1", "n[001,01,1]", "n[1,01,001]"),
    ("n0,n00,n000", "n[0,00,000]", "n[0,00,000]"),
    ("n00,n0,n1,n01", "n[00,0-1,01]", "n[0-1,00-01]"),
    ("n99,n099,n100", "n[99,099-100]", "n[99,099-100]"),
    ("n099,n100,n0100", "n[099-100,0100]", "n[099-100,0100]"),
    ("n1,n1,n01", "n[1,1,01]", "n[1,1,01]"),
    ("n01,n1,n01", "n[01,1,01]", "n[1,01,01]"),
    ("n1,n2,n3,n2", "n[1-3,2]", "n[1-2,2-3]"),
    ("n1,n2,n3,n4,n5,n1,n2,n3", "n[1-5,1-3]", "n[1,1-2,2-3,3-5]"),
    ("n5,n1,n2,n3,n4,n3", "n[5,1-4,3]", "n[1-3,3-5]"),
    ("a1,a01,b,a", "a[1,01],b,a", "a,a[1,01],b"),
    ("x,x1,x,x2", "x,x1,x,x2", "x,x,x[1-2]"),
    ("b10x1,b2x1", "b10x1,b2x1", "b2x1,b10x1"),
    ("a01x1,a1x1,a1x2", "a01x1,a1x[1-2]", "a01x1,a1x[1-2]"),
    ("a1x1,a01x1,a01x2", "a1x1,a01x[1-2]", "a01x[1-2],a1x1"),
    ("n1-ib,n2-ib,n10-ib", "n1-ib,n2-ib,n10-ib", "n1-ib,n2-ib,n10-ib"),
    ("n10-ib,n9-ib,n09-ib", "n10-ib,n9-ib,n09-ib", "n09-ib,n9-ib,n10-ib"),
    ("r1n09,r1n9,r01n9", "r1n[09,9],r01n9", "r01n9,r1n[9,09]"),
    ("1,01,001,10", "[1,01,001,10]", "[1,01,10,001]"),
    ("09,9,10,010", "[09,9-10,010]", "[9-10,09,010]"),
    ("n7,n07,n007,n0007,n8", "n[7,07,007,0007,8]", "n[7-8,07,007,0007]"),
    ("n08,n08,n9,n09", "n[08,08,9,09]", "n[9,08,08-09]"),
    ("n9,n10,n11,n09,n010,n011", "n[9-11,09,010-011]", "n[9-11,09,010-011]"),
]
"""Names written with and without zeros, duplicates, prefixes with numbers: Slurm sorts the ranges the names make
as given (``n9,n10,n08`` is ``n[9-10]`` and ``n08``), so the sorted order depends on the names' order."""


def _random_names(seed: int) -> list[str]:
    """A few names of mixed zero-padding, as the live comparison below draws them."""
    import random

    rng = random.Random(seed)
    prefixes, numbers = ["n", "n", "a", "b10x", "b2x", "", "r1n"], ["0", "00", "1", "01", "001", "8", "08", "9", "09",
                                                                  "009", "10", "010", "99", "099", "100", "0100"]
    names = [rng.choice(["n", "x", "n1-ib", "n10-ib"]) if rng.random() < 0.1 else rng.choice(prefixes) +
             rng.choice(numbers) for _ in range(rng.randint(1, 8))]
    low, width = rng.randint(0, 11), rng.randint(1, 3)
    return names + [f"n{number:0{width}d}" for number in range(low, low + rng.randint(0, 4))]


@pytest.mark.parametrize(("text", "hosts"), EXPAND)
def test_expand(text: str, hosts: tuple[str, ...]) -> None:
    assert expand(text) == hosts


@pytest.mark.parametrize(("text", "hosts"), SLURM_READS)
def test_whitespace_separates_hosts_as_slurm_reads_them(text: str, hosts: tuple[str, ...]) -> None:
    assert expand(text) == hosts


@pytest.mark.parametrize("text", SLURM_REFUSES)
def test_whitespace_where_slurm_reads_no_bound_is_refused_quoting_the_part(text: str) -> None:
    with pytest.raises(EnvironmentVariableError, match=r"SLURM_STEP_NODELIST.*(no bound|\[)"):
        expand(text, "SLURM_STEP_NODELIST")


def test_a_partial_step_with_a_space_in_its_list_resolves_every_address() -> None:
    from slurm_resolver.resolution import resolve

    env = {"SLURM_PROCID": "1", "SLURM_STEP_NUM_TASKS": "2", "SLURM_STEP_NODELIST": "node3, node4"}
    assert resolve(env, resolves=lambda n: True).spec().as_dict() == {"worker": ["node3:8888", "node4:8888"]}


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


@pytest.mark.parametrize(("hosts", "ordered", "sorted_"), COLLAPSE)
def test_collapse_keeps_the_order_as_scontrol_show_hostlist(hosts: list[str], ordered: str, sorted_: str) -> None:
    assert collapse(hosts) == ordered and collapse(hosts, sort=True) == sorted_
    assert expand(ordered) == tuple(hosts)


@pytest.mark.parametrize(("names", "ordered", "sorted_"), MIXED_PADDING)
def test_mixed_zero_padding_collapses_as_slurm_writes_it(names: str, ordered: str, sorted_: str) -> None:
    hosts = names.split(",")
    assert (collapse(hosts), collapse(hosts, sort=True)) == (ordered, sorted_)
    assert expand(ordered) == tuple(hosts) and sorted(expand(sorted_)) == sorted(hosts)


def test_numbers_far_apart_keep_every_name() -> None:
    """Slurm compares two numbers by their difference as a C ``int`` (``n0,n3000000000`` loses ``n0``
    there); here every name is read back."""
    assert collapse(["n3000000000", "n0"], sort=True) == "n[0,3000000000]"


@given(st.lists(st.integers(0, 64), min_size=1, max_size=30))
def test_counts_round_trip_property(counts: list[int]) -> None:
    assert expand_counts(collapse_counts(counts)) == tuple(counts)


@given(st.lists(st.from_regex(r"[a-z]{0,4}[0-9]{1,3}(-[a-z]{1,2})?", fullmatch=True), min_size=1, max_size=20))
def test_hostlist_round_trip_property(hosts: list[str]) -> None:
    """expand() undoes collapse(), order and duplicates kept, sorted or not."""
    assert expand(collapse(hosts)) == tuple(hosts)
    assert sorted(expand(collapse(hosts, sort=True))) == sorted(hosts)


@given(st.lists(st.sampled_from(["a", "b", "n1", "n2", "n[1-3]", "n[08, 10]", "x[1 - 2]"]), min_size=1, max_size=6),
       st.lists(st.sampled_from([",", " ", ", ", "\t", "\n", " ,"]), min_size=5, max_size=5))
def test_any_separators_read_as_commas(words: list[str], separators: list[str]) -> None:
    text = "".join(w + s for w, s in zip(words, separators * 2))
    assert expand(text) == tuple(h for w in words for h in expand(w))


@pytest.mark.slurm
def test_slurm_agrees(slurm_cluster: dict[str, str]) -> None:
    """The tables above are what this cluster's own ``scontrol`` says."""
    import subprocess

    def scontrol(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["scontrol", "show", *args], capture_output=True, text=True, timeout=30)

    for text, hosts in [*EXPAND[:5], *EXPAND[6:], *SLURM_READS]:  # node[1-3]-ib: python-hostlist's, not Slurm 22.05's
        assert tuple(scontrol("hostnames", text).stdout.split()) == hosts, text
    for text in SLURM_REFUSES:
        assert "Invalid hostlist" in scontrol("hostnames", text).stderr, text
    for hosts, ordered, sorted_ in [*COLLAPSE, *((names.split(","), o, s) for names, o, s in MIXED_PADDING)]:
        assert scontrol("hostlist", ",".join(hosts)).stdout.strip() == ordered
        assert scontrol("hostlistsorted", ",".join(hosts)).stdout.strip() == sorted_
    for seed in range(100):  # and names drawn at random, compared live
        hosts = _random_names(seed)
        assert scontrol("hostlist", ",".join(hosts)).stdout.strip() == collapse(hosts), hosts
        assert scontrol("hostlistsorted", ",".join(hosts)).stdout.strip() == collapse(hosts, sort=True), hosts


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
    hosts, increasing = fast
    assert hosts == hostlist.expand_hostlist(text, allow_duplicates=True)
    assert not increasing or len(set(hosts)) == len(hosts)  # increasing numbers: no two names alike


def test_the_fast_path_takes_the_common_forms_only() -> None:
    assert _expand_one_bracket("node[1-4096]") is not None and _expand_one_bracket("n[001-010]x") is not None
    for other in ("node1", "a[1-2],b", "r[1-2]n[1-2]", "n[2-1]", "n[a-b]", "n[1-200000]"):
        assert _expand_one_bracket(other) is None


def test_the_fast_paths_bound_on_a_range_is_python_hostlists() -> None:
    """The fast path keeps python-hostlist unimported, so it holds a copy of its bound: the two must agree."""
    import hostlist

    from slurm_resolver import hostlists

    assert hostlists._MOST_IN_RANGE == hostlist.MAX_SIZE
