"""Who may call and who may answer: a secret's MAC (keyed BLAKE2b), MUNGE credentials for the first round, or
nothing (which of them a task makes: test_choice.py)."""

from __future__ import annotations

import os

import pytest

from slurm_resolver.environment import snapshot
from slurm_resolver.rpc.trust.choice import SECRET, AuthChoice, authority
from slurm_resolver.rpc.trust.seals import AuthMode, Purpose, SealVerdict

NO_MUNGED = {"SLURM_RESOLVER_MUNGE_SOCKET": "/nonexistent/munge.socket"}
SECRET_ENV = {**NO_MUNGED, SECRET: "s" * 24}


def test_a_secret_seals_every_header_for_one_launch_and_one_purpose() -> None:
    mine, peer = authority(AuthChoice.AUTO, SECRET_ENV, "5.0"), authority(AuthChoice.SECRET, SECRET_ENV, "5.0")
    assert mine.mode is AuthMode.SECRET and SECRET in mine.how
    seal = mine.seal(Purpose.CALL, b"header", first_round=True)
    assert peer.check(Purpose.CALL, b"header", seal, first_round=True).believed
    assert "not made with this launch's key" in peer.check(Purpose.CALL, b"header!", seal).why  # other contents
    assert "not made with this launch's key" in peer.check(Purpose.ANSWER, b"header", seal).why  # a call is no answer
    other_step = authority(AuthChoice.AUTO, SECRET_ENV, "5.1")
    assert "not made with this launch's key" in other_step.check(Purpose.CALL, b"header", seal).why
    stranger = authority(AuthChoice.AUTO, {**NO_MUNGED, SECRET: "t" * 24}, "5.0")
    assert "not made" in peer.check(Purpose.CALL, b"header", stranger.seal(Purpose.CALL, b"header")).why
    assert "no seal" in peer.check(Purpose.CALL, b"header", b"").why
    assert peer.check(Purpose.CALL, b"header", b"").verdict is SealVerdict.REFUSED


@pytest.mark.slurm
def test_munge_proves_the_first_round_and_carries_the_launch_key(slurm_cluster: dict[str, str]) -> None:
    """With the test cluster's munged: a call's credential is good for its header once; an answer's
    carries the root's key, which the caller learns, and later seals are MACs with it."""
    root, caller = authority(AuthChoice.MUNGE, snapshot(), "5.0"), authority(AuthChoice.AUTO, snapshot(), "5.0")
    assert root.mode is caller.mode is AuthMode.MUNGE
    credential = caller.seal(Purpose.CALL, b"call header", first_round=True)
    assert root.check(Purpose.CALL, b"call header", credential, first_round=True).believed
    assert "Replayed credential" in root.check(Purpose.CALL, b"call header", credential, first_round=True).why
    made_elsewhere = caller.seal(Purpose.CALL, b"call header", first_round=True)
    assert "made for another message" in root.check(Purpose.CALL, b"another", made_elsewhere, first_round=True).why
    assert "no MUNGE credential" in root.check(Purpose.CALL, b"call header", b"", first_round=True).why
    assert "MUNGE refuses" in root.check(Purpose.CALL, b"call header", b"MUNGE:forged", first_round=True).why
    key = root.new_key()
    answer = root.seal(Purpose.ANSWER, b"answer header", first_round=True)
    assert caller.key is None and caller.check(Purpose.ANSWER, b"answer header", answer, first_round=True).believed
    assert caller.key == key and os.getuid() == root.uid
    later = caller.seal(Purpose.CALL, b"a barrier")
    assert root.check(Purpose.CALL, b"a barrier", later).believed
    root.key = b"k" * 65  # longer than a seal's key may be: refused as it comes, never a crash in a later seal
    stranger = authority(AuthChoice.AUTO, snapshot(), "5.0")
    too_long = root.seal(Purpose.ANSWER, b"answer header", first_round=True)
    assert "launch key is malformed" in stranger.check(Purpose.ANSWER, b"answer header", too_long, True).why
    assert stranger.key is None


def test_the_wire_carries_no_key_longer_than_a_seal_takes() -> None:
    """The answer's bound on a key (read in the codec) is the seal's (BLAKE2b's): one constant."""
    from slurm_resolver.rpc.rounds import codec
    from slurm_resolver.rpc.trust import seals

    assert codec.MOST_KEY == seals.MOST_KEY == 64
