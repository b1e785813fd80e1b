"""Messages as a test peer (or an attacker) builds them: calls, questions and beats, sealed or not."""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence

from slurm_resolver.rpc.calls import CALLS
from slurm_resolver.rpc.detection.beats import Beat, encode_first_beat
from slurm_resolver.rpc.messages import Failure, Records, Round
from slurm_resolver.rpc.rounds.codec import Call, encode_call
from slurm_resolver.rpc.rounds.coordinator import Coordinator
from slurm_resolver.rpc.shapes import Parts
from slurm_resolver.rpc.trust.identity import Question, encode_who
from slurm_resolver.rpc.trust.seals import Authority, Purpose


def _sealer(authority: Authority | None, first_round: bool = False):  # type: ignore[no-untyped-def]
    if authority is None:
        return lambda header: b""
    return lambda header: authority.seal(Purpose.CALL, header, first_round)


def join_call(job_key: str, round: Round, source: int, *, node: int = 0, port: int = 0,
              records: Records | None = None, failure: Failure | None = None, authority: Authority | None = None,
              nonce: bytes | None = None) -> list[bytes]:
    """The messages of a Join call."""
    records = records or Records()
    call = Call(job_key, round, source, node, nonce or secrets.token_bytes(16), port, failure or Failure())
    return encode_call(call, records, _sealer(authority, round.kind.policy.first))


def who_call(job_key: str, source: int, port: int, authority: Authority | None = None, early: bool = False) -> bytes:
    """A WhoAreYou question (``early``: a leader's, in the first round)."""
    return encode_who(Question(job_key, source, secrets.token_bytes(16), port, early), _sealer(authority, early))


def first_beat(job_key: str, source: int, node: int = 0, port: int = 0, authority: Authority | None = None) -> bytes:
    """A watch call's first beat."""
    return encode_first_beat(Beat(job_key, source, node, secrets.token_bytes(16), port), _sealer(authority))


async def call_at(coordinator: Coordinator, messages: Sequence[bytes], seconds: float) -> list[bytes]:
    """A Join call straight to ``coordinator`` (as a network would make it), its answer's messages."""
    call = coordinator.open_call(messages[0])
    round, answer = await coordinator.join(call, messages[1:], time.monotonic() + seconds)
    coordinator.sent(round)
    return answer



def standing_in(fake: object) -> Parts:
    """The parts of a server that ``fake`` alone stands in for: it answers every call of the table (each
    with its method of the row's name: ``open_call``/``join``/``sent``, ``who``, ``watch``, ``stacks``)."""
    return Parts({call.part: fake for call in CALLS})
