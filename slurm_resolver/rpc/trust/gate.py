"""The checks every call to one server meets before anything of it is believed, in one place.

Whatever the call (Join, WhoAreYou, Watch), its first message is an envelope this server can read
(`Gate.read`: else ``invalid``), it belongs to this launch (`Gate.same_launch`: else ``foreign``),
and its seal is a task's of this job, made for this very server (`Gate.sealed`: else
``unauthenticated``, or ``unready`` where this task cannot check seals yet). What each call checks
besides (a Join's round, a question asked too late) it checks between the launch and the seal: a
MUNGE credential is spent where it is meant, last. Refusals for seals are counted, and the first
ones logged (a flood is one line in a thousand).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from ..messages import Identity, WireError
from ..transport import Refusal, Refused
from ..wire import Seal, unwrap
from .seals import Authority, Checked, Purpose, SealVerdict

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)

log = logging.getLogger("slurm_resolver")

T = TypeVar("T")


class Gate:
    """What every call to one task's server is checked for, and how many were refused for their seals.

    Args:
        identity: this task.
        world_size: tasks in the launch (bounds what a message may name).
        authority: checks callers' seals, and seals this server's answers.
        port: the port this server listens on (a call made for another server is refused).
    """

    def __init__(self, identity: Identity, world_size: int, authority: Authority, port: int) -> None:
        self.identity = identity
        self.world_size = world_size
        self.authority = authority
        self.port = port
        self.refused = 0
        """How many calls were refused for their seals (the first ones are logged)."""

    def read(self, message: bytes, decode: Callable[[bytes, int], T]) -> tuple[T, bytes, bytes]:
        """A call's first message: what its header says (``decode(header, world_size)``), the header
        and its seal; `Refused` (``invalid``) for anything malformed or beyond the job."""
        try:
            header, seal = unwrap(message)
            return decode(header, self.world_size), header, seal
        except WireError as exc:
            raise Refused(Refusal.INVALID, str(exc)) from None

    def same_launch(self, job_key: str) -> None:
        """Refuse (``foreign``) a call of another launch."""
        if job_key != self.identity.job_key:
            raise Refused(Refusal.FOREIGN, "this server belongs to another launch")

    def sealed(self, what: str, source: int, header: bytes, seal: bytes, port: int, first_round: bool = False
               ) -> None:
        """Refuse a caller whose seal is not a task's of this job, for this very call to this server."""
        checked = Checked.refused("made for another server") if port != self.port else \
            self.authority.check(Purpose.CALL, header, seal, first_round)
        if checked.believed:
            return
        if checked.verdict is SealVerdict.UNREADY:
            raise Refused(Refusal.UNREADY, f"rank {self.identity.rank} cannot check seals yet: ask again")
        self.refused += 1
        if self.refused <= 20 or self.refused % 1000 == 0:
            log.warning("slurm_resolver: rank %d refused %s claiming rank %d: %s (%d refused so far)",
                        self.identity.rank, what, source, checked.why, self.refused)
        raise Refused(Refusal.UNAUTHENTICATED, checked.why)

    def seal(self, first_round: bool = False) -> Seal:
        """What seals this server's answers (``first_round``: as the first round's are)."""
        return lambda header: self.authority.seal(Purpose.ANSWER, header, first_round)
