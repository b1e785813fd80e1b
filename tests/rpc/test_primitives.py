"""The bootstrap's hashes, nonces and jitter: the same results as `hashlib`, `hmac` and `secrets` give."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from slurm_resolver.rpc import primitives


@pytest.mark.parametrize("size", [0, 1, 200, primitives._LARGE - 1, primitives._LARGE, 300_000])
def test_sha256_is_hashlibs_below_and_above_the_size_that_goes_to_openssl(size: int) -> None:
    data = bytes(range(256)) * (size // 256) + bytes(size % 256)
    assert primitives.sha256(data).digest() == hashlib.sha256(data).digest()
    assert primitives.sha256(data).hexdigest() == hashlib.sha256(data).hexdigest()


def test_keyed_blake2b_and_the_comparison_are_hashlibs_and_hmacs() -> None:
    key, message = b"k" * 64, b"a header"
    ours = primitives.blake2b(message, key=key, digest_size=32).digest()
    assert ours == hashlib.blake2b(message, key=key, digest_size=32).digest()
    assert primitives.same(ours, bytes(ours)) and not primitives.same(ours, bytes(32))
    assert primitives.same(ours, ours) == hmac.compare_digest(ours, ours)


def test_fresh_bytes_and_jitter() -> None:
    nonces = {primitives.fresh(16) for _ in range(100)}
    assert len(nonces) == 100 and all(len(n) == 16 for n in nonces)
    draws = [primitives.uniform(0.5, 1.5) for _ in range(2000)]
    assert all(0.5 <= d <= 1.5 for d in draws)
    assert min(draws) < 0.6 and max(draws) > 1.4  # spread over the range
    ports = [primitives.integer(10000, 10004) for _ in range(400)]
    assert set(ports) == {10000, 10001, 10002, 10003}


def test_the_highest_draw_stays_below_the_bound() -> None:
    from unittest.mock import patch

    with patch("os.urandom", lambda n: b"\xff" * n):
        assert primitives.integer(10000, 20000) < 20000 and primitives.uniform(0.0, 1.0) < 1.0
