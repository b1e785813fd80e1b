"""MUNGE through libmunge: where munged's socket is, what a credential says, why it is absent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from slurm_resolver.environment import snapshot
from slurm_resolver.munge import DEFAULT_SOCKET, MungeError, open_munge, socket_path


def test_the_socket_is_the_variable_then_slurm_conf_then_the_default(tmp_path: Path) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=x\nAuthType=auth/munge\nAuthInfo=cred_expire=10, socket=/run/m/socket\n")
    assert socket_path({"SLURM_RESOLVER_MUNGE_SOCKET": "/a", "SLURM_CONF": str(conf)}) == "/a"
    assert socket_path({"SLURM_CONF": str(conf)}) == "/run/m/socket"
    conf.write_text("AuthInfo=cred_expire=10\n")
    assert socket_path({"SLURM_CONF": str(conf)}) == DEFAULT_SOCKET
    assert socket_path({"SLURM_CONF": str(tmp_path / "missing.conf")}) == DEFAULT_SOCKET


def test_without_munged_there_is_no_munge_and_a_reason() -> None:
    munge, why = open_munge({"SLURM_RESOLVER_MUNGE_SOCKET": "/nonexistent/socket"})
    assert munge is None and "/nonexistent/socket does not exist" in why


@pytest.mark.slurm
def test_a_credential_carries_its_payload_and_uid_once(slurm_cluster: dict[str, str]) -> None:
    munge, why = open_munge(snapshot())
    assert munge is not None, why
    credential = munge.encode(b"hello")
    decoded = munge.decode(credential)
    assert decoded.payload == b"hello" and decoded.uid == os.getuid()
    with pytest.raises(MungeError, match="Replayed"):
        munge.decode(credential)
    with pytest.raises(MungeError):
        munge.decode(b"MUNGE:not-a-credential:")


@pytest.mark.slurm
def test_a_forged_credential_read_leaves_minting_intact(slurm_cluster: dict[str, str]) -> None:
    """libmunge writes what it reads into the context: a forged credential read on the minting
    context left it minting nothing ("Invalid MAC type 0"), and a squatter's answer broke a bootstrap."""
    munge, why = open_munge(snapshot())
    assert munge is not None, why
    with pytest.raises(MungeError):
        munge.decode(b"forgedforgedforgedforged")
    assert munge.decode(munge.encode(b"after")).payload == b"after"
