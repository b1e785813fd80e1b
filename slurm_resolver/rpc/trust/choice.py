"""Which seals a task makes, chosen once from what it is asked and its environment.

``auth=`` (or ``SLURM_RESOLVER_AUTH``) asks for a secret, MUNGE, none, or ``auto``: a secret where
one is given (`SECRET`, or a file only its owner can read, `SECRET_FILE`), else MUNGE where munged
answers, else none. The secret is read and checked here (long enough; a file nobody else can
read); what the seals are, and how they are made and checked, is `slurm_resolver.rpc.trust.seals`'.
"""

from __future__ import annotations

import enum
import os
import stat
from collections.abc import Mapping

from ...errors import ConfigurationError
from ...parsing import optional_int
from .seals import AuthMode, Authority

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)

SECRET = "SLURM_RESOLVER_SECRET"
"""The job's secret, in every task's environment (srun passes it on; another user cannot read it)."""
SECRET_FILE = "SLURM_RESOLVER_SECRET_FILE"
"""A file holding the job's secret, readable by its owner only."""


class AuthChoice(enum.Enum):
    """What ``auth=`` (or ``SLURM_RESOLVER_AUTH``) asks for, read once from its word (`MODES`)."""

    AUTO = "auto"
    """A secret where one is given, else MUNGE where munged answers, else nothing."""
    SECRET = "secret"
    MUNGE = "munge"
    NONE = "none"

    @classmethod
    def parse(cls, value: object, source: str = "auth") -> AuthChoice:
        """``value`` as a choice (one of `MODES`, or a choice already); a `ConfigurationError` naming
        ``source`` and the words for anything else.

        >>> AuthChoice.parse("munge")
        <AuthChoice.MUNGE: 'munge'>
        """
        if isinstance(value, AuthChoice):
            return value
        try:
            return cls(value)
        except ValueError:
            raise ConfigurationError(f"{source}={value!r} is not known", f"use one of {', '.join(MODES)}") from None


MODES = tuple(choice.value for choice in AuthChoice)
"""The words of ``auth=`` and ``SLURM_RESOLVER_AUTH``: a secret, else MUNGE, else none; or one of them, or an error."""


def _secret(env: Mapping[str, str]) -> tuple[bytes | None, str]:
    """The job's secret and where it came from; None and why not."""
    text = env.get(SECRET)
    if text is not None:
        if len(text.strip()) < 16:  # as a file's: whitespace is no secret
            raise ConfigurationError(f"{SECRET} holds {len(text.strip())} characters besides white space: too short "
                                     "to be a secret",
                                     "use 16 or more random characters, e.g. $(openssl rand -hex 24), or unset it")
        return text.encode(), f"a secret in {SECRET}"
    path = env.get(SECRET_FILE)
    if path is None:
        return None, f"no secret ({SECRET} and {SECRET_FILE} are unset)"
    try:
        with open(path, "rb") as f:
            info = os.fstat(f.fileno())
            data = f.read(4096).strip()
    except OSError as exc:
        raise ConfigurationError(f"{SECRET_FILE}={path!r} cannot be read: {exc.strerror}",
                                 "point it at a file of this job's user, mode 0600") from None
    if info.st_uid != os.getuid() or info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigurationError(f"{SECRET_FILE}={path!r} may be read by others (mode {stat.S_IMODE(info.st_mode):o})",
                                 f"chmod 600 {path}: a secret others can read proves nothing")
    if len(data) < 16:
        raise ConfigurationError(f"{SECRET_FILE}={path!r} holds {len(data)} bytes: too short to be a secret",
                                 "write 16 or more random characters into it")
    return data, f"a secret in {path}"


def attempt_of(env: Mapping[str, str]) -> str:
    """Which run of the job and attempt of ``slurm-resolver run`` this is (``SLURM_RESTART_COUNT``,
    ``SLURM_RESOLVER_ATTEMPT``): a secret's seals are good for one, so that a call recorded in one
    run is refused when replayed into the next (a requeued job numbers its steps from 0 again)."""
    return f"{optional_int(env, 'SLURM_RESTART_COUNT') or 0}.{optional_int(env, 'SLURM_RESOLVER_ATTEMPT') or 1}"


def authority(choice: AuthChoice | None, env: Mapping[str, str], launch: str) -> Authority:
    """The authority of a task of ``launch`` for ``choice`` (default ``SLURM_RESOLVER_AUTH``, else
    ``'auto'``: a secret where one is given, else MUNGE where munged answers, else none). A
    secret's seals are good for this launch in this run of the job only (`attempt_of()`)."""
    if choice is None:
        choice = AuthChoice.parse(env.get("SLURM_RESOLVER_AUTH") or "auto", "SLURM_RESOLVER_AUTH")
    if choice is AuthChoice.NONE:
        return Authority(AuthMode.NONE, "not authenticated: auth='none'")
    if choice in (AuthChoice.AUTO, AuthChoice.SECRET):
        secret, where = _secret(env)
        if secret is not None:
            return Authority(AuthMode.SECRET, where, secret=secret, launch=f"{launch} run {attempt_of(env)}",
                             outside=launch)
        if choice is AuthChoice.SECRET:
            raise ConfigurationError(f"auth='secret' but {where}",
                                     f"export {SECRET} in the job (the templates do), or use auth='auto'")
    from ...munge import open_munge

    munge, how = open_munge(env)
    if munge is not None:
        return Authority(AuthMode.MUNGE, how, munge=munge)
    if choice is AuthChoice.MUNGE:
        raise ConfigurationError(f"auth='munge' but {how}", "start munged on every node, or use auth='auto'")
    return Authority(AuthMode.NONE, f"not authenticated: no secret, and {how}")
