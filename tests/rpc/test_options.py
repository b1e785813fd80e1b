"""Every knob of the bootstrap in one frozen value: checked once, choices parsed into types, precedence."""

from __future__ import annotations

from typing import Any

import pytest

from slurm_resolver.errors import ConfigurationError
from slurm_resolver.exchange import ExchangeMode, LocalExchange
from slurm_resolver.rpc.options import FIELDS, BootstrapOptions
from slurm_resolver.rpc.tree import Checking, Verify, checked_peers


@pytest.mark.parametrize("given, how, count, word", [
    ("once", Checking.ONCE, 0, "once"), ("ring", Checking.ONCE, 0, "once"), ("all", Checking.ALL, 0, "all"),
    ("none", Checking.NONE, 0, "none"), (3, Checking.NEXT, 3, "3"),
])
def test_verify_is_parsed_once_into_its_type(given: object, how: Checking, count: int, word: str) -> None:
    options = BootstrapOptions(verify=given)  # type: ignore[arg-type]
    assert options.verify == Verify(how, count) and str(options.verify) == word
    assert BootstrapOptions(verify=options.verify).verify is options.verify


@pytest.mark.parametrize("given", ["sometimes", 0, -1, True, 2.5, None])
def test_an_unknown_verify_is_refused_naming_the_choices(given: object) -> None:
    with pytest.raises(ConfigurationError, match="'once', 'all', 'none' or a count"):
        BootstrapOptions(verify=given)  # type: ignore[arg-type]


def test_checks_after_the_table_and_their_peers() -> None:
    assert [Verify.parse(v).after_table for v in ("once", "none", "all", 2)] == [False, False, True, True]
    assert checked_peers(0, 4, Verify.parse("none")) == [] and checked_peers(3, 4, Verify.parse(2)) == [0, 1]


@pytest.mark.parametrize("given, variable, expected", [
    (None, None, ExchangeMode.AUTO), (None, "mpi", ExchangeMode.MPI), ("rendezvous", "mpi", ExchangeMode.RENDEZVOUS),
    (ExchangeMode.MPI, None, ExchangeMode.MPI),
])
def test_the_exchange_is_an_enum_and_an_explicit_value_wins_over_its_variable(
        given: Any, variable: str | None, expected: ExchangeMode) -> None:
    env = {} if variable is None else {"SLURM_RESOLVER_EXCHANGE": variable}
    assert BootstrapOptions(exchange=given).mode(env) is expected


def test_an_exchange_object_passes_as_given_and_none_is_refused_naming_its_source() -> None:
    group = LocalExchange.group(1)[0]
    assert BootstrapOptions(exchange=group).mode({}) is group
    with pytest.raises(ConfigurationError, match="not exchange='none'"):
        BootstrapOptions(exchange="none")
    with pytest.raises(ConfigurationError, match="SLURM_RESOLVER_EXCHANGE=none"):
        BootstrapOptions().mode({"SLURM_RESOLVER_EXCHANGE": "none"})
    with pytest.raises(ConfigurationError, match="SLURM_RESOLVER_EXCHANGE='tcp' is not known"):
        BootstrapOptions().mode({"SLURM_RESOLVER_EXCHANGE": "tcp"})


@pytest.mark.parametrize("keywords, message", [
    ({"timeout": 0}, "timeout=0 is not a number of seconds"), ({"port": 70000}, "port=70000"),
    ({"fanout": 0}, "fanout=0"), ({"rendezvous": ()}, "must list 1 to 64 ports"), ({"auth": "kerberos"}, "auth="),
    ({"heartbeat": 1.0, "patience": 1.5}, "at least twice the heartbeat"), ({"colour": "red"}, "unknown options"),
])
def test_anything_out_of_range_is_refused_before_anything_starts(keywords: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        BootstrapOptions.of(None, keywords)


def test_keywords_go_on_top_of_a_value_and_no_heartbeat_is_none() -> None:
    base = BootstrapOptions(timeout=30)
    assert BootstrapOptions.of(base, {}) is base
    assert BootstrapOptions.of(base, {"heartbeat": 0}).heartbeat is None and base.timeout == 30
    assert {f.name for f in FIELDS} >= {"exchange", "verify", "timeout", "auth", "heartbeat"}


def test_every_choice_is_its_type_once_made_and_an_unknown_word_names_the_option_and_its_words() -> None:
    from slurm_resolver.rpc.trust.choice import AuthChoice

    options = BootstrapOptions.of(None, {"exchange": "mpi", "verify": "all", "auth": "munge"})
    assert (options.exchange, options.verify, options.auth) == \
        (ExchangeMode.MPI, Verify(Checking.ALL), AuthChoice.MUNGE)
    assert BootstrapOptions(verify=Verify.parse("2")).verify == Verify(Checking.NEXT, 2)  # the command line's digits
    with pytest.raises(ConfigurationError, match="(?s)auth='kerberos' is not known.*auto, secret, munge, none"):
        BootstrapOptions.of(None, {"auth": "kerberos"})
    with pytest.raises(ConfigurationError, match="(?s)exchange='tcp' is not known.*auto, mpi, rendezvous"):
        BootstrapOptions.of(None, {"exchange": "tcp"})
