"""Denials are logged (principal, action, object) and counted, never silent."""

from __future__ import annotations

import logging
from collections import Counter

from siftbus.errors import AccessDenied, AuthenticationError, QuotaExceeded, SecurityError

log = logging.getLogger("siftbus.security")


class Audit:
    """Counts denials by kind and action, and logs each one at WARNING."""

    def __init__(self) -> None:
        self.denials: Counter[tuple[str, str]] = Counter()
        """(kind, action) -> count; kind is authentication, access or quota."""

    def record(self, exc: SecurityError, *, principal: str = "", action: str = "") -> None:
        if isinstance(exc, AuthenticationError):
            kind = "authentication"
        elif isinstance(exc, QuotaExceeded):
            kind = "quota"
        else:
            kind = "access"
        if isinstance(exc, AccessDenied):
            principal = principal or exc.principal
            action = action or exc.action
        self.denials[(kind, action or "connect")] += 1
        log.warning("denied %s: principal=%s action=%s: %s", kind, principal or "?",
                    action or "connect", exc.message)

    def total(self) -> int:
        return sum(self.denials.values())
