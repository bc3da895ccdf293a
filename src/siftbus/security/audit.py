"""Denials are logged (principal, action, object) and counted, never silent.

Every denial is counted. Logging is throttled per (kind, action, principal): the first
denial is logged at WARNING at once, later ones at most every :data:`LOG_INTERVAL`
seconds with the number left unlogged in between, so a client hammering a closed door
(a publisher over its rate, thousands of times a second) cannot flood the log.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable

from siftbus.errors import AccessDenied, AuthenticationError, QuotaExceeded, SecurityError

log = logging.getLogger("siftbus.security")

LOG_INTERVAL = 10.0
"""Seconds between two log lines for the same kind, action and principal."""


class Audit:
    """Counts denials by kind and action, and logs them at WARNING (throttled)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.denials: Counter[tuple[str, str]] = Counter()
        """(kind, action) -> count; kind is authentication, access or quota."""
        self.by_principal: Counter[str] = Counter()
        """principal -> denials (``?`` when it was not known, e.g. a bad token)."""
        self._clock = clock
        self._last: dict[tuple[str, str, str], tuple[float, int]] = {}

    def record(self, exc: SecurityError, *, principal: str = "", action: str = "",
               object: str = "") -> None:
        if isinstance(exc, AuthenticationError):
            kind = "authentication"
        elif isinstance(exc, QuotaExceeded):
            kind = "quota"
        else:
            kind = "access"
        if isinstance(exc, AccessDenied):
            principal = principal or exc.principal
            action = action or exc.action
            object = object or exc.object
        action = action or "connect"
        who = principal or "?"
        self.denials[(kind, action)] += 1
        self.by_principal[who] += 1
        key = (kind, action, who)
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last[0] < LOG_INTERVAL:
            self._last[key] = (last[0], last[1] + 1)
            return
        if len(self._last) > 10_000:  # bound the throttle's memory (many principals)
            self._last.clear()
        quiet = f" ({last[1]} more since the last report)" if last and last[1] else ""
        self._last[key] = (now, 0)
        log.warning("denied %s: principal=%s action=%s object=%s: %s%s", kind, who, action,
                    object or "-", exc.message, quiet)

    def total(self) -> int:
        return sum(self.denials.values())

    def to_dict(self) -> dict[str, int]:
        """``{"kind/action": count}`` (for stats replies)."""
        return {f"{k}/{a}": n for (k, a), n in sorted(self.denials.items())}
