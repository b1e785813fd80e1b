"""The rendezvous ports: derived from the launch's key, or given; checked where given in a variable."""

from __future__ import annotations

import pytest

from slurm_resolver.errors import EnvironmentVariableError
from slurm_resolver.rpc.network.ports import candidates_of, rendezvous_ports


def test_ports_are_derived_from_the_key_below_the_ephemeral_range() -> None:
    ports = rendezvous_ports("1234.0")
    assert ports == rendezvous_ports("1234.0") and ports != rendezvous_ports("1234.1")
    assert len(ports) == len(set(ports)) == 12 and all(20000 <= p < 32768 for p in ports)


@pytest.mark.parametrize("env, rendezvous, port, expected", [
    ({}, None, 29500, [29500]), ({}, (30001, 30002), 0, [30001, 30002]),
    ({"SLURM_RESOLVER_RENDEZVOUS_PORTS": "30005, 30006"}, None, 0, [30005, 30006]),
    ({"SLURM_RESOLVER_RENDEZVOUS_PORTS": "30005"}, (30001,), 0, [30001]),
])
def test_a_given_port_wins_then_the_option_then_the_variable(env: dict[str, str], rendezvous: tuple[int, ...] | None,
                                                             port: int, expected: list[int]) -> None:
    assert candidates_of(env, "1.0", rendezvous, port) == expected


@pytest.mark.parametrize("text", ["", "0", "70000", "a,b", ",".join(["30000"] * 65), "３０００"])
def test_a_bad_variable_is_named(text: str) -> None:
    with pytest.raises(EnvironmentVariableError, match="SLURM_RESOLVER_RENDEZVOUS_PORTS"):
        candidates_of({"SLURM_RESOLVER_RENDEZVOUS_PORTS": text}, "1.0", None, 0)
