"""Quotas per principal: profiles held, publish rate (token bucket), bytes queued.

Exceeding one raises :class:`~siftbus.errors.QuotaExceeded` naming the quota and its
limit, which the server answers as an error and counts; nothing is dropped silently.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from siftbus.errors import ConfigError, QuotaExceeded


@dataclass(frozen=True, slots=True)
class Quotas:
    """Limits of one principal; ``None`` means unlimited."""

    max_profiles: int | None = None
    """Subscriptions (and advertisements) held at once."""
    publish_rate: float | None = None
    """Events per second, sustained."""
    publish_burst: float | None = None
    """Events published at once above the rate (default: one second's worth)."""
    max_queued_bytes: int | None = None
    """Notification bytes waiting to be written to the principal's connections."""

    def __post_init__(self) -> None:
        for name in ("max_profiles", "publish_rate", "publish_burst", "max_queued_bytes"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or v <= 0):
                raise ConfigError(f"quota {name} must be a positive number, got {v!r}",
                                  field=name)


UNLIMITED = Quotas()


class TokenBucket:
    """``rate`` tokens a second up to ``burst``; :meth:`take` spends them."""

    def __init__(self, rate: float, burst: float, clock: Callable[[], float] = time.monotonic
                 ) -> None:
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._tokens = burst
        self._at = clock()

    def take(self, n: float = 1.0) -> bool:
        """Spend ``n`` tokens if there are that many; False (and nothing spent) if not."""
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
        self._at = now
        if n > self._tokens:
            return False
        self._tokens -= n
        return True


class QuotaUsage:
    """What one principal uses now, checked against its :class:`Quotas`."""

    def __init__(self, principal: str, quotas: Quotas,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.principal = principal
        self.quotas = quotas
        self.profiles = 0
        rate = quotas.publish_rate
        self._bucket = (TokenBucket(rate, quotas.publish_burst or rate, clock)
                        if rate is not None else None)

    def _exceeded(self, quota: str, limit: float, what: str) -> QuotaExceeded:
        return QuotaExceeded(f"{self.principal} exceeds its {quota} quota of {limit:g}: {what}",
                             quota=quota, limit=limit, field=quota)

    def reserve_profiles(self, n: int = 1) -> None:
        """Count ``n`` more profiles held; refuses when that passes the quota."""
        limit = self.quotas.max_profiles
        if limit is not None and self.profiles + n > limit:
            raise self._exceeded("max_profiles", limit,
                                 f"holds {self.profiles}, asks for {n} more")
        self.profiles += n

    def hold_profiles(self, n: int) -> None:
        """Count ``n`` profiles held already (restored from a durable store) without
        refusing: a quota lowered since they were made applies to new ones."""
        self.profiles += n

    def release_profiles(self, n: int = 1) -> None:
        self.profiles = max(0, self.profiles - n)

    def check_publish(self, n_events: int) -> None:
        """Spend the rate for ``n_events`` or refuse the whole publication."""
        if self._bucket is not None and not self._bucket.take(n_events):
            assert self.quotas.publish_rate is not None
            raise self._exceeded("publish_rate", self.quotas.publish_rate,
                                 f"{n_events} events now is above the rate (events/s)")

    def check_queued(self, queued_bytes: int) -> None:
        limit = self.quotas.max_queued_bytes
        if limit is not None and queued_bytes > limit:
            raise self._exceeded("max_queued_bytes", limit, f"{queued_bytes} bytes queued")
