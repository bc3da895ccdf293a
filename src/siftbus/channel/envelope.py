"""The envelope of one event inside a channel: the event in whichever form it arrived
(an "any" or a :class:`~siftbus.channel.event.StructuredEvent`), converted at most once
at an outgoing proxy, its per-event QoS read once, and its wire bytes packed once for
however many consumers and the store.

Translation rules (the specification's): an any reaching a structured consumer becomes
``("", "%ANY", "")`` with the any as body; a structured event reaching an any consumer is
the StructuredEvent itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgpack

from siftbus.channel import qos as Q
from siftbus.channel.event import StructuredEvent, unpack
from siftbus.channel.values import from_json_value, to_json_value
from siftbus.errors import EventError

HeaderQoS = tuple[Any, Any, int | None, int | None, Any]
"""(Priority, Timeout, StopTime, StartTime, EventReliability) of one event; None where
its variable header does not say."""

_HEADER_QOS = frozenset({Q.PRIORITY, Q.TIMEOUT, Q.STOP_TIME, Q.START_TIME,
                         Q.EVENT_RELIABILITY})


class Envelope:
    """One event inside the channel. Immutable from the outside; the conversions and the
    packed form are computed on first use and kept (an event reaches many consumers)."""

    __slots__ = ("_packed", "_qos", "_structured", "_wire", "any_value", "is_any")

    def __init__(self, value: Any, is_any: bool, *, wire: dict[str, Any] | None = None,
                 packed: bytes | None = None) -> None:
        self.is_any = is_any
        self.any_value = value if is_any else None
        self._structured: StructuredEvent | None = None if is_any else value
        self._qos: HeaderQoS | None = None
        self._wire = wire
        self._packed = packed

    @classmethod
    def of_any(cls, value: Any) -> Envelope:
        return cls(value, True)

    @classmethod
    def of_structured(cls, event: StructuredEvent) -> Envelope:
        return cls(event, False)

    # -- views ---------------------------------------------------------------------------

    @property
    def structured(self) -> StructuredEvent:
        """The event as a structured consumer gets it."""
        if self._structured is None:
            self._structured = StructuredEvent.from_any(self.any_value)
        return self._structured

    @property
    def as_any(self) -> Any:
        """The event as an any consumer gets it."""
        return self.any_value if self.is_any else self._structured

    @property
    def filter_view(self) -> Any:
        """What filters see: the structured event, or the any itself."""
        return self.any_value if self.is_any else self._structured

    def header_qos(self) -> HeaderQoS:
        """The per-event QoS of the variable header (first occurrence of each name)."""
        q = self._qos
        if q is None:
            found: dict[str, Any] = {}
            if not self.is_any and self._structured is not None:
                for name, value in self._structured.variable_header:
                    if name in _HEADER_QOS and name not in found:
                        found[name] = value
            q = self._qos = (found.get(Q.PRIORITY), found.get(Q.TIMEOUT),
                             Q.utc_time(found.get(Q.STOP_TIME)),
                             Q.utc_time(found.get(Q.START_TIME)),
                             found.get(Q.EVENT_RELIABILITY))
        return q

    # -- wire form -----------------------------------------------------------------------

    def to_wire(self) -> dict[str, Any]:
        """The msgpack map ``{"any": v}`` or ``{"structured": {...}}`` (kept as received
        when the event came over the wire)."""
        if self._wire is not None:
            return self._wire
        if self.is_any:
            return {"any": to_json_value(self.any_value)}
        assert self._structured is not None
        return {"structured": self._structured.to_dict()}

    def packed(self) -> bytes:
        """The msgpack bytes of :meth:`to_wire`, packed once however many consumers (and
        the store) get them."""
        if self._packed is None:
            try:
                self._packed = msgpack.packb(self.to_wire(), use_bin_type=True)
            except (OverflowError, TypeError, ValueError) as exc:
                # an integer beyond 64 bits, or a value msgpack has no form for
                raise EventError(f"the event has no wire form: {exc}") from None
        return self._packed

    @classmethod
    def from_wire(cls, data: Mapping[str, Any], packed: bytes | None = None) -> Envelope:
        """Decode ``{"any": v}`` or ``{"structured": {...}}`` (``packed``: the bytes it
        was read from); raises EventError."""
        if len(data) != 1:
            raise EventError("an event must be {\"any\": value} or {\"structured\": {...}}, "
                             f"not a map of {len(data)} keys", field="event")
        if "any" in data:
            return cls(from_json_value(data["any"]), True, wire=dict(data), packed=packed)
        if "structured" in data:
            return cls(StructuredEvent.from_dict(data["structured"]), False, wire=dict(data),
                       packed=packed)
        raise EventError("an event must be {\"any\": value} or {\"structured\": {...}}",
                         field="event")

    @classmethod
    def from_packed(cls, data: bytes) -> Envelope:
        """Decode the bytes :meth:`packed` wrote (the store's event bodies, push frames)."""
        obj = unpack(data)
        if not isinstance(obj, dict):
            raise EventError(f"an event must be a map, not {type(obj).__name__}",
                             field="event")
        return cls.from_wire(obj, bytes(data))


__all__ = ["Envelope", "HeaderQoS"]
