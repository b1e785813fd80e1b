"""Who may join: MUNGE credentials of the job's uid for this very call, or the launch's key alone."""

from __future__ import annotations

import pytest

from slurm_resolver.environment import snapshot
from slurm_resolver.errors import ConfigurationError
from slurm_resolver.rpc.auth import authority
from slurm_resolver.rpc.wire import Failure, Header, Records, digest

NO_MUNGED = {"SLURM_RESOLVER_MUNGE_SOCKET": "/nonexistent/munge.socket"}


def test_without_munged_auto_falls_back_and_says_why_and_munge_refuses() -> None:
    auto = authority("auto", NO_MUNGED)
    assert not auto.enabled and "does not exist" in auto.how and auto.check(b"", Header("k", "r", 1), 80) == ""
    with pytest.raises(ConfigurationError, match="auth='munge' but munged's socket /nonexistent"):
        authority("munge", NO_MUNGED)
    with pytest.raises(ConfigurationError, match="auth='yes'"):
        authority("yes", {})
    assert not authority("none", {}).enabled


@pytest.mark.slurm
def test_a_credential_is_good_for_one_call_only(slurm_cluster: dict[str, str]) -> None:
    """With the test cluster's munged: the right call passes once; a replay, another call, none: refused."""
    me = authority("munge", snapshot())
    call = Header("5.0", "table", 2, 1)
    minted = me.mint(call, 8000, "abc")
    assert me.check(minted, call, 8000, "abc") == ""
    assert "Replayed credential" in me.check(minted, call, 8000, "abc")
    assert "minted for another call" in me.check(me.mint(call, 8000), Header("5.0", "table", 3, 1), 8000)
    assert "sent no MUNGE credential" in me.check(b"", call, 8000)
    assert "MUNGE refuses" in me.check(b"MUNGE:forged", call, 8000)


@pytest.mark.slurm
def test_a_credential_cannot_be_passed_on_to_another_server_or_with_other_contents(
        slurm_cluster: dict[str, str]) -> None:
    """A squatter on a port the task tries first gets a credential: it is good for no other server,
    and for no other records."""
    me = authority("munge", snapshot())
    call = Header("5.0", "table", 2, 1)
    records = Records(ranks=[2], ports=[8001], spares=[9001], gpus={}, nodes=[])
    sent = digest(records, Failure())
    assert "minted for another call" in me.check(me.mint(call, 8000, sent), call, 8001, sent)  # relayed elsewhere
    forged = digest(Records(ranks=[2], ports=[6666], spares=[9001], gpus={}, nodes=[]), Failure())
    assert "minted for another call" in me.check(me.mint(call, 8000, sent), call, 8000, forged)  # other records
    assert me.check(me.mint(call, 8000, sent), call, 8000, sent) == ""
