"""The counters a listener's connections share: what they did (:class:`TransportStats`,
a snapshot for ``stats``) and the budget of bytes they may buffer together
(:class:`TransportCounters`).

Separate from :mod:`~siftbus.wire.transport` because it is plain bookkeeping with no I/O:
the listener, the broker's statistics and the transport read it, and only the transport
drives it. It knows a held-back connection only as something it can ask to
:meth:`~Regulated._regulate` again, so it does not import the transport (which imports
it).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Protocol

from .limits import DEFAULT_LIMITS


class Regulated(Protocol):
    """A connection held back over the budget (a
    :class:`~siftbus.wire.transport.FrameConnection`)."""

    def _regulate(self) -> None:
        """Read again, or stay held back, as the budget now allows."""


@dataclass(frozen=True, slots=True)
class TransportStats:
    """What a listener's connections did (a snapshot)."""

    connections: int
    """Connections open now."""
    accepted: int
    """Connections accepted since start (refused ones not included)."""
    refused: dict[str, int]
    """ERRORs that closed a connection: by exceeded limit (``max_frame``,
    ``frame_timeout``, ``hello_timeout``, ``max_connections``, ``max_string``, ...) or
    else by error class (``WireError`` for a malformed frame, ``ConfigError``, ...)."""
    dropped_frames: int
    """Droppable frames (notifications) not sent because the peer was too far behind."""
    buffered: int
    """Bytes received and not yet handled, over all connections, now."""
    peak_buffered: int
    """The most bytes ever held that way at once."""

    def to_dict(self) -> dict[str, Any]:
        return {"connections": self.connections, "accepted": self.accepted,
                "refused": dict(self.refused), "dropped_frames": self.dropped_frames,
                "buffered": self.buffered, "peak_buffered": self.peak_buffered}


@dataclass(slots=True)
class TransportCounters:
    """The mutable counters behind :class:`TransportStats` (shared by a listener's
    connections) and the budget of buffered bytes."""

    max_buffered: int = DEFAULT_LIMITS.max_buffered
    accepted: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    dropped_frames: int = 0
    buffered: int = 0
    peak_buffered: int = 0
    held_back: set[Regulated] = field(default_factory=set)
    """Connections not read because the budget is spent."""
    tls_done: int = 0
    """TLS handshakes completed (a TLS listener counts the failed ones from it)."""

    def add(self, n: int) -> None:
        self.buffered += n
        if self.buffered > self.peak_buffered:
            self.peak_buffered = self.buffered

    def release(self, n: int) -> None:
        self.buffered -= n
        if self.held_back and self.buffered <= self.max_buffered:
            waiting, self.held_back = self.held_back, set()
            for conn in waiting:
                conn._regulate()

    @property
    def over_budget(self) -> bool:
        return self.buffered > self.max_buffered

    def snapshot(self, connections: int) -> TransportStats:
        return TransportStats(connections, self.accepted, dict(self.refused),
                              self.dropped_frames, self.buffered, self.peak_buffered)


__all__ = ["Regulated", "TransportCounters", "TransportStats"]
