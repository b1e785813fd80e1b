"""Who may join a launch's rounds: MUNGE credentials of the job's own uid, or the launch's key alone.

With MUNGE (wherever munged runs, as on every Slurm cluster), each call that joins a round
carries a credential the caller minted for that very call: munged vouches for the caller's
uid, and the payload names the launch, the rank and the round. A leader accepts only
credentials of its own uid, for this launch, this rank and this round, within MUNGE's TTL,
never twice (munged's replay cache); only then does the job's token travel down to the
caller. Without MUNGE, any caller that presents the launch's key is believed (the token
scheme): that isolates concurrent jobs, not a hostile user.
"""

from __future__ import annotations

import functools
import logging
import os
import pwd
from collections.abc import Mapping

from ..errors import ConfigurationError
from ..munge import Munge, MungeError, open_munge
from .wire import Header

__all__ = ["Authority", "authority", "MODES"]

log = logging.getLogger("slurm_resolver")

MODES = ("auto", "munge", "none")
"""``auth=`` and ``SLURM_RESOLVER_AUTH``: MUNGE where munged answers; MUNGE or an error; the key alone."""


@functools.lru_cache(maxsize=64)
def _who(uid: int) -> str:
    """A uid with its user's name (looked up once: a flood of refused calls asks NSS once)."""
    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"


class Authority:
    """Mints this task's credentials and checks its callers'.

    Attributes:
        munge: libmunge, or None where calls are not authenticated.
        how: how authentication was decided, for ``check`` and DEBUG logs.
    """

    def __init__(self, munge: Munge | None, how: str, uid: int | None = None) -> None:
        self.munge = munge
        self.how = how
        self.uid = os.getuid() if uid is None else uid

    @property
    def enabled(self) -> bool:
        """Whether callers must prove their uid."""
        return self.munge is not None

    @staticmethod
    def _payload(header: Header, port: int, digest: str) -> bytes:
        return f"slurm-resolver/2 {header.job_key} {header.source} {header.round} {port} {digest}".encode()

    def mint(self, header: Header, port: int, digest: str = "") -> bytes:
        """A fresh credential for the call ``header`` describes, to the server on ``port``, carrying
        the contents whose :func:`~.wire.digest` is ``digest`` (empty without MUNGE): a server
        that is not the one meant (a squatter on a candidate port) cannot pass it on to the real
        one, nor with other contents."""
        return self.munge.encode(self._payload(header, port, digest)) if self.munge is not None else b""

    def check(self, credential: bytes, header: Header, port: int, digest: str = "") -> str:
        """Why the caller of ``header`` to this server on ``port`` is refused; ``''`` when it is believed."""
        if self.munge is None:
            return ""
        if not credential:
            return f"rank {header.source} of {header.job_key[:64]} sent no MUNGE credential"
        try:
            decoded = self.munge.decode(credential)
        except MungeError as exc:
            return f"rank {header.source} of {header.job_key[:64]} sent a credential MUNGE refuses: {exc.text}"
        if decoded.uid != self.uid:
            return (f"{_who(decoded.uid)}, not the job's {_who(self.uid)}, claimed rank {header.source} of "
                    f"{header.job_key[:64]}")
        if decoded.payload != self._payload(header, port, digest):
            return (f"{_who(decoded.uid)} presented a credential minted for another call "
                    f"({decoded.payload[:120].decode(errors='replace')!r}) as rank {header.source} of "
                    f"{header.job_key[:64]}")
        return ""


def authority(mode: str | None, env: Mapping[str, str]) -> Authority:
    """The authority of this task for ``mode`` (default ``SLURM_RESOLVER_AUTH``, else ``'auto'``)."""
    mode = mode or env.get("SLURM_RESOLVER_AUTH") or "auto"
    if mode not in MODES:
        raise ConfigurationError(f"auth={mode!r} is not known", f"use one of {', '.join(MODES)}")
    if mode == "none":
        return Authority(None, "not authenticated: auth='none'")
    munge, how = open_munge(env)
    if munge is None and mode == "munge":
        raise ConfigurationError(f"auth='munge' but {how}", "start munged on every node, or use auth='auto'")
    if munge is None:
        log.debug("bootstrap: calls are not authenticated: %s", how)
        return Authority(None, f"not authenticated: {how}")
    return Authority(munge, how)
