"""The seam to MUNGE: credentials that prove a process's uid, through libmunge (ctypes).

Every Slurm cluster runs munged (Slurm itself authenticates with it). A task mints a
credential of its own for every call that must be trusted (a credential decodes only once
per host: never share one); the receiver decodes it and learns the sender's uid, which
munged vouches for, and the payload. libmunge is loaded on first use; where it or munged is
missing, `open_munge()` says why and returns None.
"""

from __future__ import annotations

import ctypes
import logging
import os
from collections.abc import Mapping
from typing import Any

from .errors import ResolutionError
from .values import Value, fill

__all__: list[str] = []  # internal: no public names (docs/reference.md)

log = logging.getLogger("slurm_resolver")

DEFAULT_SOCKET = "/run/munge/munge.socket.2"
_OPT_SOCKET = 8  # MUNGE_OPT_SOCKET in munge.h
_OPT_UID_RESTRICTION = 9  # MUNGE_OPT_UID_RESTRICTION


class MungeError(ResolutionError):
    """MUNGE refused to mint or decode a credential; ``code`` is libmunge's error number."""

    def __init__(self, code: int, text: str) -> None:
        super().__init__(f"MUNGE: {text} (error {code})",
                         "check that munged runs on this node (systemctl status munge)")
        self.code = code
        self.text = text


def socket_path(env: Mapping[str, str]) -> str:
    """munged's socket: ``SLURM_RESOLVER_MUNGE_SOCKET``, else Slurm's ``AuthInfo=socket=`` in
    slurm.conf, else libmunge's default.

    >>> socket_path({"SLURM_RESOLVER_MUNGE_SOCKET": "/tmp/m.sock"})
    '/tmp/m.sock'
    """
    if env.get("SLURM_RESOLVER_MUNGE_SOCKET"):
        return env["SLURM_RESOLVER_MUNGE_SOCKET"]
    conf = env.get("SLURM_CONF") or "/etc/slurm/slurm.conf"
    try:
        with open(conf) as lines:
            for line in lines:
                key, _, value = line.strip().partition("=")
                if key.strip().lower() == "authinfo":
                    for part in value.split(","):
                        name, _, path = part.strip().partition("=")
                        if name == "socket" and path:
                            return path
    except OSError:
        pass
    return DEFAULT_SOCKET


class Decoded(Value):
    """What a credential says: its payload and who minted it."""

    __slots__ = ("payload", "uid", "gid")
    payload: bytes
    uid: int
    gid: int

    def __init__(self, payload: bytes, uid: int, gid: int) -> None:
        fill(self, payload, uid, gid)


class Munge:
    """libmunge, talking to the munged at ``socket``.

    Minting and reading use contexts of their own: libmunge writes what a credential it reads
    says (its cipher, its MAC...) into the context, and a context that read a forged
    credential then mints nothing ("Invalid MAC type 0").
    """

    def __init__(self, library: Any, libc: Any, socket: str, decoder: int | None = None) -> None:
        self._lib = library
        self._libc = libc
        self.socket = socket
        self._ctx = self._context(decoder)
        self._reader = self._context(None)

    def _context(self, decoder: int | None) -> ctypes.c_void_p:
        ctx = ctypes.c_void_p(self._lib.munge_ctx_create())
        if not ctx.value:
            raise MungeError(5, "cannot create a MUNGE context")
        code = self._lib.munge_ctx_set(ctx, ctypes.c_int(_OPT_SOCKET), ctypes.c_char_p(self.socket.encode()))
        if not code and decoder is not None:
            code = self._lib.munge_ctx_set(ctx, ctypes.c_int(_OPT_UID_RESTRICTION), ctypes.c_uint(decoder))
        if code:
            raise MungeError(code, self._text(code, ctx))
        return ctx

    def restricted_to(self, uid: int) -> Munge:
        """libmunge at the same munged, minting credentials that only ``uid`` (and root) can decode:
        what they carry is private to that user."""
        return Munge(self._lib, self._libc, self.socket, decoder=uid)

    def _text(self, code: int, ctx: ctypes.c_void_p) -> str:
        text = self._lib.munge_ctx_strerror(ctx) or self._lib.munge_strerror(code)
        return bytes(text).decode(errors="replace")

    def encode(self, payload: bytes) -> bytes:
        """A fresh credential of this process's uid carrying ``payload``."""
        cred = ctypes.c_char_p()
        code = self._lib.munge_encode(ctypes.byref(cred), self._ctx, payload, len(payload))
        if code:
            raise MungeError(code, self._text(code, self._ctx))
        try:
            return bytes(cred.value or b"")
        finally:
            self._libc.free(cred)

    def decode(self, credential: bytes) -> Decoded:
        """The payload and the uid of ``credential``; a forged, expired or replayed one is a MungeError."""
        buf, length, uid, gid = ctypes.c_void_p(), ctypes.c_int(), ctypes.c_uint(), ctypes.c_uint()
        code = self._lib.munge_decode(credential, self._reader, ctypes.byref(buf), ctypes.byref(length),
                                      ctypes.byref(uid), ctypes.byref(gid))
        try:
            if code:
                raise MungeError(code, self._text(code, self._reader))
            return Decoded(ctypes.string_at(buf, length.value) if buf.value else b"", uid.value, gid.value)
        finally:
            if buf.value:
                self._libc.free(buf)


def _load(soname: str, name: str) -> Any:
    """The library ``soname`` (as dlopen finds it: LD_LIBRARY_PATH, ld.so's cache, its directories),
    else the one ``ctypes.util.find_library(name)`` names. By its soname first, since find_library
    runs ``ldconfig -p`` (a process, and shutil and tempfile imported) in every task's start for the
    name it would find; OSError where neither loads."""
    try:
        return ctypes.CDLL(soname)
    except OSError:
        from ctypes.util import find_library

        found = find_library(name)
        if found is None or found == soname:
            raise
        return ctypes.CDLL(found)


def _library() -> tuple[Any, Any] | None:
    try:
        lib = _load("libmunge.so.2", "munge")  # MUNGE 0.5's, every distribution's
    except OSError:
        return None
    libc = _load("libc.so.6", "c")
    lib.munge_ctx_create.restype = ctypes.c_void_p
    lib.munge_strerror.restype = ctypes.c_char_p
    lib.munge_ctx_strerror.restype = ctypes.c_char_p
    lib.munge_ctx_strerror.argtypes = [ctypes.c_void_p]
    lib.munge_encode.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
    lib.munge_decode.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                                 ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_uint),
                                 ctypes.POINTER(ctypes.c_uint)]
    libc.free.argtypes = [ctypes.c_void_p]
    return lib, libc


def open_munge(env: Mapping[str, str]) -> tuple[Munge | None, str]:
    """libmunge talking to a live munged, and how it was found; or None and why not.

    A credential is minted and decoded once, so that a munged that does not answer is
    found here, not in the middle of a bootstrap.
    """
    found = _library()
    if found is None:
        return None, "libmunge is not installed (Debian: libmunge2)"
    socket = socket_path(env)
    if not os.path.exists(socket):
        return None, f"munged's socket {socket} does not exist (set SLURM_RESOLVER_MUNGE_SOCKET where it is elsewhere)"
    try:
        munge = Munge(*found, socket)
        munge.decode(munge.encode(b"probe"))
    except MungeError as exc:
        return None, f"munged at {socket} does not answer: {exc.text}"
    return munge, f"MUNGE through {socket}"
