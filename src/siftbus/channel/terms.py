"""What one event becomes for one consumer: its priority, deadline and start time, from
the event's variable header, the consumer's mapping filters and its QoS.

Priority: a mapping filter's match (the proxy's filter, then its admin's) > the event's
``Priority`` header > the mapping filters' default value > the proxy's Priority QoS.
Lifetime: a mapping filter's match > the ``Timeout`` header > the proxy's Timeout QoS;
the deadline is the earlier of now + lifetime and the event's StopTime (when the proxy
supports StopTime). StartTime holds the event back (when the proxy supports it).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from siftbus.channel import qos as Q
from siftbus.channel.envelope import Envelope


class ValueMap(Protocol):
    """A mapping filter as terms use it (:class:`~siftbus.channel.filter.MappingFilter`)."""

    @property
    def default_value(self) -> Any: ...

    def map(self, event: Any) -> tuple[bool, Any]: ...


@dataclass(frozen=True, slots=True, eq=False, weakref_slot=True)
class DeliveryTerms:
    """The QoS of one ProxySupplier that shapes each queued event; proxies with equal
    terms and no mapping filters share one queue entry per event.

    Made only by :meth:`from_qos`, which hands out one object per distinct value, so
    equal terms are the same object and compare (and hash) by identity: the push path
    looks them up once per consumer and event."""

    priority: int = Q.DEFAULT_PRIORITY
    timeout: int = 0
    stop_time_supported: bool = True
    start_time_supported: bool = True
    persistent: bool = False
    """ConnectionReliability Persistent."""

    @classmethod
    def from_qos(cls, qos: Mapping[str, Any]) -> DeliveryTerms:
        key = (qos.get(Q.PRIORITY, Q.DEFAULT_PRIORITY), qos.get(Q.TIMEOUT, 0),
               bool(qos.get(Q.STOP_TIME_SUPPORTED, True)),
               bool(qos.get(Q.START_TIME_SUPPORTED, True)),
               qos.get(Q.CONNECTION_RELIABILITY) == Q.PERSISTENT)
        terms = _INTERNED.get(key)
        if terms is None:
            with _INTERN_LOCK:
                terms = _INTERNED.setdefault(key, cls(*key))
        return terms


_INTERNED: weakref.WeakValueDictionary[tuple[Any, ...], DeliveryTerms] = \
    weakref.WeakValueDictionary()
"""The DeliveryTerms some proxy uses, by value (they go with their last proxy)."""
_INTERN_LOCK = threading.Lock()


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def schedule(env: Envelope, terms: DeliveryTerms, priority_maps: Sequence[ValueMap],
             lifetime_maps: Sequence[ValueMap], now: Callable[[], int]
             ) -> tuple[int, int | None, int | None] | None:
    """``(priority, deadline, start)`` of ``env`` for a consumer with ``terms`` and these
    mapping filters (proxy's first, destroyed ones left out); None when the event has
    already expired. ``now`` is called only when a deadline must be computed."""
    h_prio, h_timeout, h_stop, h_start, _ = env.header_qos()
    prio = h_prio
    if priority_maps:
        for mf in priority_maps:
            hit, value = mf.map(env.filter_view)
            if hit:
                prio = value
                break
        if prio is None:
            prio = priority_maps[0].default_value
    if prio is None or not _is_int(prio):
        prio = terms.priority
    timeout = h_timeout
    for mf in lifetime_maps:
        hit, value = mf.map(env.filter_view)
        if hit:
            timeout = value
            break
    if timeout is None or not _is_int(timeout) or timeout <= 0:
        timeout = terms.timeout
    deadline = h_stop if terms.stop_time_supported else None
    if timeout or deadline is not None:
        t_now = now()
        if timeout:
            t = t_now + int(timeout)
            deadline = t if deadline is None else min(deadline, t)
        if deadline is not None and deadline <= t_now:
            return None
    start = h_start if terms.start_time_supported else None
    return prio, deadline, start


def event_persistent(env: Envelope, terms: DeliveryTerms, channel_reliability: int,
                     can_store: bool) -> bool:
    """Whether the event is stored until acknowledged for this consumer: the event's
    EventReliability (its header, else the channel's) and the consumer's
    ConnectionReliability are Persistent, and the channel has a store."""
    if not (terms.persistent and can_store):
        return False
    rel = env.header_qos()[4]
    if rel not in (Q.BEST_EFFORT, Q.PERSISTENT):
        rel = channel_reliability
    return rel == Q.PERSISTENT


__all__ = ["DeliveryTerms", "ValueMap", "event_persistent", "schedule"]
