"""The gateway's limits: what one HTTP request or one streaming connection may cost.

Every limit is configurable (``siftbus gateway --max-body`` ... or
:class:`GatewayLimits` in code) and each one exceeded gives one clear error to that
request or connection only (docs/gateway.md, Limits).
"""

from __future__ import annotations

from dataclasses import dataclass

from siftbus.errors import ConfigError


@dataclass(frozen=True, slots=True)
class GatewayLimits:
    """Limits of one gateway (the defaults suit a single machine)."""

    max_body: int = 4 * 1024 * 1024
    """Bytes of one request body (a bigger one: 413)."""
    max_batch: int = 10_000
    """Events (lines or array items) of one publish request (more: 413)."""
    max_errors: int = 100
    """Per-line errors reported in one publish answer (the rest are counted)."""
    request_timeout: float = 30.0
    """Seconds one request may take (streams excepted; beyond it: 504)."""
    queue_size: int = 1000
    """Messages waiting toward one streaming client or pull subscription; when full,
    new notifications are dropped and counted (the client is told how many)."""
    max_subscriptions: int = 1000
    """Subscriptions of one WebSocket or SSE connection (and pull subscriptions)."""
    max_sessions: int = 100
    """Broker connections the gateway keeps (one per distinct bearer token); idle ones
    are closed to make room, else 429."""
    max_connections: int = 1000
    """Connections and requests in progress (beyond: 503)."""
    ws_max_message: int = 1024 * 1024
    """Bytes of one WebSocket message from a client (more closes it with 1009)."""
    max_pull: int = 1000
    """Notifications one pull request returns."""
    ws_batch: int = 1000
    """Notifications in one WebSocket ``notifications`` message (or one SSE write): a
    consumer gets what waits for it at once, up to this many."""
    ws_batch_bytes: int = 512 * 1024
    """Bytes of one WebSocket ``notifications`` message (below the 1 MiB that many
    WebSocket libraries accept by default); a single longer notification goes alone."""
    max_wait: float = 25.0
    """Seconds a pull request may wait for a first notification."""

    def __post_init__(self) -> None:
        for name in ("max_body", "max_batch", "max_errors", "queue_size",
                     "max_subscriptions", "max_sessions", "max_connections", "ws_max_message",
                     "max_pull", "ws_batch", "ws_batch_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"gateway limit {name} must be a positive integer",
                                  field=name)
        for name in ("request_timeout", "max_wait"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not 0 < value < 86400:
                raise ConfigError(f"gateway limit {name} must be 0 < seconds < 86400",
                                  field=name)


DEFAULT_LIMITS = GatewayLimits()

__all__ = ["DEFAULT_LIMITS", "GatewayLimits"]
