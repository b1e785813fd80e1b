"""Which seals a task makes: what ``auth=`` asks, the job's secret read and checked, MUNGE where munged answers,
else none; a secret's seals good for one run of the job."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_resolver.errors import ConfigurationError
from slurm_resolver.rpc.trust.choice import MODES, SECRET, SECRET_FILE, AuthChoice, authority
from slurm_resolver.rpc.trust.seals import AuthMode, Purpose, SealVerdict

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
    assert tuple(choice.value for choice in AuthChoice) == MODES
    assert authority(AuthChoice.NONE, {}, "9.0").mode is AuthMode.NONE
    with pytest.raises(ConfigurationError, match="SLURM_RESOLVER_AUTH='Secret' is not known"):
        authority(None, {"SLURM_RESOLVER_AUTH": "Secret"}, "9.0")
