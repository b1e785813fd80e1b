"""Who may call, and who may answer: every call and every answer carries a seal a task of the job made.

Every message that opens a call or an answer is an envelope (`slurm_resolver.rpc.wire`):
a header and its seal. The header names the launch, the round, the caller's rank, a nonce
fresh for every call (an answer carries it back) and the port of the server called, and it
commits to the chunks that follow; the seal proves who wrote it:

- **A secret** (``SLURM_RESOLVER_SECRET``, or a file only its owner can read,
  ``SLURM_RESOLVER_SECRET_FILE``; the templates make one for every job): each seal is a MAC
  (`mac`) with a key derived from the secret and the launch. Another user cannot read the job's
  environment, so cannot seal.
- **MUNGE**, where no secret is given and munged answers (as on every Slurm cluster): the
  calls and answers of the first round (the table) carry MUNGE credentials, which prove the
  writer's uid; the root makes a random key for the launch, and every answer of the first
  round carries it inside a credential only the job's uid can decode. Later seals are MACs
  with that key.
- **None**: the first round is not sealed, and its result carries the launch's key in the
  clear. That isolates concurrent jobs from each other, not from a hostile user: it is
  said loudly, once, and ``slurm-resolver check`` says it too.

A seal is good for one header only: its call (launch, round, rank, nonce, the server's port,
the digests of its contents) or its answer (the call's nonce): a server that is not the one
meant (a squatter on a candidate port) can pass a call on to no other, and cannot answer it.
"""

from __future__ import annotations

import enum
import functools
import logging
import os
import pwd
from typing import TYPE_CHECKING

from ...values import Value, fill
from ..messages import MOST_KEY
from ..primitives import blake2b, fresh, same, sha256

if TYPE_CHECKING:  # pragma: no cover
    from ...munge import Munge  # libmunge loads only where MUNGE proves calls

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)

log = logging.getLogger("slurm_resolver")

_VERSION = b"slurm-resolver/4"


class AuthMode(enum.Enum):
    """How seals are made."""

    SECRET = "secret"
    MUNGE = "munge"
    NONE = "none"


class Purpose(enum.Enum):
    """What a sealed header opens: a call, or the answer to one (a call's seal is no answer's)."""

    CALL = b"call"
    ANSWER = b"answer"


class SealVerdict(enum.Enum):
    """What the check of a seal concludes; protocol decisions read this, never `Checked.why`."""

    BELIEVED = "believed"
    """A task of this job wrote it, for this very message."""
    UNREADY = "unready"
    """This task cannot check it yet: it does not know the launch's key (ask again)."""
    REFUSED = "refused"
    """Not a task of this job, or not for this message."""


class Checked(Value):
    """The verdict on one seal, and why in words (for people: logs and errors)."""

    __slots__ = ("verdict", "why")
    verdict: SealVerdict
    why: str

    def __init__(self, verdict: SealVerdict, why: str = "") -> None:
        fill(self, verdict, why)

    @property
    def believed(self) -> bool:
        """Whether the writer is a task of this job."""
        return self.verdict is SealVerdict.BELIEVED

    @classmethod
    def refused(cls, why: str) -> Checked:
        """Not believed, because ``why``."""
        return cls(SealVerdict.REFUSED, why)


BELIEVED = Checked(SealVerdict.BELIEVED)
"""The verdict on a seal of this job."""


@functools.lru_cache(maxsize=64)
def _who(uid: int) -> str:
    """A uid with its user's name (looked up once: a flood of refused calls asks NSS once)."""
    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"


