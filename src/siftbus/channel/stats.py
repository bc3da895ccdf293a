"""Counters of a channel: the live ones, and the frozen snapshot users read."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ChannelStats:
    """Counters of one channel since it was created (or restored)."""

    accepted: int
    """Events accepted from suppliers (sequence elements counted one by one)."""
    delivered: int
    """Deliveries to consumers (one event to one consumer counts once)."""
    filtered_out: int
    """Events that no consumer's filters let through."""
    discarded: int
    """Queued events dropped by DiscardPolicy (full queue)."""
    expired: int
    """Queued events dropped because their Timeout/StopTime passed."""
    rejected: int
    """Pushes refused with ImplLimit (RejectNewEvents)."""
    queued: int
    """Events waiting in proxy queues now."""
    consumers: int
    """Proxy suppliers now."""
    suppliers: int
    """Proxy consumers now."""


@dataclass(slots=True)
class Counters:
    """The running counters behind :class:`ChannelStats` (guarded by the channel lock)."""

    accepted: int = 0
    delivered: int = 0
    filtered_out: int = 0
    discarded: int = 0
    expired: int = 0
    rejected: int = 0
    queued: int = 0
    """Events in proxy queues (in flight ones excluded): what MaxQueueLength bounds."""


__all__ = ["ChannelStats", "Counters"]
