"""The checks every call to a server meets: a readable envelope, its launch, its seal for this very server."""

from __future__ import annotations

import pytest

from slurm_resolver.rpc.messages import Identity
from slurm_resolver.rpc.transport import Refusal, Refused
from slurm_resolver.rpc.trust.gate import Gate
from slurm_resolver.rpc.trust.identity import decode_who
from slurm_resolver.rpc.trust.seals import AuthMode, Authority, Purpose

from ..forge import who_call

ME = Identity("5.0", 0, "n0", "worker", 0)


def _keyed(key: bytes = b"k" * 32) -> Authority:
    authority = Authority(AuthMode.NONE, "a test")
    authority.learn(key)
    return authority


def _gate(authority: Authority | None = None) -> Gate:
    return Gate(ME, 4, authority or _keyed(), 8000)


def _admitted(gate: Gate, message: bytes, first_round: bool = False) -> Refusal | None:
    """The refusal of a WhoAreYou question at ``gate``, or None where it passes."""
    try:
        question, header, seal = gate.read(message, decode_who)
        gate.same_launch(question.job_key)
        gate.sealed("a test call", question.source, header, seal, question.port, first_round)
    except Refused as exc:
        return exc.code
    return None


@pytest.mark.parametrize("message, refusal", [
    (who_call("5.0", 1, 8000, _keyed()), None),
    (b"\xff not an envelope", Refusal.INVALID),
    (who_call("5.0", 9, 8000, _keyed()), Refusal.INVALID),  # a rank beyond the job
    (who_call("6.0", 1, 8000, _keyed()), Refusal.FOREIGN),
    (who_call("5.0", 1, 8001, _keyed()), Refusal.UNAUTHENTICATED),  # made for another server
    (who_call("5.0", 1, 8000), Refusal.UNAUTHENTICATED),  # no seal
    (who_call("5.0", 1, 8000, _keyed(b"x" * 32)), Refusal.UNAUTHENTICATED),  # another launch's key
], ids=["sealed", "no_envelope", "rank_beyond_the_job", "another_launch", "for_another_server", "no_seal",
        "another_launchs_key"])  # words: the messages' sealed bytes differ in every process (pytest-xdist)
def test_every_call_meets_the_same_checks(message: bytes, refusal: Refusal | None) -> None:
    assert _admitted(_gate(), message) is refusal


def test_a_gate_that_cannot_check_seals_yet_says_so_and_counts_only_refusals() -> None:
    unready = _gate(Authority(AuthMode.NONE, "before the first round"))
    assert _admitted(unready, who_call("5.0", 1, 8000, _keyed())) is Refusal.UNREADY
    assert _admitted(unready, who_call("5.0", 1, 8000), first_round=True) is None  # auth none: nothing to prove
    gate = _gate()
    for _ in range(3):
        _admitted(gate, who_call("5.0", 1, 8000))
    assert unready.refused == 0 and gate.refused == 3


def test_its_answers_are_sealed_with_this_tasks_authority() -> None:
    gate = _gate()
    assert gate.authority.check(Purpose.ANSWER, b"header", gate.seal()(b"header")).believed
