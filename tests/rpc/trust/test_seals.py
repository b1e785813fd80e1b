"""Who may call and who may answer: a secret's MAC (keyed BLAKE2b), MUNGE credentials for the first round, or
nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from slurm_resolver.environment import snapshot
from slurm_resolver.errors import ConfigurationError
from slurm_resolver.rpc.trust.seals import SECRET, SECRET_FILE, AuthChoice, AuthMode, Purpose, SealVerdict, authority

NO_MUNGED = {"SLURM_RESOLVER_MUNGE_SOCKET": "/nonexistent/munge.socket"}
SECRET_ENV = {**NO_MUNGED, SECRET: "s" * 24}


def test_without_a_secret_or_munged_auto_proves_nothing_and_says_why() -> None:
    auto = authority(AuthChoice.AUTO, NO_MUNGED, "5.0")
    assert auto.mode is AuthMode.NONE and "does not exist" in auto.how and not auto.proves_callers
    assert auto.check(Purpose.CALL, b"header", b"", first_round=True).believed  # the first round: believed
    unready = auto.check(Purpose.CALL, b"header", b"")
    assert unready.verdict is SealVerdict.UNREADY and "does not know the launch's key" in unready.why
    with pytest.raises(ConfigurationError, match="auth='munge' but munged's socket /nonexistent"):
        authority(AuthChoice.MUNGE, NO_MUNGED, "5.0")
    with pytest.raises(ConfigurationError, match="auth='secret' but no secret"):
        authority(AuthChoice.SECRET, NO_MUNGED, "5.0")
    with pytest.raises(ConfigurationError, match="SLURM_RESOLVER_AUTH='yes' is not known"):
        authority(None, {"SLURM_RESOLVER_AUTH": "yes"}, "5.0")
    with pytest.raises(ConfigurationError, match="(?s)auth='yes' is not known.*auto, secret, munge, none"):
        AuthChoice.parse("yes")
    assert authority(AuthChoice.NONE, SECRET_ENV, "5.0").mode is AuthMode.NONE


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


def test_a_secret_too_short_or_in_a_file_others_read_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="too short"):
        authority(AuthChoice.AUTO, {SECRET: "short"}, "5.0")
    path = tmp_path / "secret"
    path.write_text("x" * 32)
    path.chmod(0o644)
    with pytest.raises(ConfigurationError, match="may be read by others"):
        authority(AuthChoice.AUTO, {**NO_MUNGED, SECRET_FILE: str(path)}, "5.0")
    path.chmod(0o600)
    from_file = authority(AuthChoice.AUTO, {**NO_MUNGED, SECRET_FILE: str(path)}, "5.0")
    assert from_file.mode is AuthMode.SECRET and str(path) in from_file.how
    with pytest.raises(ConfigurationError, match="cannot be read"):
        authority(AuthChoice.AUTO, {SECRET_FILE: str(tmp_path / "missing")}, "5.0")


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


@pytest.mark.parametrize("secret", [" " * 16, " " * 48, "\t\n" * 12, " " * 10 + "abc" + "\n" * 10])
def test_a_secret_of_white_space_is_refused_as_its_file_would_be(secret: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="too short to be a secret"):
        authority(AuthChoice.AUTO, {SECRET: secret}, "5.0")
    path = tmp_path / "secret"
    path.write_text(secret)
    path.chmod(0o600)
    with pytest.raises(ConfigurationError, match="too short to be a secret"):
        authority(AuthChoice.AUTO, {**NO_MUNGED, SECRET_FILE: str(path)}, "5.0")


@pytest.mark.parametrize("later", [{"SLURM_RESTART_COUNT": "1"}, {"SLURM_RESOLVER_ATTEMPT": "2"}])
def test_a_secrets_seal_recorded_in_one_run_is_refused_in_the_next(later: dict[str, str]) -> None:
    """The secret is the job's, the same after a requeue, whose steps are numbered from 0 again: a
    call a squatter recorded in the first run must not open the same step of the next."""
    first = authority(AuthChoice.AUTO, SECRET_ENV, "5.0")
    recorded = first.seal(Purpose.CALL, b"a barrier")
    assert authority(AuthChoice.AUTO, {**SECRET_ENV, "SLURM_RESTART_COUNT": "0"}, "5.0").check(
        Purpose.CALL, b"a barrier", recorded).believed  # the same run: the same seals
    replayed = authority(AuthChoice.AUTO, {**SECRET_ENV, **later}, "5.0").check(Purpose.CALL, b"a barrier", recorded)
    assert replayed.verdict is SealVerdict.REFUSED


def test_the_words_of_auth_are_read_once_as_a_choice() -> None:
    from slurm_resolver.errors import ConfigurationError
    from slurm_resolver.rpc.trust.seals import MODES, AuthChoice, authority

    assert tuple(choice.value for choice in AuthChoice) == MODES
    assert authority(AuthChoice.NONE, {}, "9.0").mode is AuthMode.NONE
    with pytest.raises(ConfigurationError, match="SLURM_RESOLVER_AUTH='Secret' is not known"):
        authority(None, {"SLURM_RESOLVER_AUTH": "Secret"}, "9.0")


def test_the_wire_carries_no_key_longer_than_a_seal_takes() -> None:
    """The answer's bound on a key (read in the codec) is the seal's (BLAKE2b's): one constant."""
    from slurm_resolver.rpc.rounds import codec
    from slurm_resolver.rpc.trust import seals

    assert codec.MOST_KEY == seals.MOST_KEY == 64
