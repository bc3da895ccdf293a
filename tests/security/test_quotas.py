"""Quotas: a token bucket for the publish rate, counts for profiles and queued bytes."""

from __future__ import annotations

import logging

import pytest

from siftbus.errors import AccessDenied, AuthenticationError, QuotaExceeded
from siftbus.security.audit import Audit
from siftbus.security.quotas import Quotas, QuotaUsage, TokenBucket


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_the_bucket_allows_the_burst_then_the_rate() -> None:
    clock = Clock()
    b = TokenBucket(rate=10, burst=5, clock=clock)
    assert sum(b.take() for _ in range(20)) == 5
    clock.t = 0.5  # five more tokens
    assert sum(b.take() for _ in range(20)) == 5
    clock.t = 100.0  # never more than the burst
    assert not b.take(6) and b.take(5)


def test_publishing_over_the_rate_is_refused_whole_and_named() -> None:
    clock = Clock()
    u = QuotaUsage("b3", Quotas(publish_rate=100, publish_burst=100), clock)
    u.check_publish(60)
    with pytest.raises(QuotaExceeded) as info:
        u.check_publish(60)
    assert info.value.quota == "publish_rate" and info.value.retriable
    clock.t = 1.0
    u.check_publish(100)


def test_profile_and_queue_quotas() -> None:
    u = QuotaUsage("b3", Quotas(max_profiles=2, max_queued_bytes=1000))
    u.reserve_profiles(2)
    with pytest.raises(QuotaExceeded, match="max_profiles"):
        u.reserve_profiles()
    u.release_profiles()
    u.reserve_profiles()
    u.check_queued(1000)
    with pytest.raises(QuotaExceeded, match="max_queued_bytes"):
        u.check_queued(1001)
    QuotaUsage("x", Quotas()).check_publish(10**9)  # unlimited


def test_denials_are_counted_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    a = Audit()
    with caplog.at_level(logging.WARNING, "siftbus.security"):
        a.record(AccessDenied("no", principal="b3", action="subscribe", object="p1"))
        a.record(AuthenticationError("bad token"), principal="?")
        a.record(QuotaExceeded("slow down", quota="publish_rate"), principal="b3",
                 action="publish")
    assert a.denials == {("access", "subscribe"): 1, ("authentication", "connect"): 1,
                         ("quota", "publish"): 1}
    assert a.total() == 3
    assert "principal=b3 action=subscribe" in caplog.text
