"""What admins and proxies share: filters (CosNotifyFilter::FilterAdmin) and QoS
(CosNotification::QoSAdmin), and the small interface a channel offers them.

Admins and proxies never touch their channel's state: they call the methods of
:class:`ChannelHooks` (which :class:`~siftbus.channel.channel.EventChannel` implements),
always under ``channel.lock``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Protocol

from siftbus.channel import qos as Q
from siftbus.channel.envelope import Envelope
from siftbus.channel.event_types import EventType
from siftbus.channel.filter import Filter, MappingFilter
from siftbus.channel.queue import QueueEntry
from siftbus.channel.state import Attached
from siftbus.errors import ClientTypeError, FilterNotFound, ObjectNotExist


class ChannelHooks(Protocol):
    """What a channel offers the admins and proxies inside it (call under ``lock``)."""

    id: int
    lock: threading.RLock
    cond: threading.Condition

    @property
    def destroyed(self) -> bool: ...

    @property
    def persistent_ok(self) -> bool:
        """A durable store exists (Persistent QoS values are possible)."""

    @property
    def connection_reliability(self) -> int: ...

    def save(self) -> None:
        """Store the channel's snapshot if it is persistent."""

    # structure
    def new_proxy_id(self, side: str) -> int:
        """A proxy id, or AdminLimitExceeded (MaxConsumers/MaxSuppliers)."""

    def proxy_added(self, proxy: Any) -> None: ...
    def proxy_connected(self, proxy: Any) -> None: ...
    def proxy_removed(self, proxy: Any) -> None: ...
    def admin_destroyed(self, admin: Any) -> None: ...
    def filter_attached(self, node: Node, f: Filter) -> None: ...
    def filter_detached(self, node: Node, f: Filter) -> None: ...

    # announced event types
    def types_subscribed(self, added: list[EventType], removed: list[EventType]) -> None: ...
    def types_offered(self, added: list[EventType], removed: list[EventType]) -> None: ...
    def subscribed_types(self) -> list[EventType]: ...
    def offered_types(self) -> list[EventType]: ...

    # events
    def accept(self, source: Any, envelopes: list[Envelope]) -> None:
        """Filter and queue events a supplier handed in; ImplLimit when refused."""

    def push_ready(self, proxy: Any) -> None:
        """A push proxy with an in-process client has events for the dispatcher."""

    def wake(self, proxy: Any) -> None:
        """Something changed for ``proxy`` (resumed, events back): wake its readers."""

    def entries_dropped(self, proxy: Any, entries: list[QueueEntry], *, expired: bool,
                        queued: bool = True) -> None:
        """Entries expired (or were discarded); ``queued``: they were in the queue."""

    def entries_delivered(self, proxy: Any, entries: list[QueueEntry], *,
                          acked: bool) -> None:
        """Entries left the queue for the consumer; ``acked``: they need no redelivery."""

    def entries_acked(self, proxy: Any, entries: list[QueueEntry]) -> None:
        """Delivered entries were acknowledged (persistent ones leave the store)."""

    def entries_returned(self, proxy: Any, entries: list[QueueEntry]) -> None:
        """Delivered, unacknowledged entries went back into the queue."""


