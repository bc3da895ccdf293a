"""What composite evaluation takes and gives: stamped events, matches, event time.

Times are whole microseconds. An event's *position* ``(time, order)`` orders the stream:
``order`` is a tie-breaker that is the same wherever the event is seen (a publication id
``(src, seq)`` in a broker network, ``(source, line)`` in Spark, an index in a test); the
orders of one stream MUST be mutually comparable and unique.
"""

from __future__ import annotations

from dataclasses import dataclass

from siftbus.model import Event

Order = tuple[str | int, ...]
Position = tuple[int, Order]

US_PER_SECOND = 1_000_000


@dataclass(frozen=True, slots=True)
class StampedEvent:
    """An event with its event time (microseconds) and its tie-breaker."""

    event: Event
    time: int
    order: Order

    @property
    def position(self) -> Position:
        """Where the event stands in the stream: by time, then by ``order``."""
        return (self.time, self.order)


@dataclass(frozen=True, slots=True)
class CompositeMatch:
    """One emitted match of a composite profile.

    ``bindings`` pairs each bound component's label with its event, in position order;
    ``completed`` is the time (microseconds) at which the match became certain: its last
    event, or the end of a trailing negation's window.
    """

    profile: str
    subscriber: str
    bindings: tuple[tuple[str, StampedEvent], ...]
    completed: int

    @property
    def start(self) -> StampedEvent:
        """The earliest event of the match."""
        return self.bindings[0][1]

    def event(self, label: str) -> StampedEvent:
        """The event bound to ``label``; ``KeyError`` if the label is not bound."""
        for lab, ev in self.bindings:
            if lab == label:
                return ev
        raise KeyError(label)

    def key(self) -> tuple[str, tuple[tuple[str, Position], ...], int]:
        """What identifies the match: profile, (label, position) pairs, completion."""
        return (self.profile, tuple((lab, ev.position) for lab, ev in self.bindings),
                self.completed)


def event_time(event: Event) -> int | None:
    """The event time declared by the event's type (``"@time"``), in microseconds, or
    ``None`` when its type declares none (then the access broker's stamp is its time)."""
    name = event.etype.time
    if name is None:
        return None
    attr = event.etype.attribute(name)
    key = event.keys[attr.position]
    assert isinstance(key, int)
    places = getattr(attr.domain, "places", 0)  # int seconds, or decimal scaled by 10**places
    return key * 10 ** (6 - places)


def stamp(event: Event, order: Order, default_time: int | None = None) -> StampedEvent:
    """``event`` with its declared time, or ``default_time`` (microseconds) when its type
    declares none; ``ValueError`` when there is neither."""
    t = event_time(event)
    if t is None:
        if default_time is None:
            raise ValueError(f"{event.etype.name} declares no time attribute; "
                             "give the event a time")
        t = default_time
    return StampedEvent(event, t, order)


def seconds(t: float) -> int:
    """Seconds (a broker's clock) as whole microseconds."""
    return round(t * US_PER_SECOND)


__all__ = ["CompositeMatch", "Order", "Position", "StampedEvent", "event_time", "seconds",
           "stamp"]