class Authority:
    """Seals this task's calls and answers, and checks its peers'.

    Args:
        mode: how seals are made.
        how: how it was decided, for ``check`` and logs.
        munge: libmunge (`MUNGE`).
        secret: the job's secret (``SLURM_RESOLVER_SECRET``: `slurm_resolver.rpc.trust.choice`).
        launch: the launch's key (``<job>.<step>``): a secret's seals are good for one launch.
        outside: the launch as its user outside the job names it (``<job>.<step>``, without the run of the
            job: a secret's seals between the two, `seal_outside`), where ``launch`` says more.
    """

    def __init__(self, mode: AuthMode, how: str, *, munge: Munge | None = None, secret: bytes | None = None,
                 launch: str = "", uid: int | None = None, outside: str | None = None) -> None:
        self.mode = mode
        self.how = how
        self.uid = os.getuid() if uid is None else uid
        self._munge = munge
        self._restricted: Munge | None = None
        self.key: bytes | None = None
        """The key of this launch's MAC seals (`mac`), once known (a secret's: from the start)."""
        self._secret = secret
        self._outside = (outside or launch).encode()
        self._outside_derived: bytes | None = None
        self._munge_tried = False
        if secret is not None:
            self.key = _derived(secret, b" launch " + launch.encode())

    @property
    def _outside_key(self) -> bytes | None:
        """The key of a secret's seals between the job and its user outside it: derived on first use
        (most tasks are never asked from outside)."""
        if self._outside_derived is None and self._secret is not None:
            self._outside_derived = _derived(self._secret, b" outside " + self._outside)
        return self._outside_derived

    @property
    def proves_callers(self) -> bool:
        """Whether a caller of the first round must prove who it is (a secret, or MUNGE)."""
        return self.mode is not AuthMode.NONE

    @property
    def past_first_round(self) -> bool:
        """Whether this task learned the launch's key from the first round (under MUNGE or none): it
        makes and takes no first-round seals any more. A secret's key is known from the start, and
        its seals are the same in every round."""
        return self.key is not None and self.mode is not AuthMode.SECRET

    def new_key(self) -> bytes:
        """The root's key for this launch's later seals (a secret's key stays)."""
        if self.key is None:
            self.key = fresh(32)
        return self.key

    def learn(self, key: bytes) -> None:
        """The launch's key, learned from the first round's answer (or MPI)."""
        if self.key is None and key:
            self.key = bytes(key)

    # Seals.

    def seal(self, purpose: Purpose, header: bytes, first_round: bool = False) -> bytes:
        """The seal of ``header``; ``first_round``: a call or answer of the table round (MUNGE
        credentials where MUNGE proves callers; an answer's carries the launch's key, once the
        root decided one)."""
        if first_round and self.mode is AuthMode.MUNGE:
            assert self._munge is not None
            digest = sha256(header).hexdigest().encode()
            if purpose is Purpose.CALL:
                return self._munge.encode(b" ".join((_VERSION, purpose.value, digest)))
            key = self.key.hex().encode() if self.key is not None else b"-"  # a failed round decided no key
            return self._restricted_munge().encode(b" ".join((_VERSION, purpose.value, digest, key)))
        if self.key is None or (first_round and self.mode is AuthMode.NONE):
            return b""
        return mac(self.key, purpose.value + b"\0" + header)

    def check(self, purpose: Purpose, header: bytes, seal: bytes, first_round: bool = False) -> Checked:
        """Whether the writer of ``header`` is a task of this job, and why not (an answer of the first
        round under MUNGE also teaches this task the launch's key)."""
        if first_round and self.mode is AuthMode.MUNGE:
            why = self._check_munge(purpose, header, seal)
            return Checked.refused(why) if why else BELIEVED
        if first_round and self.mode is AuthMode.NONE:
            return BELIEVED
        if self.key is None:
            return Checked(SealVerdict.UNREADY, "this task does not know the launch's key yet")
        if not seal:
            return Checked.refused("no seal: not a task of this launch, or of an older slurm_resolver")
        if not same(seal, mac(self.key, purpose.value + b"\0" + header)):
            return Checked.refused("a seal not made with this launch's key: not a task of this launch")
        return BELIEVED

    # The job's user outside the job (``slurm-resolver stacks`` on a login node).

    def seal_outside(self, purpose: Purpose, header: bytes, munge: bool | None = None) -> bytes:
        """The seal of ``header`` for a call between the job and its user outside it: a MUNGE credential
        of this uid (``munge``; by default where this task's seals are MUNGE's), else a MAC with the
        secret's key for the launch; none without either (such a call is refused)."""
        words = _outside_words(purpose, header)
        if munge or (munge is None and self.mode is AuthMode.MUNGE):
            found = self._outside_munge()
            return found.encode(words) if found is not None else b""
        outside_key = self._outside_key
        if outside_key is not None:
            return mac(outside_key, words)
        return b""

    def check_outside(self, purpose: Purpose, header: bytes, seal: bytes) -> Checked:
        """Whether ``header`` comes from the job's user (inside or outside the job), as `seal_outside`
        seals: a MUNGE credential of this uid (whatever this task's own seals are: a job that runs with
        a secret knows its user by MUNGE too, where munged answers), or a MAC with the secret's key."""
        words = _outside_words(purpose, header)
        if seal.startswith(_MUNGE_PREFIX):
            found = self._outside_munge()
            if found is None:
                return Checked.refused("a MUNGE credential, where munged does not answer")
            payload, why = self._users_payload(found, seal)
            if payload is None:
                return Checked.refused(why)
            return BELIEVED if payload == words else Checked.refused(f"{why} presented a credential made for "
                                                                     "another message")
        outside_key = self._outside_key
        if outside_key is not None:
            if seal and same(seal, mac(outside_key, words)):
                return BELIEVED
            return Checked.refused("a seal not made with the job's secret")
        if self.mode is AuthMode.NONE:
            return Checked.refused("the job runs without authentication (SLURM_RESOLVER_AUTH=none): nobody "
                                   "outside it is answered")
        return Checked.refused("no MUNGE credential")

    def _outside_munge(self) -> Munge | None:
        """libmunge for the job's user outside it: this task's own, else opened once now."""
        if self._munge is None and not self._munge_tried:
            from ...environment import snapshot
            from ...munge import open_munge

            self._munge_tried = True
            self._munge = open_munge(snapshot())[0]
        return self._munge

    def _restricted_munge(self) -> Munge:
        """libmunge minting credentials only the job's uid can decode (they carry the launch's key)."""
        if self._restricted is None:
            assert self._munge is not None
            self._restricted = self._munge.restricted_to(self.uid)
        return self._restricted

    def _users_payload(self, munge: Munge, seal: bytes) -> tuple[bytes | None, str]:
        """The payload of a MUNGE credential of the job's uid, and who made it; None and why not."""
        from ...munge import MungeError

        if not seal:
            return None, "no MUNGE credential"
        try:
            decoded = munge.decode(seal)
        except MungeError as exc:
            return None, f"a credential MUNGE refuses: {exc.text}"
        if decoded.uid != self.uid:
            return None, f"{_who(decoded.uid)}, not the job's {_who(self.uid)}"
        return decoded.payload, _who(decoded.uid)

    def _check_munge(self, purpose: Purpose, header: bytes, seal: bytes) -> str:
        assert self._munge is not None
        payload, who = self._users_payload(self._munge, seal)
        if payload is None:
            return who
        words = payload.split(b" ")
        digest = sha256(header).hexdigest().encode()
        if words[:3] != [_VERSION, purpose.value, digest] or len(words) != (4 if purpose is Purpose.ANSWER else 3):
            return f"{who} presented a credential made for another message"
        if purpose is Purpose.ANSWER and words[3] != b"-":
            try:
                key = bytes.fromhex(words[3].decode())
            except ValueError:
                key = b""
            if not 0 < len(key) <= MOST_KEY:
                return "a credential whose launch key is malformed"
            self.learn(key)
        return ""


_MUNGE_PREFIX = b"MUNGE:"
"""How every MUNGE credential begins."""


def mac(key: bytes, message: bytes) -> bytes:
    """A seal of ``message`` with ``key`` (at most `MOST_KEY`, BLAKE2b's longest): keyed BLAKE2b-256, a MAC by
    design, from Python's own BLAKE2. A task makes or checks about nine in its bootstrap: HMAC-SHA256 through
    OpenSSL 3 looked its digest up again at every call and cost 11 µs each in a busy task, this about 3.5."""
    return blake2b(message, key=key, digest_size=32).digest()


def _derived(secret: bytes, purpose: bytes) -> bytes:
    """A key derived from the job's secret (any length) for one ``purpose``: keyed BLAKE2b-256 of the
    purpose, keyed with the secret's BLAKE2b-512."""
    return mac(blake2b(secret).digest(), _VERSION + purpose)


def _outside_words(purpose: Purpose, header: bytes) -> bytes:
    return b" ".join((_VERSION, b"outside", purpose.value, sha256(header).hexdigest().encode()))
