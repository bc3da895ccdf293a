"""Event channels, admins and proxies (CosNotifyChannelAdmin), in process.

::

    EventChannelFactory ── EventChannel ─┬─ SupplierAdmin ── ProxyConsumer  <- suppliers
                                         └─ ConsumerAdmin ── ProxySupplier  -> consumers

An event a supplier hands to its ProxyConsumer passes four filter stages: the
ProxyConsumer's filters combined with its SupplierAdmin's (by the admin's
InterFilterGroupOperator), then, for every ConsumerAdmin, the admin's filters combined
with each ProxySupplier's. Within one object the event passes if any filter matches, or
if the object has no filters. AND_OP needs both sides, OR_OP either side (so with OR_OP
an object without filters passes everything, as the specification reads). Filters on
the consumer side are registered in one :class:`~siftbus.lang.etcl.ConstraintIndex` per
channel, so an event costs the matcher's time plus work proportional to the filters it
satisfies, not to the number of consumers.

Every passing ProxySupplier queues the event with its priority, deadline and start time
(QoS); push proxies are served by one dispatcher thread per channel, pull proxies by the
consumer's ``pull``/``try_pull`` calls. All state of a channel is guarded by one lock.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from siftbus.channel import qos as Q
from siftbus.channel.clock import timet_now
from siftbus.channel.errors import (
    AdminLimitExceeded,
    AdminNotFound,
    AlreadyConnected,
    ChannelNotFound,
    ClientTypeError,
    ConnectionAlreadyActive,
    ConnectionAlreadyInactive,
    Disconnected,
    FilterNotFound,
    ImplLimit,
    NotConnected,
    ObjectNotExist,
    ProxyNotFound,
)
from siftbus.channel.event import StructuredEvent
from siftbus.channel.filter import Filter, FilterFactory, MappingFilter
from siftbus.channel.filter_index import ConstraintIndex
from siftbus.lang.etcl import is_structured

ANY_EVENT, STRUCTURED_EVENT, SEQUENCE_EVENT = "ANY_EVENT", "STRUCTURED_EVENT", "SEQUENCE_EVENT"
CLIENT_TYPES = (ANY_EVENT, STRUCTURED_EVENT, SEQUENCE_EVENT)
ALL_NOW_UPDATES_OFF, ALL_NOW_UPDATES_ON = "ALL_NOW_UPDATES_OFF", "ALL_NOW_UPDATES_ON"
NONE_NOW_UPDATES_OFF, NONE_NOW_UPDATES_ON = "NONE_NOW_UPDATES_OFF", "NONE_NOW_UPDATES_ON"
OBTAIN_MODES = (ALL_NOW_UPDATES_OFF, ALL_NOW_UPDATES_ON, NONE_NOW_UPDATES_OFF,
                NONE_NOW_UPDATES_ON)
MAX_PUSH_FAILURES = 3
"""A push consumer that raises this many times in a row is disconnected."""
POLL_INTERVAL = 0.005
"""Seconds between two polls of a pull supplier that had nothing."""


# ---------------------------------------------------------------------------------------
# Internal event and queue entries


class Message:
    """One event inside the channel, in whichever form it arrived; converted (once) at
    the outgoing proxy: Any -> Structured is ``("", "%ANY", "")`` with the any as body;
    Structured -> Any is the StructuredEvent itself."""

    __slots__ = ("_packed", "_qos", "_structured", "_wire", "any_value", "is_any")

    def __init__(self, value: Any, is_any: bool) -> None:
        self.is_any = is_any
        self.any_value = value if is_any else None
        self._structured: StructuredEvent | None = None if is_any else value
        self._qos: tuple[Any, ...] | None = None
        self._wire: dict[str, Any] | None = None
        self._packed: bytes | None = None

    def packed(self) -> bytes:
        """The msgpack bytes of the wire form, packed once however many consumers get it."""
        if self._packed is None:
            import msgpack

            self._packed = msgpack.packb(self.to_wire(), use_bin_type=True)
        return self._packed

    def header_qos(self) -> tuple[Any, ...]:
        """(Priority, Timeout, StopTime, StartTime, EventReliability) from the variable
        header (first occurrence; None when absent), read once per event."""
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

    @property
    def structured(self) -> StructuredEvent:
        if self._structured is None:
            self._structured = StructuredEvent.from_any(self.any_value)
        return self._structured

    @property
    def as_any(self) -> Any:
        return self.any_value if self.is_any else self._structured

    @property
    def filter_view(self) -> Any:
        """What filters see: the structured event, or the any itself."""
        return self.any_value if self.is_any else self._structured

    def to_wire(self) -> dict[str, Any]:
        """The msgpack form (kept as received when the event came over the wire)."""
        if self._wire is not None:
            return self._wire
        from siftbus.channel.values import to_json_value

        if self.is_any:
            return {"any": to_json_value(self.any_value)}
        assert self._structured is not None
        return {"structured": self._structured.to_dict()}

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> Message:
        from siftbus.channel.values import from_json_value

        if "any" in data:
            m = cls(from_json_value(data["any"]), True)
        else:
            m = cls(StructuredEvent.from_dict(data["structured"]), False)
        m._wire = dict(data)
        return m


_HEADER_QOS = frozenset({Q.PRIORITY, Q.TIMEOUT, Q.STOP_TIME, Q.START_TIME,
                         Q.EVENT_RELIABILITY})


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


@dataclass(slots=True)
class Entry:
    """A queued event for one ProxySupplier."""

    seq: int
    msg: Message
    priority: int
    deadline: int | None  # TimeT, absolute
    start: int | None  # TimeT, absolute
    persistent: bool


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


# ---------------------------------------------------------------------------------------
# FilterAdmin and QoSAdmin behaviour shared by admins and proxies


class _Node:
    """Something with filters and QoS inside a channel (admin or proxy)."""

    _level = ""

    def __init__(self, channel: EventChannel, node_id: int, qos: dict[str, Any]) -> None:
        self.channel = channel
        self.id = node_id
        self._qos = dict(qos)
        self._filters: dict[int, Filter] = {}
        self._next_filter = itertools.count(1)
        self._destroyed = False

    @property
    def MyID(self) -> int:
        return self.id

    @property
    def MyChannel(self) -> EventChannel:
        return self.channel

    def _alive(self) -> None:
        if self._destroyed or self.channel._destroyed:
            raise ObjectNotExist(f"{type(self).__name__} {self.id} was destroyed")

    @property
    def destroyed(self) -> bool:
        return self._destroyed or self.channel._destroyed

    # FilterAdmin
    def add_filter(self, new_filter: Filter) -> int:
        """Attach a filter; returns its FilterID on this object."""
        self._alive()
        if not isinstance(new_filter, Filter) or isinstance(new_filter, MappingFilter):
            raise ClientTypeError("add_filter needs a Filter (not a MappingFilter)")
        new_filter._alive()
        with self.channel._lock:
            fid = next(self._next_filter)
            self._filters[fid] = new_filter
            self.channel._filter_attached(self, new_filter)
            self.channel._save()
        return fid

    def remove_filter(self, filter_id: int) -> None:
        self._alive()
        with self.channel._lock:
            f = self._filters.pop(filter_id, None)
            if f is None:
                raise FilterNotFound(f"{type(self).__name__} {self.id} has no filter "
                                     f"{filter_id}", field=str(filter_id))
            self.channel._filter_detached(self, f)
            self.channel._save()

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
        with self.channel._lock:
            for f in self._filters.values():
                self.channel._filter_detached(self, f)
            self._filters.clear()
            self.channel._save()

    # QoSAdmin
    def get_qos(self) -> dict[str, Any]:
        self._alive()
        return dict(self._qos)

    def set_qos(self, qos: Mapping[str, Any]) -> None:
        """Set QoS properties allowed at this level; raises UnsupportedQoS."""
        self._alive()
        ok = self._validate(qos)
        with self.channel._lock:
            self._qos.update(ok)
            if hasattr(self, "_fast"):
                self._fast = None
            self.channel._save()

    def validate_qos(self, required: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
        """Raise UnsupportedQoS if ``required`` cannot be met; else the settable ranges."""
        self._alive()
        self._validate(required)
        return Q.qos_ranges(self._level)

    def _validate(self, qos: Mapping[str, Any]) -> dict[str, Any]:
        return Q.validate_qos(qos, self._level, persistent_ok=self.channel._persistent_ok,
                              channel_connection=self.channel._qos[Q.CONNECTION_RELIABILITY],
                              sequence=getattr(self, "kind", SEQUENCE_EVENT) == SEQUENCE_EVENT,
                              current=self._qos)


# ---------------------------------------------------------------------------------------
# Admins


class _Admin(_Node):
    _side = ""
    # mapping filters exist on consumer admins only; None here keeps lookups uniform
    _priority_filter: MappingFilter | None = None
    _lifetime_filter: MappingFilter | None = None

    def __init__(self, channel: EventChannel, admin_id: int, op: str,
                 qos: dict[str, Any]) -> None:
        super().__init__(channel, admin_id, qos)
        if op not in (Q.AND_OP, Q.OR_OP):
            raise ValueError(f"InterFilterGroupOperator must be AND_OP or OR_OP, not {op!r}")
        self.op = op
        self._proxies: dict[int, _Proxy] = {}
        self._unkeyed: set[int] = set()  # CosEvent-style proxies: not reachable by id

    @property
    def MyOperator(self) -> str:
        return self.op

    def destroy(self) -> None:
        """Destroy the admin and all its proxies (the default admin cannot be destroyed)."""
        self._alive()
        if self.id == 0:
            raise ObjectNotExist("the default admin lives as long as its channel")
        with self.channel._lock:
            self._destroy_locked()
            self.channel._save()

    def _destroy_locked(self) -> None:
        for p in list(self._proxies.values()):
            p._destroy_locked()
        for f in self._filters.values():
            self.channel._filter_detached(self, f)
        self._filters.clear()
        self._destroyed = True
        self.channel._admins[self._side].pop(self.id, None)

    def _obtain_typed(self, classes: Mapping[str, type[_Proxy]], ctype: str) -> _Proxy:
        """A keyed proxy of the class ``classes[ctype]`` (the spec's ClientType)."""
        cls = classes.get(ctype)
        if cls is None:
            raise ClientTypeError(f"unknown client type {ctype!r}")
        return self._new_proxy(cls, ctype, True)

    def _new_proxy(self, cls: type[_Proxy], kind: str, keyed: bool) -> _Proxy:
        self._alive()
        ch = self.channel
        with ch._lock:
            limit_name = Q.MAX_CONSUMERS if self._side == "consumer" else Q.MAX_SUPPLIERS
            limit = ch._admin_props[limit_name]
            count = sum(len(a._proxies) for a in ch._admins[self._side].values())
            if limit and count >= limit:
                raise AdminLimitExceeded(limit_name, limit)
            pid = next(ch._next_proxy)
            proxy = cls(self, pid, kind, dict(self._qos))
            self._proxies[pid] = proxy
            if not keyed:
                self._unkeyed.add(pid)
            ch._proxy_added(proxy)
            ch._save()
        return proxy

    def _get_proxy(self, proxy_id: int) -> _Proxy:
        self._alive()
        p = self._proxies.get(proxy_id)
        if p is None or proxy_id in self._unkeyed:
            raise ProxyNotFound(f"admin {self.id} has no proxy {proxy_id}", field=str(proxy_id))
        return p

    def _ids(self, mode: str) -> list[int]:
        return [pid for pid, p in self._proxies.items()
                if p.mode == mode and pid not in self._unkeyed]


class ConsumerAdmin(_Admin):
    """Creates ProxySuppliers (which serve consumers); holds filters, QoS and the
    priority and lifetime mapping filters for its proxies."""

    _side = "consumer"
    _level = "consumer_admin"

    def __init__(self, channel: EventChannel, admin_id: int, op: str,
                 qos: dict[str, Any]) -> None:
        super().__init__(channel, admin_id, op, qos)
        self._priority_filter: MappingFilter | None = None
        self._lifetime_filter: MappingFilter | None = None
        self._unfiltered: set[int] = set()  # proxies without filters (pass by default)

    @property
    def priority_filter(self) -> MappingFilter | None:
        return self._priority_filter

    @priority_filter.setter
    def priority_filter(self, f: MappingFilter | None) -> None:
        self._alive()
        self._priority_filter = f
        self.channel._save()

    @property
    def lifetime_filter(self) -> MappingFilter | None:
        return self._lifetime_filter

    @lifetime_filter.setter
    def lifetime_filter(self, f: MappingFilter | None) -> None:
        self._alive()
        self._lifetime_filter = f
        self.channel._save()

    @property
    def push_suppliers(self) -> list[int]:
        return self._ids("push")

    @property
    def pull_suppliers(self) -> list[int]:
        return self._ids("pull")

    def get_proxy_supplier(self, proxy_id: int) -> ProxySupplier:
        p = self._get_proxy(proxy_id)
        assert isinstance(p, ProxySupplier)
        return p

    def obtain_notification_push_supplier(self, ctype: str) -> tuple[ProxySupplier, int]:
        """A push ProxySupplier for ANY_EVENT, STRUCTURED_EVENT or SEQUENCE_EVENT clients."""
        p = self._obtain_typed(_PUSH_SUPPLIERS, ctype)
        assert isinstance(p, ProxySupplier)
        return p, p.id

    def obtain_notification_pull_supplier(self, ctype: str) -> tuple[ProxySupplier, int]:
        p = self._obtain_typed(_PULL_SUPPLIERS, ctype)
        assert isinstance(p, ProxySupplier)
        return p, p.id

    def obtain_push_supplier(self) -> ProxyPushSupplier:
        """CosEvent style: an unkeyed Any push supplier."""
        p = self._new_proxy(ProxyPushSupplier, ANY_EVENT, False)
        assert isinstance(p, ProxyPushSupplier)
        return p

    def obtain_pull_supplier(self) -> ProxyPullSupplier:
        p = self._new_proxy(ProxyPullSupplier, ANY_EVENT, False)
        assert isinstance(p, ProxyPullSupplier)
        return p

    def subscription_change(self, added: Iterable[Any], removed: Iterable[Any]) -> None:
        """A consumer announces the event types it now wants (and no longer wants)."""
        self._alive()
        self.channel._subscription_change(_types(added), _types(removed))


class SupplierAdmin(_Admin):
    """Creates ProxyConsumers (which serve suppliers)."""

    _side = "supplier"
    _level = "supplier_admin"

    def get_proxy_consumer(self, proxy_id: int) -> ProxyConsumer:
        p = self._get_proxy(proxy_id)
        assert isinstance(p, ProxyConsumer)
        return p

    @property
    def push_consumers(self) -> list[int]:
        return self._ids("push")

    @property
    def pull_consumers(self) -> list[int]:
        return self._ids("pull")

    def obtain_notification_push_consumer(self, ctype: str) -> tuple[ProxyConsumer, int]:
        p = self._obtain_typed(_PUSH_CONSUMERS, ctype)
        assert isinstance(p, ProxyConsumer)
        return p, p.id

    def obtain_notification_pull_consumer(self, ctype: str) -> tuple[ProxyConsumer, int]:
        p = self._obtain_typed(_PULL_CONSUMERS, ctype)
        assert isinstance(p, ProxyConsumer)
        return p, p.id

    def obtain_push_consumer(self) -> ProxyPushConsumer:
        p = self._new_proxy(ProxyPushConsumer, ANY_EVENT, False)
        assert isinstance(p, ProxyPushConsumer)
        return p

    def obtain_pull_consumer(self) -> ProxyPullConsumer:
        p = self._new_proxy(ProxyPullConsumer, ANY_EVENT, False)
        assert isinstance(p, ProxyPullConsumer)
        return p

    def offer_change(self, added: Iterable[Any], removed: Iterable[Any]) -> None:
        """A supplier announces the event types it now offers (and no longer offers)."""
        self._alive()
        self.channel._offer_change(_types(added), _types(removed))


def _types(items: Iterable[Any]) -> list[tuple[str, str]]:
    out = []
    for it in items:
        if isinstance(it, Mapping):
            out.append((str(it.get("domain_name", "")), str(it.get("type_name", ""))))
        else:
            d, t = it
            out.append((str(d), str(t)))
    return out


# ---------------------------------------------------------------------------------------
# Proxies


class _Proxy(_Node):
    mode = ""  # "push" | "pull"

    def __init__(self, admin: _Admin, proxy_id: int, kind: str, qos: dict[str, Any]) -> None:
        super().__init__(admin.channel, proxy_id, qos)
        self.admin = admin
        self.kind = kind
        self.client: Any = None
        self.connected = False
        self.suspended = False
        self._updates_on = False

    @property
    def MyAdmin(self) -> _Admin:
        return self.admin

    @property
    def MyType(self) -> str:
        side = "PUSH" if self.mode == "push" else "PULL"
        return f"{side}_{self.kind.split('_')[0]}"

    def _connect(self, client: Any, need: tuple[str, ...]) -> None:
        self._alive()
        with self.channel._lock:
            if self.connected:
                raise AlreadyConnected(f"{type(self).__name__} {self.id} already has a client")
            if client is not None:
                missing = [m for m in need if not callable(getattr(client, m, None))]
                if missing:
                    raise ClientTypeError(f"{type(self).__name__} needs a client with "
                                          f"{', '.join(need)}")
            self.client = client
            self.connected = True
            self.channel._proxy_connected(self)
            self.channel._save()

    def _disconnect(self) -> None:
        self._alive()
        with self.channel._lock:
            self._destroy_locked()
            self.channel._save()

    def _destroy_locked(self) -> None:
        self.connected = False
        self.client = None
        for f in self._filters.values():
            self.channel._filter_detached(self, f)
        self._filters.clear()
        self._destroyed = True
        self.admin._proxies.pop(self.id, None)
        self.admin._unkeyed.discard(self.id)
        self.channel._proxy_removed(self)

    def suspend_connection(self) -> None:
        self._alive()
        with self.channel._lock:
            if not self.connected:
                raise NotConnected(f"{type(self).__name__} {self.id} is not connected")
            if self.suspended:
                raise ConnectionAlreadyInactive(f"proxy {self.id} is already suspended")
            self.suspended = True
            self.channel._save()

    def resume_connection(self) -> None:
        self._alive()
        with self.channel._lock:
            if not self.connected:
                raise NotConnected(f"{type(self).__name__} {self.id} is not connected")
            if not self.suspended:
                raise ConnectionAlreadyActive(f"proxy {self.id} is not suspended")
            self.suspended = False
            self.channel._wake(self)
            self.channel._save()


class ProxySupplier(_Proxy):
    """Serves one consumer: queues the events that pass its filters, with QoS."""

    _level = "proxy_supplier"

    def __init__(self, admin: _Admin, proxy_id: int, kind: str, qos: dict[str, Any]) -> None:
        super().__init__(admin, proxy_id, kind, qos)
        self._heap: list[tuple[Any, ...]] = []
        self._held: list[Entry] = []  # StartTime not reached yet
        self._inflight: list[Entry] = []  # sent to a remote puller, not acknowledged yet
        self._failures = 0
        self._last_flush = time.monotonic()
        self._priority_filter: MappingFilter | None = None
        self._lifetime_filter: MappingFilter | None = None
        self.delivered = 0
        self.discarded = 0
        self._fast: tuple[int, int, bool, bool, bool] | None = None

    @property
    def priority_filter(self) -> MappingFilter | None:
        return self._priority_filter

    @priority_filter.setter
    def priority_filter(self, f: MappingFilter | None) -> None:
        self._alive()
        self._priority_filter = f
        self.channel._save()

    @property
    def lifetime_filter(self) -> MappingFilter | None:
        return self._lifetime_filter

    @lifetime_filter.setter
    def lifetime_filter(self, f: MappingFilter | None) -> None:
        self._alive()
        self._lifetime_filter = f
        self.channel._save()

    def subscription_change(self, added: Iterable[Any], removed: Iterable[Any]) -> None:
        self._alive()
        self.channel._subscription_change(_types(added), _types(removed))

    def obtain_offered_types(self, mode: str = ALL_NOW_UPDATES_OFF) -> list[tuple[str, str]]:
        """The event types suppliers offer; with ``*_UPDATES_ON`` the connected consumer's
        ``offer_change`` is called on every later change."""
        self._alive()
        if mode not in OBTAIN_MODES:
            raise ValueError(f"unknown ObtainInfoMode {mode!r}")
        self._updates_on = mode.endswith("UPDATES_ON")
        return self.channel._offered() if mode.startswith("ALL") else []

    def validate_event_qos(self, required: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
        Q.validate_qos(required, "event", persistent_ok=self.channel._persistent_ok)
        return Q.qos_ranges("event")

    @property
    def queue_length(self) -> int:
        return len(self._heap) + len(self._held)

    def _fast_qos(self) -> tuple[int, int, bool, bool, bool]:
        """(Priority, Timeout, StopTimeSupported, StartTimeSupported, persistent
        connection), re-read only after set_qos."""
        f = self._fast
        if f is None:
            q = self._qos
            f = self._fast = (q.get(Q.PRIORITY, 0), q.get(Q.TIMEOUT, 0),
                              bool(q.get(Q.STOP_TIME_SUPPORTED, True)),
                              bool(q.get(Q.START_TIME_SUPPORTED, True)),
                              q.get(Q.CONNECTION_RELIABILITY) == Q.PERSISTENT)
        return f

    # -- queue (channel lock held) -------------------------------------------------------

    def _key(self, e: Entry) -> tuple[Any, ...]:
        order = self._qos.get(Q.ORDER_POLICY, Q.PRIORITY_ORDER)
        if order == Q.PRIORITY_ORDER:
            return (-e.priority, e.seq, e)
        if order == Q.DEADLINE_ORDER:
            return (e.deadline if e.deadline is not None else 2**63, e.seq, e)
        return (e.seq, e)

    def _push_entry(self, e: Entry) -> None:
        heapq.heappush(self._heap, self._key(e))

    def _enqueue(self, e: Entry) -> Entry | None:
        """Queue ``e``; returns the entry discarded to make room, if any."""
        limit = self._qos.get(Q.MAX_EVENTS_PER_CONSUMER, 0)
        victim = None
        if limit and self.queue_length >= limit:
            victim = self._victim(e)
            if victim is e:
                return e
            self._remove(victim)
        self._push_entry(e)
        return victim

    def _entries(self) -> list[Entry]:
        return [t[-1] for t in self._heap] + self._held

    def _victim(self, incoming: Entry) -> Entry:
        policy = self._qos.get(Q.DISCARD_POLICY, Q.FIFO_ORDER)
        cands = [*self._entries(), incoming]
        if policy == Q.LIFO_ORDER:
            return max(cands, key=lambda e: e.seq)
        if policy == Q.PRIORITY_ORDER:
            return min(cands, key=lambda e: (e.priority, -e.seq))
        if policy == Q.DEADLINE_ORDER:
            return min(cands, key=lambda e: (e.deadline if e.deadline is not None else 2**63,
                                             e.seq))
        return min(cands, key=lambda e: e.seq)

    def _remove(self, victim: Entry) -> None:
        if victim in self._held:
            self._held.remove(victim)
            return
        self._heap = [t for t in self._heap if t[-1] is not victim]
        heapq.heapify(self._heap)

    def _take(self, n: int, now: int) -> list[Entry]:
        """Up to ``n`` deliverable entries in order; drops expired ones, holds early ones."""
        out: list[Entry] = []
        if self._held:
            still = []
            for e in self._held:
                if e.start is not None and e.start > now:
                    still.append(e)
                else:
                    self._push_entry(e)
            self._held = still
        heap = self._heap
        ch = self.channel
        while heap and len(out) < n:
            e = heapq.heappop(heap)[-1]
            if e.deadline is not None and e.deadline <= now:
                ch._expired(self, e)
                continue
            if e.start is not None and e.start > now:
                self._held.append(e)
                continue
            out.append(e)
        return out

    def _deliverable(self) -> bool:
        return bool(self._heap)

    def _pull(self, n: int, block: bool, timeout: float | None) -> list[Entry]:
        self._alive()
        ch = self.channel
        deadline = None if timeout is None else time.monotonic() + timeout
        with ch._lock:
            while True:
                if not self.connected:
                    raise Disconnected(f"{type(self).__name__} {self.id} is not connected")
                got = self._take(n, timet_now())
                if got:
                    ch._delivered(self, got)
                    return got
                if not block:
                    return []
                wait = 0.05 if deadline is None else min(0.05, deadline - time.monotonic())
                if wait <= 0:
                    return []
                ch._cond.wait(wait)
                self._alive()

    # -- remote pulls with acknowledgement -----------------------------------------------

    def pull_acked(self, max_number: int, ack: int | None) -> list[Entry]:
        """For remote consumers: acknowledge everything up to ``ack``, then return the
        unacknowledged entries again followed by new ones (up to ``max_number``); the
        client drops sequence numbers it has seen, so delivery is exactly once."""
        self._alive()
        ch = self.channel
        with ch._lock:
            if not self.connected:
                raise Disconnected(f"{type(self).__name__} {self.id} is not connected")
            if ack is not None and self._inflight:
                done = [e for e in self._inflight if e.seq <= ack]
                self._inflight = [e for e in self._inflight if e.seq > ack]
                ch._acked(self, done)
            room = max_number - len(self._inflight)
            if room > 0:
                got = self._take(room, timet_now())
                if got:
                    ch._count_delivered(self, got)
                    self._inflight.extend(got)
            return list(self._inflight[:max_number])

    # -- remote push (siftbus.channel.push; channel lock held by the caller) --------------

    def _remote_take(self, n: int, now: int) -> list[Entry]:
        """Up to ``n`` new entries for a remote push consumer; they stay in flight until
        :meth:`_remote_ack` (or go back to the queue with :meth:`_remote_requeue`)."""
        got = self._take(n, now)
        if got:
            self.channel._count_delivered(self, got)
            self._inflight.extend(got)
        return got

    def _remote_ack(self, seq: int) -> int:
        """Acknowledge the in-flight entries sent up to and including the one numbered
        ``seq`` (by sending order, not by number: with OrderPolicy Priority or Deadline
        a later number can go first); returns how many."""
        inflight = self._inflight
        k = 0
        for i, e in enumerate(inflight):
            if e.seq == seq:
                k = i + 1
                break
        if not k:
            return 0
        done = inflight[:k]
        del inflight[:k]
        self.channel._acked(self, done)
        return k

    def _remote_requeue(self) -> None:
        """The remote consumer went away: what was in flight is queued again (sent again
        to the next connection, which drops the sequence numbers it has seen)."""
        back = self._inflight
        if not back:
            return
        self._inflight = []
        ch = self.channel
        for e in back:
            self._push_entry(e)
        ch._queued += len(back)
        ch._counters.delivered -= len(back)
        self.delivered -= len(back)


class _PushSupplierMixin(ProxySupplier):
    mode = "push"

    def disconnect_push_supplier(self) -> None:
        """Disconnect (the consumer side); the proxy is destroyed."""
        self._disconnect()

    def disconnect_structured_push_supplier(self) -> None:
        self._disconnect()

    def disconnect_sequence_push_supplier(self) -> None:
        self._disconnect()


class ProxyPushSupplier(_PushSupplierMixin):
    """Pushes Any events to a consumer with ``push(any)``."""

    def connect_any_push_consumer(self, consumer: Any) -> None:
        self._connect(consumer, ("push",))

    connect_push_consumer = connect_any_push_consumer


class StructuredProxyPushSupplier(_PushSupplierMixin):
    """Pushes structured events to a consumer with ``push_structured_event(event)``."""

    def connect_structured_push_consumer(self, consumer: Any) -> None:
        self._connect(consumer, ("push_structured_event",))


class SequenceProxyPushSupplier(_PushSupplierMixin):
    """Pushes batches (at most MaximumBatchSize; a partial batch after PacingInterval)
    to a consumer with ``push_structured_events(batch)``."""

    def connect_sequence_push_consumer(self, consumer: Any) -> None:
        self._connect(consumer, ("push_structured_events",))


class _PullSupplierMixin(ProxySupplier):
    mode = "pull"

    def connect_any_pull_consumer(self, consumer: Any = None) -> None:
        self._need(ANY_EVENT)
        self._connect(consumer, ())

    connect_pull_consumer = connect_any_pull_consumer

    def connect_structured_pull_consumer(self, consumer: Any = None) -> None:
        self._need(STRUCTURED_EVENT)
        self._connect(consumer, ())

    def connect_sequence_pull_consumer(self, consumer: Any = None) -> None:
        self._need(SEQUENCE_EVENT)
        self._connect(consumer, ())

    def _need(self, kind: str) -> None:
        if self.kind != kind:
            raise ClientTypeError(f"this proxy serves {self.kind} clients, not {kind}")

    def disconnect_pull_supplier(self) -> None:
        self._disconnect()

    def disconnect_structured_pull_supplier(self) -> None:
        self._disconnect()

    def disconnect_sequence_pull_supplier(self) -> None:
        self._disconnect()


class ProxyPullSupplier(_PullSupplierMixin):
    """Queues Any events for a consumer that calls ``pull``/``try_pull``."""

    def pull(self, timeout: float | None = None) -> Any:
        """Block until an event is there (``TimeoutError`` after ``timeout`` seconds)."""
        got = self._pull(1, True, timeout)
        if not got:
            raise TimeoutError("no event within the timeout")
        return got[0].msg.as_any

    def try_pull(self) -> tuple[Any, bool]:
        """``(event, True)``, or ``(None, False)`` when the queue is empty."""
        got = self._pull(1, False, None)
        return (got[0].msg.as_any, True) if got else (None, False)


class StructuredProxyPullSupplier(_PullSupplierMixin):
    """Queues structured events for a consumer that pulls."""

    def pull_structured_event(self, timeout: float | None = None) -> StructuredEvent:
        got = self._pull(1, True, timeout)
        if not got:
            raise TimeoutError("no event within the timeout")
        return got[0].msg.structured

    def try_pull_structured_event(self) -> tuple[StructuredEvent | None, bool]:
        got = self._pull(1, False, None)
        return (got[0].msg.structured, True) if got else (None, False)


class SequenceProxyPullSupplier(_PullSupplierMixin):
    """Queues structured events for a consumer that pulls batches."""

    def pull_structured_events(self, max_number: int,
                               timeout: float | None = None) -> list[StructuredEvent]:
        """Block until at least one event is there; returns up to ``max_number``."""
        got = self._pull(max(1, max_number), True, timeout)
        if not got:
            raise TimeoutError("no event within the timeout")
        return [e.msg.structured for e in got]

    def try_pull_structured_events(self, max_number: int) -> tuple[list[StructuredEvent], bool]:
        got = self._pull(max(1, max_number), False, None)
        return [e.msg.structured for e in got], bool(got)


class ProxyConsumer(_Proxy):
    """Serves one supplier: events it receives enter the channel."""

    _level = "proxy_consumer"

    def offer_change(self, added: Iterable[Any], removed: Iterable[Any]) -> None:
        self._alive()
        self.channel._offer_change(_types(added), _types(removed))

    def obtain_subscription_types(self, mode: str = ALL_NOW_UPDATES_OFF) -> list[tuple[str, str]]:
        """The event types consumers want; with ``*_UPDATES_ON`` the connected supplier's
        ``subscription_change`` is called on every later change."""
        self._alive()
        if mode not in OBTAIN_MODES:
            raise ValueError(f"unknown ObtainInfoMode {mode!r}")
        self._updates_on = mode.endswith("UPDATES_ON")
        return self.channel._subscribed() if mode.startswith("ALL") else []

    def validate_event_qos(self, required: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
        Q.validate_qos(required, "event", persistent_ok=self.channel._persistent_ok)
        return Q.qos_ranges("event")

    def _submit(self, msgs: list[Message]) -> None:
        if not self.connected or self._destroyed:
            self._alive()
            raise Disconnected(f"{type(self).__name__} {self.id} is not connected")
        self.channel._accept(self, msgs)


class _PushConsumerMixin(ProxyConsumer):
    mode = "push"

    def disconnect_push_consumer(self) -> None:
        self._disconnect()

    def disconnect_structured_push_consumer(self) -> None:
        self._disconnect()

    def disconnect_sequence_push_consumer(self) -> None:
        self._disconnect()


class ProxyPushConsumer(_PushConsumerMixin):
    """Receives Any events from a supplier calling ``push``."""

    def connect_any_push_supplier(self, supplier: Any = None) -> None:
        self._connect(supplier, ())

    connect_push_supplier = connect_any_push_supplier

    def push(self, data: Any) -> None:
        self._submit([Message(data, True)])


class StructuredProxyPushConsumer(_PushConsumerMixin):
    """Receives structured events."""

    def connect_structured_push_supplier(self, supplier: Any = None) -> None:
        self._connect(supplier, ())

    def push_structured_event(self, event: StructuredEvent) -> None:
        if not is_structured(event):
            raise ClientTypeError("push_structured_event needs a StructuredEvent")
        self._submit([Message(event, False)])


class SequenceProxyPushConsumer(_PushConsumerMixin):
    """Receives batches; each element is handled as one structured event."""

    def connect_sequence_push_supplier(self, supplier: Any = None) -> None:
        self._connect(supplier, ())

    def push_structured_events(self, events: Sequence[StructuredEvent]) -> None:
        msgs = []
        for e in events:
            if not is_structured(e):
                raise ClientTypeError("push_structured_events needs StructuredEvents")
            msgs.append(Message(e, False))
        self._submit(msgs)


class _PullConsumerMixin(ProxyConsumer):
    """The channel polls the connected pull supplier (``try_pull``-style)."""

    mode = "pull"
    _method = ""

    def disconnect_pull_consumer(self) -> None:
        self._disconnect()

    def disconnect_structured_pull_consumer(self) -> None:
        self._disconnect()

    def disconnect_sequence_pull_consumer(self) -> None:
        self._disconnect()

    #: ask the supplier once (outside the channel lock); each pull flavour defines it
    _poll: Callable[[], list[Message]]


class ProxyPullConsumer(_PullConsumerMixin):
    def connect_any_pull_supplier(self, supplier: Any) -> None:
        self._connect(supplier, ("try_pull",))

    connect_pull_supplier = connect_any_pull_supplier

    def _poll(self) -> list[Message]:
        value, has = self.client.try_pull()
        return [Message(value, True)] if has else []


class StructuredProxyPullConsumer(_PullConsumerMixin):
    def connect_structured_pull_supplier(self, supplier: Any) -> None:
        self._connect(supplier, ("try_pull_structured_event",))

    def _poll(self) -> list[Message]:
        value, has = self.client.try_pull_structured_event()
        return [Message(value, False)] if has else []


class SequenceProxyPullConsumer(_PullConsumerMixin):
    def connect_sequence_pull_supplier(self, supplier: Any) -> None:
        self._connect(supplier, ("try_pull_structured_events",))

    def _poll(self) -> list[Message]:
        batch, has = self.client.try_pull_structured_events(
            self._qos.get(Q.MAXIMUM_BATCH_SIZE, 1) or 1)
        return [Message(v, False) for v in batch] if has else []


# ---------------------------------------------------------------------------------------
# The channel


@dataclass(slots=True)
class _Counters:
    accepted: int = 0
    delivered: int = 0
    filtered_out: int = 0
    discarded: int = 0
    expired: int = 0
    rejected: int = 0


@dataclass(slots=True)
class _FilterUse:
    """Where one filter is attached in a channel (consumer side)."""

    filter: Filter
    nodes: dict[int, int] = field(default_factory=dict)  # id(node) -> attach count
    objs: dict[int, _Node] = field(default_factory=dict)


class EventChannel:
    """A notification channel with a default supplier admin and consumer admin (id 0)."""

    def __init__(self, factory: EventChannelFactory, channel_id: int, qos: dict[str, Any],
                 admin: dict[str, Any]) -> None:
        self.factory = factory
        self.id = channel_id
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._qos = {**Q.DEFAULT_QOS, **qos}
        self._admin_props = {**Q.DEFAULT_ADMIN, **admin}
        self._destroyed = False
        self._admins: dict[str, dict[int, Any]] = {"consumer": {}, "supplier": {}}
        self._next_admin = itertools.count(1)
        self._next_proxy = itertools.count(1)
        self._seq_next = 1
        self._seq_reserved = 1  # sequence numbers below this are reserved in the store
        self._index = ConstraintIndex(factory.engine, compile=factory.compile_filters)
        self._uses: dict[int, _FilterUse] = {}  # filter id -> consumer-side attachments
        self._key_filter: dict[str, int] = {}  # index key -> filter id
        self._supplier_proxies: dict[int, ProxySupplier] = {}
        self._push_ready: set[int] = set()
        self._pollers: dict[int, _PullConsumerMixin] = {}
        self._queued = 0
        self._counters = _Counters()
        self._subs: dict[tuple[str, str], int] = {}
        self._offers: dict[tuple[str, str], int] = {}
        self._dispatcher: _Dispatcher | None = None
        self._restoring = False
        self._pending: dict[tuple[int, int], tuple[int, Entry]] | None = None
        self._waiters: set[Callable[[], None]] = set()
        self._admins["consumer"][0] = ConsumerAdmin(self, 0, Q.AND_OP, self._admin_qos())
        self._admins["supplier"][0] = SupplierAdmin(self, 0, Q.AND_OP, self._admin_qos())

    # -- attributes ----------------------------------------------------------------------

    @property
    def MyFactory(self) -> EventChannelFactory:
        return self.factory

    @property
    def default_consumer_admin(self) -> ConsumerAdmin:
        return self.get_consumeradmin(0)

    @property
    def default_supplier_admin(self) -> SupplierAdmin:
        return self.get_supplieradmin(0)

    @property
    def default_filter_factory(self) -> FilterFactory:
        return self.factory.filter_factory

    @property
    def persistent(self) -> bool:
        """ConnectionReliability is Persistent: the channel's objects are stored."""
        return self._qos[Q.CONNECTION_RELIABILITY] == Q.PERSISTENT

    @property
    def _persistent_ok(self) -> bool:
        return self.factory.store is not None

    @property
    def _persistent_store(self) -> bool:
        """Events can be stored: a store and a Persistent ConnectionReliability."""
        return self.persistent and self.factory.store is not None

    def _alive(self) -> None:
        if self._destroyed:
            raise ObjectNotExist(f"channel {self.id} was destroyed")

    def _admin_qos(self) -> dict[str, Any]:
        return {k: v for k, v in self._qos.items() if k != Q.EVENT_RELIABILITY}

    # -- admins --------------------------------------------------------------------------

    def new_for_consumers(self, op: str = Q.AND_OP) -> tuple[ConsumerAdmin, int]:
        self._alive()
        with self._lock:
            a = ConsumerAdmin(self, next(self._next_admin), op, self._admin_qos())
            self._admins["consumer"][a.id] = a
            self._save()
        return a, a.id

    def new_for_suppliers(self, op: str = Q.AND_OP) -> tuple[SupplierAdmin, int]:
        self._alive()
        with self._lock:
            a = SupplierAdmin(self, next(self._next_admin), op, self._admin_qos())
            self._admins["supplier"][a.id] = a
            self._save()
        return a, a.id

    def get_consumeradmin(self, admin_id: int) -> ConsumerAdmin:
        self._alive()
        a = self._admins["consumer"].get(admin_id)
        if a is None:
            raise AdminNotFound(f"channel {self.id} has no consumer admin {admin_id}",
                                field=str(admin_id))
        return a

    def get_supplieradmin(self, admin_id: int) -> SupplierAdmin:
        self._alive()
        a = self._admins["supplier"].get(admin_id)
        if a is None:
            raise AdminNotFound(f"channel {self.id} has no supplier admin {admin_id}",
                                field=str(admin_id))
        return a

    def get_all_consumeradmins(self) -> list[int]:
        self._alive()
        return sorted(self._admins["consumer"])

    def get_all_supplieradmins(self) -> list[int]:
        self._alive()
        return sorted(self._admins["supplier"])

    def for_consumers(self) -> ConsumerAdmin:
        """CosEvent: the default consumer admin."""
        return self.default_consumer_admin

    def for_suppliers(self) -> SupplierAdmin:
        return self.default_supplier_admin

    # -- QoS and admin properties --------------------------------------------------------

    def get_qos(self) -> dict[str, Any]:
        self._alive()
        return dict(self._qos)

    def set_qos(self, qos: Mapping[str, Any]) -> None:
        self._alive()
        ok = Q.validate_qos(qos, "channel", persistent_ok=self._persistent_ok,
                            current=self._qos)
        if Q.CONNECTION_RELIABILITY in ok and ok[Q.CONNECTION_RELIABILITY] != \
                self._qos[Q.CONNECTION_RELIABILITY]:
            from siftbus.channel.errors import PropertyError, UnsupportedQoS

            raise UnsupportedQoS([PropertyError("UNAVAILABLE_PROPERTY",
                                                Q.CONNECTION_RELIABILITY, None,
                                                "fixed when the channel is created")])
        with self._lock:
            self._qos.update(ok)
            self._save()

    def validate_qos(self, required: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
        self._alive()
        Q.validate_qos(required, "channel", persistent_ok=self._persistent_ok,
                       current=self._qos)
        return Q.qos_ranges("channel")

    def get_admin(self) -> dict[str, Any]:
        self._alive()
        return dict(self._admin_props)

    def set_admin(self, admin: Mapping[str, Any]) -> None:
        self._alive()
        ok = Q.validate_admin(admin)
        with self._lock:
            self._admin_props.update(ok)
            self._save()

    # -- lifecycle -----------------------------------------------------------------------

    def destroy(self) -> None:
        """Destroy the channel with its admins and proxies; later calls on any of them
        raise ObjectNotExist."""
        self._alive()
        with self._lock:
            for side in ("consumer", "supplier"):
                for a in list(self._admins[side].values()):
                    a._destroy_locked()
            self._destroyed = True
            self._cond.notify_all()
        if self._dispatcher is not None:
            self._dispatcher.stop()
        self.factory._channel_destroyed(self)

    def stats(self) -> ChannelStats:
        with self._lock:
            c = self._counters
            return ChannelStats(c.accepted, c.delivered, c.filtered_out, c.discarded,
                                c.expired, c.rejected, self._queued,
                                len(self._supplier_proxies),
                                sum(len(a._proxies) for a in self._admins["supplier"].values()))

    # -- event flow (lock held unless said otherwise) ------------------------------------

    def _accept(self, source: ProxyConsumer, msgs: list[Message]) -> None:
        """Filter and queue events from a supplier; raises ImplLimit when rejected."""
        with self._lock:
            self._alive()
            sadmin = source.admin
            plan: list[tuple[Message, list[ProxySupplier]]] = []
            total = 0
            for m in msgs:
                if not self._passes_supplier_side(source, sadmin, m):
                    self._counters.filtered_out += 1
                    plan.append((m, []))
                    continue
                targets = self._targets(m)
                if not targets:
                    self._counters.filtered_out += 1
                plan.append((m, targets))
                total += len(targets)
            limit = self._admin_props[Q.MAX_QUEUE_LENGTH]
            if limit and self._admin_props[Q.REJECT_NEW_EVENTS] and self._queued + total > limit:
                self._counters.rejected += len(msgs)
                raise ImplLimit(f"channel {self.id} queue is full ({limit} events)")
            self._pending = pending = {}
            for m, targets in plan:
                self._counters.accepted += 1
                # Proxies with the same QoS and no mapping filters share one (immutable)
                # entry: one priority/deadline computation and one sequence number per
                # event, not one per consumer.
                shared: dict[Any, Entry | None] = {}
                for p in targets:
                    if p._priority_filter is None and p._lifetime_filter is None and \
                            p.admin._priority_filter is None and \
                            p.admin._lifetime_filter is None:
                        fq = p._fast_qos()
                        if fq in shared:
                            e = shared[fq]
                            if e is None:
                                self._counters.expired += 1
                        else:
                            e = shared[fq] = self._entry(p, m)
                    else:
                        e = self._entry(p, m)
                    if e is None:
                        continue
                    if limit and self._queued >= limit:
                        victim = p._victim(e) if p.queue_length else e
                        if victim is e:
                            self._discarded(p, e, was_queued=False)
                            continue
                        p._remove(victim)
                        self._discarded(p, victim)
                    dropped = p._enqueue(e)
                    self._queued += 1
                    if dropped is not None:
                        self._discarded(p, dropped)
                        if dropped is e:
                            continue
                    if e.persistent:
                        pending[(p.id, e.seq)] = (p.id, e)
                    if p.mode == "push" and p.client is not None:
                        # (a push proxy without a client object is served remotely by
                        # siftbus.channel.push, or waits for connect_*: no thread work)
                        self._push_ready.add(p.id)
            self._pending = None
            if pending and self.factory.store is not None:
                self.factory.store.add_events(self.id, list(pending.values()))
            self._cond.notify_all()
            for fn in list(self._waiters):
                fn()

    def _passes_supplier_side(self, proxy: ProxyConsumer, admin: _Admin, m: Message) -> bool:
        if not admin._filters and not proxy._filters:
            return True
        view = m.filter_view
        a = _match_any(admin._filters.values(), view)
        p = _match_any(proxy._filters.values(), view)
        return _combine(admin.op, a, p)

    def _targets(self, m: Message) -> list[ProxySupplier]:
        # The index says which consumer-side filters pass; only the objects those filters
        # are attached to (and proxies without filters) are looked at.
        hit_admins: set[int] = set()
        hit_proxies: dict[int, list[ProxySupplier]] = {}
        if self._uses:
            key_filter = self._key_filter
            seen: set[int] = set()
            for key in self._index.match(m.filter_view):
                fid = key_filter[key]
                if fid in seen:
                    continue
                seen.add(fid)
                for node in self._uses[fid].objs.values():
                    if isinstance(node, ProxySupplier):
                        if node.connected:
                            hit_proxies.setdefault(node.admin.id, []).append(node)
                    else:
                        hit_admins.add(node.id)
        out: list[ProxySupplier] = []
        for admin in self._admins["consumer"].values():
            if not admin._proxies:
                continue
            a_state = (admin.id in hit_admins) if admin._filters else None
            if a_state is False and admin.op == Q.AND_OP:
                continue
            if a_state is not False and admin.op == Q.OR_OP:
                out.extend(p for p in admin._proxies.values() if p.connected)
                continue
            # AND with the admin passing, or OR with the admin failing: the proxy decides.
            hits = hit_proxies.get(admin.id, [])
            if admin._unfiltered:
                chosen = {p.id: p for p in hits}
                for pid in admin._unfiltered:  # no filters: the proxy side passes all
                    p = admin._proxies[pid]
                    if p.connected:
                        chosen[pid] = p
                out.extend(chosen.values())
            else:
                out.extend(dict.fromkeys(hits))
        return out

    def _entry(self, p: ProxySupplier, m: Message) -> Entry | None:
        h_prio, h_timeout, h_stop, h_start, h_rel = m.header_qos()
        admin = p.admin
        assert isinstance(admin, ConsumerAdmin)
        q_prio, q_timeout, stop_ok, start_ok, conn_persistent = p._fast_qos()
        # Priority: mapping filter (proxy, then admin) > event header > mapping default >
        # the proxy's Priority QoS.
        prio = h_prio
        pf, apf = p._priority_filter, admin._priority_filter
        if pf is not None or apf is not None:
            pfs = [mf for mf in (pf, apf) if mf is not None and not mf.destroyed]
            for mf in pfs:
                hit, value = mf.map(m.filter_view)
                if hit:
                    prio = value
                    break
            if prio is None and pfs:
                prio = pfs[0].default_value
        if prio is None or not _is_int(prio):
            prio = q_prio
        # Lifetime: mapping filter > Timeout header > the proxy's Timeout QoS; StopTime.
        timeout = h_timeout
        lf, alf = p._lifetime_filter, admin._lifetime_filter
        if lf is not None or alf is not None:
            for lmf in (lf, alf):
                if lmf is not None and not lmf.destroyed:
                    hit, value = lmf.map(m.filter_view)
                    if hit:
                        timeout = value
                        break
        if timeout is None or not _is_int(timeout) or timeout <= 0:
            timeout = q_timeout
        deadline = h_stop if stop_ok else None
        if timeout or deadline is not None:
            now = timet_now()
            if timeout:
                t = now + int(timeout)
                deadline = t if deadline is None else min(deadline, t)
            if deadline is not None and deadline <= now:
                self._counters.expired += 1
                return None
        start = h_start if start_ok else None
        rel = h_rel if h_rel in (Q.BEST_EFFORT, Q.PERSISTENT) else \
            self._qos[Q.EVENT_RELIABILITY]
        persistent = conn_persistent and rel == Q.PERSISTENT and self._persistent_store
        return Entry(self._next_seq(), m, prio, deadline, start, persistent)

    def _next_seq(self) -> int:
        """Sequence numbers only grow, also across restarts (reserved in blocks)."""
        n = self._seq_next
        self._seq_next = n + 1
        if n >= self._seq_reserved and self.factory.store is not None and self.persistent:
            from siftbus.channel.store import SEQ_BLOCK

            self._seq_reserved = n + SEQ_BLOCK
            self.factory.store.reserve_seq(self.id, self._seq_reserved)
        return n

    def _discarded(self, p: ProxySupplier, e: Entry, was_queued: bool = True) -> None:
        self._counters.discarded += 1
        p.discarded += 1
        if was_queued:
            self._drop(p, [e])

    def _expired(self, p: ProxySupplier, e: Entry) -> None:
        self._counters.expired += 1
        self._drop(p, [e])

    def _drop(self, p: ProxySupplier, entries: list[Entry]) -> None:
        # The discarded/expired entry was counted in _queued when it was queued.
        self._queued -= len(entries)
        pending = self._pending
        stored = []
        for e in entries:
            if not e.persistent:
                continue
            if pending is not None and (p.id, e.seq) in pending:
                del pending[(p.id, e.seq)]  # queued and dropped in one push: never stored
            else:
                stored.append(e.seq)
        if stored and self.factory.store is not None:
            self.factory.store.delete_events(self.id, p.id, stored)

    def _count_delivered(self, p: ProxySupplier, entries: list[Entry]) -> None:
        self._counters.delivered += len(entries)
        p.delivered += len(entries)
        self._queued -= len(entries)

    def _delivered(self, p: ProxySupplier, entries: list[Entry]) -> None:
        self._count_delivered(p, entries)
        self._acked(p, entries)

    def _acked(self, p: ProxySupplier, entries: list[Entry]) -> None:
        persistent = [e.seq for e in entries if e.persistent]
        if persistent and self.factory.store is not None:
            self.factory.store.delete_events(self.id, p.id, persistent)

    def add_waiter(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` (quick, thread-safe) whenever events were queued (remote long-polls)."""
        with self._lock:
            self._waiters.add(fn)

    def remove_waiter(self, fn: Callable[[], None]) -> None:
        with self._lock:
            self._waiters.discard(fn)

    def _wake(self, p: _Proxy) -> None:
        if isinstance(p, ProxySupplier) and p.mode == "push" and p.client is not None and \
                p.queue_length:
            self._push_ready.add(p.id)
        self._cond.notify_all()
        for fn in list(self._waiters):  # remote consumers (resumed proxies, say)
            fn()

    # -- bookkeeping of proxies and filters ----------------------------------------------

    def _proxy_added(self, p: _Proxy) -> None:
        if isinstance(p, ProxySupplier):
            self._supplier_proxies[p.id] = p
            admin = p.admin
            assert isinstance(admin, ConsumerAdmin)
            admin._unfiltered.add(p.id)

    def _proxy_connected(self, p: _Proxy) -> None:
        if isinstance(p, _PullConsumerMixin) and p.client is not None:
            self._pollers[p.id] = p
            self._ensure_dispatcher()
        if isinstance(p, ProxySupplier) and p.mode == "push" and p.client is not None:
            self._ensure_dispatcher()
            self._wake(p)

    def _proxy_removed(self, p: _Proxy) -> None:
        if isinstance(p, ProxySupplier):
            self._supplier_proxies.pop(p.id, None)
            admin = p.admin
            assert isinstance(admin, ConsumerAdmin)
            admin._unfiltered.discard(p.id)
            self._push_ready.discard(p.id)
            dropped = p._entries() + p._inflight
            self._queued -= len(p._entries())
            p._heap, p._held, p._inflight = [], [], []
            if self.factory.store is not None and any(e.persistent for e in dropped):
                self.factory.store.delete_proxy_events(self.id, p.id)
        self._pollers.pop(p.id, None)
        self._cond.notify_all()

    def _consumer_side(self, node: _Node) -> bool:
        return isinstance(node, ConsumerAdmin | ProxySupplier)

    def _filter_attached(self, node: _Node, f: Filter) -> None:
        if isinstance(node, ProxySupplier):
            admin = node.admin
            assert isinstance(admin, ConsumerAdmin)
            admin._unfiltered.discard(node.id)
        if not self._consumer_side(node):
            return
        use = self._uses.get(f.id)
        if use is None:
            use = self._uses[f.id] = _FilterUse(f)
            for cid, c, types in f.constraints():
                self._index_add(f, cid, c, types)
            f.add_listener(self._on_filter_change)
            self._sub_types(f, +1)
        use.nodes[id(node)] = use.nodes.get(id(node), 0) + 1
        use.objs[id(node)] = node

    def _filter_detached(self, node: _Node, f: Filter) -> None:
        if isinstance(node, ProxySupplier) and len(node._filters) <= 1:
            admin = node.admin
            assert isinstance(admin, ConsumerAdmin)
            if node.id in admin._proxies:
                admin._unfiltered.add(node.id)
        if not self._consumer_side(node):
            return
        use = self._uses.get(f.id)
        if use is None:
            return
        n = use.nodes.get(id(node), 0) - 1
        if n <= 0:
            use.nodes.pop(id(node), None)
            use.objs.pop(id(node), None)
        else:
            use.nodes[id(node)] = n
        if not use.nodes:
            del self._uses[f.id]
            for cid, _, _ in f.constraints():
                self._index_remove(f"f{f.id}/{cid}")
            f.remove_listener(self._on_filter_change)
            self._sub_types(f, -1)

    def _index_add(self, f: Filter, cid: int, c: Any, types: Any) -> None:
        key = f"f{f.id}/{cid}"
        self._index.add(key, c, types)
        self._key_filter[key] = f.id

    def _index_remove(self, key: str) -> None:
        if key in self._index:
            self._index.remove(key)
            del self._key_filter[key]

    def _on_filter_change(self, f: Filter, added: list[Any], removed: list[int]) -> None:
        with self._lock:
            if f.id not in self._uses:
                return
            for cid in removed:
                self._index_remove(f"f{f.id}/{cid}")
            for cid, c, types in added:
                self._index_add(f, cid, c, types)
        if f.destroyed:
            self._forget_filter(f)

    def _forget_filter(self, f: Filter) -> None:
        """A destroyed filter is detached from every object of this channel."""
        with self._lock:
            for side in ("consumer", "supplier"):
                for a in self._admins[side].values():
                    nodes: list[_Node] = [a, *a._proxies.values()]
                    for node in nodes:
                        for fid, g in list(node._filters.items()):
                            if g is f:
                                del node._filters[fid]
                                self._filter_detached(node, f)
                        for attr in ("_priority_filter", "_lifetime_filter"):
                            if getattr(node, attr, None) is f:
                                setattr(node, attr, None)
            self._save()

    def _sub_types(self, f: Filter, sign: int) -> None:
        types = [t for _, _, ts in f.constraints() for t in ts]
        if sign > 0:
            self._subscription_change(types, [])
        else:
            self._subscription_change([], types)

    # -- subscription and offer bookkeeping ----------------------------------------------

    def _subscription_change(self, added: list[tuple[str, str]],
                             removed: list[tuple[str, str]]) -> None:
        new, gone = _count(self._subs, added, removed)
        if new or gone:
            self._notify_updates("supplier", "subscription_change", new, gone)

    def _offer_change(self, added: list[tuple[str, str]],
                      removed: list[tuple[str, str]]) -> None:
        new, gone = _count(self._offers, added, removed)
        if new or gone:
            self._notify_updates("consumer", "offer_change", new, gone)

    def _notify_updates(self, side: str, method: str, new: list[tuple[str, str]],
                        gone: list[tuple[str, str]]) -> None:
        for a in list(self._admins[side].values()):
            for p in list(a._proxies.values()):
                fn = getattr(p.client, method, None)
                if p._updates_on and callable(fn):
                    try:
                        fn(new, gone)
                    except Exception:  # a failing client must not break the channel
                        continue

    def _subscribed(self) -> list[tuple[str, str]]:
        with self._lock:
            return sorted(self._subs)

    def _offered(self) -> list[tuple[str, str]]:
        with self._lock:
            return sorted(self._offers)

    # -- dispatcher ----------------------------------------------------------------------

    def _ensure_dispatcher(self) -> None:
        if self._dispatcher is None and self.factory.dispatch:
            self._dispatcher = _Dispatcher(self)
            self._dispatcher.start()

    def _save(self) -> None:
        if self.persistent and not self._restoring and self.factory.store is not None:
            from siftbus.channel.store import snapshot

            self.factory.store.save_channel(self.id, snapshot(self))


def _count(counts: dict[tuple[str, str], int], added: list[tuple[str, str]],
           removed: list[tuple[str, str]]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    new, gone = [], []
    for t in added:
        counts[t] = counts.get(t, 0) + 1
        if counts[t] == 1:
            new.append(t)
    for t in removed:
        n = counts.get(t, 0) - 1
        if n <= 0:
            if t in counts:
                gone.append(t)
            counts.pop(t, None)
        else:
            counts[t] = n
    return new, gone


def _match_any(filters: Iterable[Filter], view: Any) -> bool | None:
    fs = [f for f in filters if not f.destroyed]
    if not fs:
        return None
    return any(f._first_match(view) is not None for f in fs)


def _combine(op: str, admin: bool | None, proxy: bool | None) -> bool:
    """InterFilterGroupOperator: None = no filters (passes everything)."""
    a = admin is not False
    p = proxy is not False
    return (a and p) if op == Q.AND_OP else (a or p)


class _Dispatcher:
    """One thread per channel: pushes to push consumers, flushes sequence batches by
    MaximumBatchSize/PacingInterval, polls pull suppliers. Calls clients outside the lock."""

    def __init__(self, channel: EventChannel) -> None:
        self.channel = channel
        self._stop = False
        self._thread = threading.Thread(target=self._run, name=f"siftbus-channel-{channel.id}",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop = True
        with self.channel._lock:
            self.channel._cond.notify_all()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        ch = self.channel
        next_poll: dict[int, float] = {}
        while not self._stop and not ch._destroyed:
            work: list[tuple[ProxySupplier, Any, list[Entry]]] = []
            polls: list[_PullConsumerMixin] = []
            with ch._lock:
                now = timet_now()
                mono = time.monotonic()
                wait = 0.05
                for pid in list(ch._push_ready):
                    p = ch._supplier_proxies.get(pid)
                    if p is None or not p.connected or p.client is None or p.suspended:
                        ch._push_ready.discard(pid)
                        continue
                    if p.kind == SEQUENCE_EVENT:
                        size = max(1, p._qos.get(Q.MAXIMUM_BATCH_SIZE, 1))
                        pacing = p._qos.get(Q.PACING_INTERVAL, 0) / 1e7
                        full = len(p._heap) >= size
                        due = mono - p._last_flush >= pacing
                        if not (full or due):
                            wait = min(wait, pacing - (mono - p._last_flush))
                            continue
                        batch = p._take(size, now)
                        p._last_flush = mono
                    else:
                        batch = p._take(64, now)
                    if batch:
                        work.append((p, p.client, batch))
                    if not p._heap:
                        if p._held:  # StartTime not reached: look again soon
                            wait = min(wait, 0.01)
                        else:
                            ch._push_ready.discard(pid)
                for pid, poller in list(ch._pollers.items()):
                    if poller.suspended or not poller.connected:
                        continue
                    if next_poll.get(pid, 0.0) <= mono:
                        polls.append(poller)
                    else:
                        wait = min(wait, next_poll[pid] - mono)
                if not work and not polls:
                    ch._cond.wait(max(0.0, wait))
                    continue
            done = [(p, batch) for p, client, batch in work
                    if self._deliver(p, client, batch)]
            if done:
                with ch._lock:  # one lock round trip for every successful delivery
                    for p, batch in done:
                        p._failures = 0
                        ch._delivered(p, batch)
            for poller in polls:
                try:
                    msgs = poller._poll()
                except Exception:
                    msgs = []
                next_poll[poller.id] = time.monotonic() + (0.0 if msgs else POLL_INTERVAL)
                if msgs:
                    try:
                        ch._accept(poller, msgs)
                    except Exception:  # rejected (ImplLimit) or destroyed meanwhile
                        continue

    def _deliver(self, p: ProxySupplier, client: Any, batch: list[Entry]) -> bool:
        """Push a batch (outside the lock); False if the consumer failed (handled)."""
        if p.kind == SEQUENCE_EVENT:
            try:
                client.push_structured_events([e.msg.structured for e in batch])
            except Exception as exc:
                self._failed(p, batch, [], [], exc)
                return False
        else:
            structured = p.kind == STRUCTURED_EVENT
            for i, e in enumerate(batch):
                try:
                    if structured:
                        client.push_structured_event(e.msg.structured)
                    else:
                        client.push(e.msg.as_any)
                except Exception as exc:
                    self._failed(p, [e], batch[:i], batch[i + 1:], exc)
                    return False
        return True

    def _failed(self, p: ProxySupplier, failed: list[Entry], done: list[Entry],
                untried: list[Entry], exc: Exception) -> None:
        """A push raised: what was pushed before counts as delivered, the failed events
        are dropped (best effort) or kept (persistent), the untried ones go back; after
        MAX_PUSH_FAILURES failures in a row (or Disconnected) the proxy is destroyed."""
        ch = self.channel
        with ch._lock:
            if done:
                ch._delivered(p, done)
            for e in failed:
                if e.persistent and not p._destroyed:
                    p._push_entry(e)
                else:
                    ch._counters.discarded += 1
                    ch._drop(p, [e])
            for e in untried:
                p._push_entry(e)
            if not p._destroyed and p.queue_length:
                ch._push_ready.add(p.id)
            p._failures += 1
            give_up = isinstance(exc, Disconnected) or p._failures >= MAX_PUSH_FAILURES
            if give_up and not p._destroyed:
                p._destroy_locked()
                ch._save()


# ---------------------------------------------------------------------------------------
# The factory


class EventChannelFactory:
    """Creates and finds channels; with ``store`` (a path or ChannelStore) persistent
    channels survive restarts: constructing the factory on the same store restores them."""

    def __init__(self, store: Any = None, *, engine: str | None = None,
                 dispatch: bool = True, compile_filters: bool = True) -> None:
        from siftbus.channel.store import ChannelStore

        self.engine = engine
        self.compile_filters = compile_filters
        self.dispatch = dispatch
        self.filter_factory = FilterFactory()
        self._channels: dict[int, EventChannel] = {}
        self._next = itertools.count(1)
        self._lock = threading.Lock()
        if store is not None and not isinstance(store, ChannelStore):
            store = ChannelStore(store)
        self.store: ChannelStore | None = store
        self.filter_factory.on_change = self._filter_changed
        self.filter_factory.on_destroy = self._filter_destroyed
        if self.store is not None:
            from siftbus.channel.store import restore

            restore(self, self.store)

    def create_channel(self, initial_qos: Mapping[str, Any] | None = None,
                       initial_admin: Mapping[str, Any] | None = None
                       ) -> tuple[EventChannel, int]:
        """A new channel; raises UnsupportedQoS / UnsupportedAdmin."""
        qos = Q.validate_qos(initial_qos or {}, "channel", persistent_ok=self.store is not None)
        admin = Q.validate_admin(initial_admin or {})
        with self._lock:
            cid = next(self._next)
            ch = EventChannel(self, cid, qos, admin)
            self._channels[cid] = ch
        ch._save()
        return ch, cid

    def get_all_channels(self) -> list[int]:
        return sorted(self._channels)

    def get_event_channel(self, channel_id: int) -> EventChannel:
        ch = self._channels.get(channel_id)
        if ch is None:
            raise ChannelNotFound(f"no channel {channel_id}", field=str(channel_id))
        return ch

    def _channel_destroyed(self, ch: EventChannel) -> None:
        with self._lock:
            self._channels.pop(ch.id, None)
        if self.store is not None:
            self.store.delete_channel(ch.id)

    def _filter_changed(self, f: Filter) -> None:
        if self.store is not None and not f.destroyed:
            self.store.save_filter(f.id, f.to_dict())

    def _filter_destroyed(self, f: Filter) -> None:
        for ch in list(self._channels.values()):
            ch._forget_filter(f)
        if self.store is not None:
            self.store.delete_filter(f.id)

    def close(self) -> None:
        """Stop the dispatcher threads and close the store (channels stay stored)."""
        for ch in list(self._channels.values()):
            if ch._dispatcher is not None:
                ch._dispatcher.stop()
                ch._dispatcher = None
        if self.store is not None:
            self.store.close()

    def __enter__(self) -> EventChannelFactory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


Callback = Callable[..., Any]

# The specification's ClientType -> proxy class, per admin side and delivery mode.
_PUSH_SUPPLIERS: dict[str, type[_Proxy]] = {
    ANY_EVENT: ProxyPushSupplier, STRUCTURED_EVENT: StructuredProxyPushSupplier,
    SEQUENCE_EVENT: SequenceProxyPushSupplier}
_PULL_SUPPLIERS: dict[str, type[_Proxy]] = {
    ANY_EVENT: ProxyPullSupplier, STRUCTURED_EVENT: StructuredProxyPullSupplier,
    SEQUENCE_EVENT: SequenceProxyPullSupplier}
_PUSH_CONSUMERS: dict[str, type[_Proxy]] = {
    ANY_EVENT: ProxyPushConsumer, STRUCTURED_EVENT: StructuredProxyPushConsumer,
    SEQUENCE_EVENT: SequenceProxyPushConsumer}
_PULL_CONSUMERS: dict[str, type[_Proxy]] = {
    ANY_EVENT: ProxyPullConsumer, STRUCTURED_EVENT: StructuredProxyPullConsumer,
    SEQUENCE_EVENT: SequenceProxyPullConsumer}


__all__ = [
    "ALL_NOW_UPDATES_OFF",
    "ALL_NOW_UPDATES_ON",
    "ANY_EVENT",
    "NONE_NOW_UPDATES_OFF",
    "NONE_NOW_UPDATES_ON",
    "SEQUENCE_EVENT",
    "STRUCTURED_EVENT",
    "ChannelStats",
    "ConsumerAdmin",
    "EventChannel",
    "EventChannelFactory",
    "ProxyConsumer",
    "ProxyPullConsumer",
    "ProxyPullSupplier",
    "ProxyPushConsumer",
    "ProxyPushSupplier",
    "ProxySupplier",
    "SequenceProxyPullConsumer",
    "SequenceProxyPullSupplier",
    "SequenceProxyPushConsumer",
    "SequenceProxyPushSupplier",
    "StructuredProxyPullConsumer",
    "StructuredProxyPullSupplier",
    "StructuredProxyPushConsumer",
    "StructuredProxyPushSupplier",
    "SupplierAdmin",
]
