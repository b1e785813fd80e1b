"""How a call fails: a server's refusal (bounded words, a kind) and what its caller sees."""

from __future__ import annotations

import pytest

from slurm_resolver.rpc.refusals import CallFailure, LinkError, Refusal, Refused


@pytest.mark.parametrize(("code", "kind", "again"), [
    (Refusal.DEADLINE, CallFailure.DEADLINE, False),
    (Refusal.UNREADY, CallFailure.REFUSED, True),
    (Refusal.BUSY, CallFailure.REFUSED, True),
    (Refusal.UNAUTHENTICATED, CallFailure.REFUSED, False),
    (Refusal.FOREIGN, CallFailure.REFUSED, False),
])
def test_a_refusal_reaches_its_caller_as_its_kind_and_says_whether_to_ask_again(
        code: Refusal, kind: CallFailure, again: bool) -> None:
    seen = LinkError.of(Refused(code, "why"))
    assert (seen.kind, seen.code, seen.detail, seen.again) == (kind, code, "why", again)


def test_words_are_bounded_and_nobody_answering_is_asked_again() -> None:
    refused = Refused(Refusal.INVALID, "x" * 10_000)
    assert len(refused.detail) == 500 and str(refused).startswith("invalid: x")
    assert LinkError(CallFailure.UNAVAILABLE, "nobody there").again
    assert LinkError(CallFailure.CUT, "CANCELLED: CANCELLED").again  # a server that lives cut it short
    assert not LinkError(CallFailure.DEADLINE, "late").again
    assert len(LinkError(CallFailure.UNAVAILABLE, "y" * 10_000).detail) == 500