class Node:
    """An admin or a proxy: something with filters and QoS inside a channel."""

    level: ClassVar[str] = ""
    """The QoS level (:mod:`siftbus.channel.qos`)."""
    side: ClassVar[str] = ""
    """``consumer`` (consumer admins and proxy suppliers) or ``supplier``."""

    def __init__(self, channel: ChannelHooks, node_id: int, qos: Mapping[str, Any]) -> None:
        self.channel = channel
        self.id = node_id
        self._qos = dict(qos)
        self._filters: dict[int, Filter] = {}
        self._next_filter = 1
        self._destroyed = False

    @property
    def MyID(self) -> int:
        return self.id

    @property
    def MyChannel(self) -> ChannelHooks:
        return self.channel

    @property
    def destroyed(self) -> bool:
        return self._destroyed or self.channel.destroyed

    @property
    def sequence(self) -> bool:
        """MaximumBatchSize and PacingInterval can be set here (admins, sequence proxies)."""
        return True

    def _alive(self) -> None:
        if self.destroyed:
            raise ObjectNotExist(f"{type(self).__name__} {self.id} was destroyed")

    # -- FilterAdmin ---------------------------------------------------------------------

    def add_filter(self, new_filter: Filter) -> int:
        """Attach a filter; returns its FilterID on this object."""
        self._alive()
        if not isinstance(new_filter, Filter) or isinstance(new_filter, MappingFilter):
            raise ClientTypeError("add_filter needs a Filter (not a MappingFilter)")
        if new_filter.destroyed:
            raise ObjectNotExist(f"filter {new_filter.id} was destroyed")
        with self.channel.lock:
            fid = self._next_filter
            self._next_filter += 1
            self._attach(fid, new_filter)
            self.channel.save()
        return fid

    def _attach(self, fid: int, f: Filter) -> None:
        self._filters[fid] = f
        self.channel.filter_attached(self, f)
        self._filters_changed()

    def remove_filter(self, filter_id: int) -> None:
        self._alive()
        with self.channel.lock:
            f = self._filters.pop(filter_id, None)
            if f is None:
                raise FilterNotFound(f"{type(self).__name__} {self.id} has no filter "
                                     f"{filter_id}", field=str(filter_id))
            self.channel.filter_detached(self, f)
            self._filters_changed()
            self.channel.save()

    def get_filter(self, filter_id: int) -> Filter:
        self._alive()
        try:
            return self._filters[filter_id]
        except KeyError:
            raise FilterNotFound(f"{type(self).__name__} {self.id} has no filter {filter_id}",
                                 field=str(filter_id)) from None

    def get_all_filters(self) -> list[int]:
        self._alive()
        return list(self._filters)

    def remove_all_filters(self) -> None:
        self._alive()
        with self.channel.lock:
            self._detach_all()
            self.channel.save()

    def _detach_all(self) -> None:
        filters = list(self._filters.values())
        self._filters.clear()
        for f in filters:
            self.channel.filter_detached(self, f)
        self._filters_changed()

    @property
    def has_filters(self) -> bool:
        return bool(self._filters)

    def attached_filters(self) -> list[Filter]:
        """The filter objects attached here (live ones)."""
        return [f for f in self._filters.values() if not f.destroyed]

    def forget_filter(self, f: Filter) -> bool:
        """A destroyed filter goes from this object (attachment and mapping uses);
        returns whether it was used here."""
        used = False
        for fid, g in list(self._filters.items()):
            if g is f:
                del self._filters[fid]
                self.channel.filter_detached(self, f)
                used = True
        if used:
            self._filters_changed()
        return self._forget_mapping_filter(f) or used

    def _forget_mapping_filter(self, f: Filter) -> bool:
        return False

    def _filters_changed(self) -> None:
        """Called after filters were attached or detached (lock held)."""

    def _attached_state(self) -> Attached:
        return tuple((k, f.id) for k, f in self._filters.items())

    def _restore_filters(self, attached: Attached, next_filter: int,
                         lookup: Callable[[int | None], Filter | None]) -> None:
        for k, fid in attached:
            f = lookup(fid)
            if f is not None:
                self._attach(k, f)
        self._next_filter = next_filter

    # -- QoSAdmin ------------------------------------------------------------------------

    def get_qos(self) -> dict[str, Any]:
        self._alive()
        return dict(self._qos)

    def set_qos(self, qos: Mapping[str, Any]) -> None:
        """Set QoS properties allowed at this level; raises UnsupportedQoS."""
        self._alive()
        ok = self._validate(qos)
        with self.channel.lock:
            self._qos.update(ok)
            self._qos_changed()
            self.channel.save()

    def _qos_changed(self) -> None:
        """Called after set_qos (lock held)."""

    def validate_qos(self, required: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
        """Raise UnsupportedQoS if ``required`` cannot be met; else the settable ranges."""
        self._alive()
        self._validate(required)
        return Q.qos_ranges(self.level)

    def _validate(self, qos: Mapping[str, Any]) -> dict[str, Any]:
        return Q.validate_qos(qos, self.level, persistent_ok=self.channel.persistent_ok,
                              channel_connection=self.channel.connection_reliability,
                              sequence=self.sequence, current=self._qos)


class MappingFilterHolder(Node):
    """A node with priority and lifetime mapping filters (consumer admins and proxy
    suppliers): the filter whose first matching constraint gives an event's priority
    (or lifetime) on its way to the consumers below."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._priority_filter: MappingFilter | None = None
        self._lifetime_filter: MappingFilter | None = None
        self._has_maps = False  # read once per event and proxy: kept, not computed

    @property
    def priority_filter(self) -> MappingFilter | None:
        return self._priority_filter

    @priority_filter.setter
    def priority_filter(self, f: MappingFilter | None) -> None:
        self._alive()
        self._set_maps(f, self._lifetime_filter)
        self.channel.save()

    @property
    def lifetime_filter(self) -> MappingFilter | None:
        return self._lifetime_filter

    @lifetime_filter.setter
    def lifetime_filter(self, f: MappingFilter | None) -> None:
        self._alive()
        self._set_maps(self._priority_filter, f)
        self.channel.save()

    @property
    def has_mapping_filters(self) -> bool:
        """A priority or lifetime mapping filter is set here."""
        return self._has_maps

    def _set_maps(self, priority: Filter | None, lifetime: Filter | None) -> None:
        self._priority_filter = priority if isinstance(priority, MappingFilter) else None
        self._lifetime_filter = lifetime if isinstance(lifetime, MappingFilter) else None
        self._has_maps = self._priority_filter is not None or self._lifetime_filter is not None

    def _forget_mapping_filter(self, f: Filter) -> bool:
        used = f is self._priority_filter or f is self._lifetime_filter
        if used:
            self._set_maps(None if self._priority_filter is f else self._priority_filter,
                           None if self._lifetime_filter is f else self._lifetime_filter)
        return used

    def _mapping_ids(self) -> tuple[int | None, int | None]:
        pf, lf = self._priority_filter, self._lifetime_filter
        return None if pf is None else pf.id, None if lf is None else lf.id


__all__ = ["ChannelHooks", "MappingFilterHolder", "Node"]
