"""Hashes, fresh bytes and jitter for the bootstrap, from the interpreter's own modules.

`hashlib` loads OpenSSL (its ``_hashlib``) at import, `hmac` and `secrets` load `hashlib`, and `random`
loads `bisect` and a SHA-512 for its seeding: about 6 ms of CPU together in every task's start on the
project's machine, for a few hashes of a few hundred bytes, a nonce a call and a jitter a retry
(benchmarks/README.md). The results are the same: SHA-256 and BLAKE2b are the algorithms whoever
computes them (CPython's own, which `hashlib` itself falls back to), a nonce is ``os.urandom``'s (as
`secrets.token_bytes`), a comparison of secrets runs in constant time (as `hmac.compare_digest`).
Where CPython was built without its own hashes, `hashlib`'s are used. SHA-256 of more than
`_LARGE` bytes (a table's chunks at large sizes) goes to OpenSSL, five times faster there.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Protocol

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)

_LARGE = 16 * 1024
"""Bytes from which SHA-256 is OpenSSL's (loaded once then): a table's chunk, not a header."""

try:
    from _sha2 import sha256 as _own_sha256  # type: ignore[import-not-found,unused-ignore]  # Python 3.12+
except ImportError:
    try:
        from _sha256 import sha256 as _own_sha256  # type: ignore[import-not-found,no-redef,unused-ignore]
    except ImportError:  # pragma: no cover - an interpreter without its own hashes
        from hashlib import sha256 as _own_sha256  # type: ignore[assignment,unused-ignore]
try:
    from _blake2 import blake2b as blake2b
except ImportError:  # pragma: no cover
    from hashlib import blake2b as blake2b  # type: ignore[assignment,unused-ignore]  # noqa: F811
try:
    from _operator import _compare_digest
except ImportError:  # pragma: no cover
    from hmac import compare_digest as _compare_digest  # type: ignore[no-redef,unused-ignore]

same: Callable[[bytes, bytes], bool] = _compare_digest
"""Whether two secrets (seals) are equal, in time that does not tell where they differ."""


class Digest(Protocol):
    """A hash of some bytes (as `hashlib`'s objects)."""

    def digest(self) -> bytes: ...

    def hexdigest(self) -> str: ...


def sha256(data: bytes) -> Digest:
    """A SHA-256 object of ``data`` (``.digest()``, ``.hexdigest()``)."""
    if len(data) < _LARGE:
        own: Digest = _own_sha256(data)
        return own
    import hashlib

    return hashlib.sha256(data)


def fresh(size: int) -> bytes:
    """``size`` random bytes fit for a nonce or a key (the system's: `secrets.token_bytes`)."""
    return os.urandom(size)


def uniform(low: float, high: float) -> float:
    """A number drawn evenly between ``low`` and ``high`` (``high`` only by rounding, as `random.uniform`): the
    jitter of a pause (not for secrets)."""
    return low + (high - low) * (int.from_bytes(os.urandom(7), "little") >> 3) / (1 << 53)  # 53 bits: exact


def integer(low: int, high: int) -> int:
    """An integer drawn from ``low`` up to ``high`` (never ``high``; at most 2**32 apart), as `random.randrange`."""
    return low + int.from_bytes(os.urandom(8), "little") % (high - low)
