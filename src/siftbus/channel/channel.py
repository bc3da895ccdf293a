"""The event channel (CosNotifyChannelAdmin::EventChannel).

::

    EventChannelFactory ── EventChannel ─┬─ SupplierAdmin ── ProxyConsumer  <- suppliers
                                         └─ ConsumerAdmin ── ProxySupplier  -> consumers

An event a supplier hands to its ProxyConsumer passes four filter stages: the
ProxyConsumer's filters combined with its SupplierAdmin's (by the admin's
InterFilterGroupOperator), then, for every ConsumerAdmin, the admin's filters combined
with each ProxySupplier's. Consumer-side filters live in one constraint index per channel
(:mod:`siftbus.channel.consumer_filters`). Every passing ProxySupplier queues the event
with its priority, deadline and start time (:mod:`siftbus.channel.terms`); push proxies
with an in-process consumer are served by the channel's dispatcher thread, remote ones by
the remote service, pull proxies by the consumer's calls. All state of a channel is
guarded by one lock; admins and proxies reach the channel only through
:class:`~siftbus.channel.node.ChannelHooks`, which this class implements.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from siftbus.channel import qos as Q
from siftbus.channel.admin import Admin, ConsumerAdmin, FilterLookup, SupplierAdmin
from siftbus.channel.clock import timet_now
from siftbus.channel.consumer_filters import ConsumerFilters, filter_types
from siftbus.channel.dispatch import Dispatcher
from siftbus.channel.envelope import Envelope
from siftbus.channel.event_types import EventType, TypeCounts
from siftbus.channel.filter import EventTypes, Filter, FilterFactory
from siftbus.channel.journal import EventJournal
from siftbus.channel.node import Node
from siftbus.channel.proxy import (
    Proxy,
    ProxyConsumer,
    ProxySupplier,
    PullProxyConsumer,
    PushProxySupplier,
)
from siftbus.channel.queue import QueueEntry
from siftbus.channel.state import ChannelState, StoredEvent, props
from siftbus.channel.stats import ChannelStats, Counters
from siftbus.channel.store import ChannelStore
from siftbus.channel.terms import DeliveryTerms, event_persistent, schedule
from siftbus.errors import (
    AdminLimitExceeded,
    AdminNotFound,
    ImplLimit,
    ObjectNotExist,
    PropertyError,
    UnsupportedQoS,
)
from siftbus.lang.etcl import Constraint


class FactoryHooks(Protocol):
    """What a channel needs from its factory
    (:class:`~siftbus.channel.factory.EventChannelFactory`)."""

    engine: str | None
    compile_filters: bool
    dispatch: bool
    filter_factory: FilterFactory
    store: ChannelStore | None

    def channel_destroyed(self, channel: EventChannel) -> None: ...


class EventChannel:
    """A notification channel with a default supplier admin and consumer admin (id 0)."""

    def __init__(self, factory: FactoryHooks, channel_id: int, qos: Mapping[str, Any],
                 admin: Mapping[str, Any], *, state: ChannelState | None = None,
                 lookup: FilterLookup | None = None) -> None:
        """A new channel, or (``state``) the channel a snapshot describes, its filters
        found by id with ``lookup``."""
        self.factory = factory
        self.id = channel_id
        self.lock = threading.RLock()
        """Guards every object of the channel (admins, proxies, queues)."""
        self.cond = threading.Condition(self.lock)
        """Notified whenever events were queued (blocking pulls wait on it)."""
        self._qos = {**Q.DEFAULT_QOS, **qos}
        self._admin_props = {**Q.DEFAULT_ADMIN, **admin}
        self._destroyed = False
        self._consumer_admins: dict[int, ConsumerAdmin] = {}
        self._supplier_admins: dict[int, SupplierAdmin] = {}
        self._admins: dict[str, dict[int, Any]] = {"consumer": self._consumer_admins,
                                                   "supplier": self._supplier_admins}
        self._next_admin = 1
        self._next_proxy = 1
        self._journal = EventJournal(channel_id, factory.store if self.persistent else None)
        self._filters = ConsumerFilters(factory.engine, factory.compile_filters)
        self._suppliers: dict[int, ProxySupplier] = {}  # every ProxySupplier by id
        self._dispatcher = Dispatcher(f"siftbus-channel-{channel_id}", self.lock, self.cond,
                                      factory.dispatch)
        self._counters = Counters()
        self._subs = TypeCounts()
        self._offers = TypeCounts()
        self._waiters: set[Callable[[], None]] = set()
        if state is None:
            self._admins["consumer"][0] = ConsumerAdmin(self, 0, Q.AND_OP, self._admin_qos())
            self._admins["supplier"][0] = SupplierAdmin(self, 0, Q.AND_OP, self._admin_qos())
        else:
            self._restore(state, lookup or (lambda fid: None))

    def _restore(self, state: ChannelState, lookup: FilterLookup) -> None:
        for ad in state.admins:
            admin_cls = ConsumerAdmin if ad.side == "consumer" else SupplierAdmin
            a = admin_cls(self, ad.id, ad.op, dict(ad.qos))
            self._admins[a.side][a.id] = a
            a.restore_state(ad, lookup)
        self._next_admin, self._next_proxy = state.next_admin, state.next_proxy
        # the counts as saved (restoring the filters counted their types once more)
        self._subs = TypeCounts(state.subscriptions)
        self._offers = TypeCounts(state.offers)

    # -- attributes ----------------------------------------------------------------------

    @property
    def MyFactory(self) -> FactoryHooks:
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
    def destroyed(self) -> bool:
        return self._destroyed

    @property
    def persistent_ok(self) -> bool:
        """A durable store exists (Persistent QoS values are possible)."""
        return self.factory.store is not None

    @property
    def connection_reliability(self) -> int:
        return int(self._qos[Q.CONNECTION_RELIABILITY])

    def _alive(self) -> None:
        if self._destroyed:
            raise ObjectNotExist(f"channel {self.id} was destroyed")

    def _admin_qos(self) -> dict[str, Any]:
        return {k: v for k, v in self._qos.items() if k != Q.EVENT_RELIABILITY}

    # -- admins --------------------------------------------------------------------------

    def _new_admin(self, cls: type[Admin], op: str) -> Admin:
        self._alive()
        with self.lock:
            a = cls(self, self._next_admin, op, self._admin_qos())
            self._next_admin += 1
            self._admins[a.side][a.id] = a
            self.save()
        return a

    def new_for_consumers(self, op: str = Q.AND_OP) -> tuple[ConsumerAdmin, int]:
        a = self._new_admin(ConsumerAdmin, op)
        assert isinstance(a, ConsumerAdmin)
        return a, a.id

    def new_for_suppliers(self, op: str = Q.AND_OP) -> tuple[SupplierAdmin, int]:
        a = self._new_admin(SupplierAdmin, op)
        assert isinstance(a, SupplierAdmin)
        return a, a.id

    def _get_admin(self, side: str, admin_id: int) -> Admin:
        self._alive()
        a = self._admins[side].get(admin_id)
        if a is None:
            raise AdminNotFound(f"channel {self.id} has no {side} admin {admin_id}",
                                field=str(admin_id))
        return a

    def get_consumeradmin(self, admin_id: int) -> ConsumerAdmin:
        a = self._get_admin("consumer", admin_id)
        assert isinstance(a, ConsumerAdmin)
        return a

    def get_supplieradmin(self, admin_id: int) -> SupplierAdmin:
        a = self._get_admin("supplier", admin_id)
        assert isinstance(a, SupplierAdmin)
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

    def find_proxy(self, side: str, proxy_id: int) -> Proxy | None:
        """The proxy with this id on ``side`` (``consumer``: a ProxySupplier, ``supplier``:
        a ProxyConsumer) in any admin, or None."""
        if side == "consumer":
            return self._suppliers.get(proxy_id)
        for a in self._admins[side].values():
            p = a.find_proxy(proxy_id)
            if p is not None:
                return p
        return None

    # -- QoS and admin properties --------------------------------------------------------

    def get_qos(self) -> dict[str, Any]:
        self._alive()
        return dict(self._qos)

    def set_qos(self, qos: Mapping[str, Any]) -> None:
        self._alive()
        ok = Q.validate_qos(qos, "channel", persistent_ok=self.persistent_ok,
                            current=self._qos)
        if Q.CONNECTION_RELIABILITY in ok and ok[Q.CONNECTION_RELIABILITY] != \
                self._qos[Q.CONNECTION_RELIABILITY]:
            raise UnsupportedQoS([PropertyError("UNAVAILABLE_PROPERTY",
                                                Q.CONNECTION_RELIABILITY, None,
                                                "fixed when the channel is created")])
        with self.lock:
            self._qos.update(ok)
            self.save()

    def validate_qos(self, required: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
        self._alive()
        Q.validate_qos(required, "channel", persistent_ok=self.persistent_ok,
                       current=self._qos)
        return Q.qos_ranges("channel")

    def get_admin(self) -> dict[str, Any]:
        self._alive()
        return dict(self._admin_props)

    def set_admin(self, admin: Mapping[str, Any]) -> None:
        self._alive()
        ok = Q.validate_admin(admin)
        with self.lock:
            self._admin_props.update(ok)
            self.save()

    # -- lifecycle -----------------------------------------------------------------------

    def destroy(self) -> None:
        """Destroy the channel with its admins and proxies; later calls on any of them
        raise ObjectNotExist."""
        self._alive()
        with self.lock:
            for side in ("consumer", "supplier"):
                for a in list(self._admins[side].values()):
                    a.destroy_locked()
            self._destroyed = True
            self.cond.notify_all()
        self._dispatcher.stop()
        self.factory.channel_destroyed(self)

    def close(self) -> None:
        """Stop the dispatcher thread (the factory closes)."""
        self._dispatcher.stop()

    def stats(self) -> ChannelStats:
        with self.lock:
            c = self._counters
            return ChannelStats(c.accepted, c.delivered, c.filtered_out, c.discarded,
                                c.expired, c.rejected, c.queued, len(self._suppliers),
                                sum(a.proxy_count for a in self._admins["supplier"].values()))

    # -- event flow ----------------------------------------------------------------------

    def accept(self, source: ProxyConsumer, envelopes: list[Envelope]) -> None:
        """Filter and queue events from a supplier; raises ImplLimit when rejected."""
        with self.lock:
            self._alive()
            counters = self._counters
            sadmin = source.admin
            assert isinstance(sadmin, SupplierAdmin)
            plan: list[tuple[Envelope, list[ProxySupplier]]] = []
            total = 0
            for env in envelopes:
                if not sadmin.passes(source, env):
                    counters.filtered_out += 1
                    continue
                targets = self._targets(env)
                if not targets:
                    counters.filtered_out += 1
                    continue
                plan.append((env, targets))
                total += len(targets)
            limit = self._admin_props[Q.MAX_QUEUE_LENGTH]
            if limit and self._admin_props[Q.REJECT_NEW_EVENTS] and \
                    counters.queued + total > limit:
                counters.rejected += len(envelopes)
                raise ImplLimit(f"channel {self.id} queue is full ({limit} events)")
            if self._journal.store is not None:  # stored events need a wire form: all or none
                channel_rel = self._qos[Q.EVENT_RELIABILITY]
                for env, _ in plan:
                    rel = env.header_qos()[4]
                    if (rel if rel in (Q.BEST_EFFORT, Q.PERSISTENT) else channel_rel) == \
                            Q.PERSISTENT:
                        env.packed()
            counters.accepted += len(envelopes)
            self._journal.begin()
            for env, targets in plan:
                self._queue_for(env, targets, limit)
            self._journal.commit()
            self._notify_readers()

    def _queue_for(self, env: Envelope, targets: list[ProxySupplier], limit: int) -> None:
        counters = self._counters
        # Proxies with the same terms and no mapping filters share one (immutable) entry:
        # one priority/deadline computation and one sequence number per event, not one
        # per consumer.
        shared: dict[Any, QueueEntry | None] = {}
        for p in targets:
            maps = p.mapping_filters()
            terms = p.terms
            if maps is not None and (maps[0] or maps[1]):
                e = self._entry(env, terms, *maps)
            elif terms in shared:
                e = shared[terms]
                if e is None:
                    counters.expired += 1
            else:
                e = shared[terms] = self._entry(env, terms, [], [])
            if e is None:
                continue
            if not p.enqueue(e, bool(limit and counters.queued >= limit)):
                continue
            counters.queued += 1
            if e.persistent:
                self._journal.record(p.id, e)
            if isinstance(p, PushProxySupplier) and p.threaded:
                # (a push proxy without a client object is served remotely, or waits for
                # connect_*: no thread work)
                self._dispatcher.ready(p)

    def _targets(self, env: Envelope) -> list[ProxySupplier]:
        # The index says which consumer-side filters pass; only the objects those filters
        # are attached to (and proxies without filters) are looked at.
        hit_admins, hit_proxies = self._filters.hits(env.filter_view)
        out: list[ProxySupplier] = []
        for admin in self._consumer_admins.values():
            out.extend(admin.targets(admin.id in hit_admins, hit_proxies.get(admin.id, ())))
        return out

    def _entry(self, env: Envelope, terms: DeliveryTerms, prio_maps: list[Any],
               life_maps: list[Any]) -> QueueEntry | None:
        when = schedule(env, terms, prio_maps, life_maps, timet_now)
        if when is None:
            self._counters.expired += 1
            return None
        persistent = terms.persistent and event_persistent(
            env, terms, self._qos[Q.EVENT_RELIABILITY], self._journal.store is not None)
        return QueueEntry(self._journal.next_seq(), env, *when, persistent)

    def _notify_readers(self) -> None:
        self.cond.notify_all()
        for fn in list(self._waiters):
            fn()

    def add_waiter(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` (quick, thread-safe) whenever events were queued (remote long-polls
        and pushes)."""
        with self.lock:
            self._waiters.add(fn)

    def remove_waiter(self, fn: Callable[[], None]) -> None:
        with self.lock:
            self._waiters.discard(fn)

    # -- ChannelHooks: event accounting (lock held) --------------------------------------

    def push_ready(self, proxy: Any) -> None:
        self._dispatcher.ready(proxy)

    def wake(self, proxy: Any) -> None:
        if isinstance(proxy, PushProxySupplier) and proxy.threaded and proxy.queue_length:
            self._dispatcher.ready(proxy)
        self._notify_readers()  # remote consumers too (a resumed proxy, say)

    def entries_dropped(self, proxy: Any, entries: list[QueueEntry], *, expired: bool,
                        queued: bool = True) -> None:
        if expired:
            self._counters.expired += len(entries)
        else:
            self._counters.discarded += len(entries)
        if not queued:
            return
        self._counters.queued -= len(entries)
        self._journal.forget(proxy.id, entries)

    def entries_delivered(self, proxy: Any, entries: list[QueueEntry], *,
                          acked: bool) -> None:
        self._counters.delivered += len(entries)
        self._counters.queued -= len(entries)
        if acked:
            self.entries_acked(proxy, entries)

    def entries_acked(self, proxy: Any, entries: list[QueueEntry]) -> None:
        self._journal.forget(proxy.id, entries)

    def entries_returned(self, proxy: Any, entries: list[QueueEntry]) -> None:
        self._counters.queued += len(entries)
        self._counters.delivered -= len(entries)

    # -- ChannelHooks: structure (lock held) ---------------------------------------------

    def new_proxy_id(self, side: str) -> int:
        limit_name = Q.MAX_CONSUMERS if side == "consumer" else Q.MAX_SUPPLIERS
        limit = self._admin_props[limit_name]
        if limit and sum(a.proxy_count for a in self._admins[side].values()) >= limit:
            raise AdminLimitExceeded(limit_name, limit)
        pid = self._next_proxy
        self._next_proxy += 1
        return pid

    def proxy_added(self, proxy: Any) -> None:
        if isinstance(proxy, ProxySupplier):
            self._suppliers[proxy.id] = proxy

    def proxy_connected(self, proxy: Any) -> None:
        if isinstance(proxy, PullProxyConsumer) and proxy.polled:
            self._dispatcher.add_poller(proxy)
        if isinstance(proxy, PushProxySupplier) and proxy.threaded:
            self._dispatcher.start()
            self.wake(proxy)

    def proxy_removed(self, proxy: Any) -> None:
        if isinstance(proxy, ProxySupplier):
            self._suppliers.pop(proxy.id, None)
            queued, inflight = proxy.drain()
            self._counters.queued -= len(queued)
            self._journal.proxy_gone(proxy.id, queued + inflight)
        self._dispatcher.remove(proxy.id)
        self.cond.notify_all()

    def admin_destroyed(self, admin: Any) -> None:
        self._admins[admin.side].pop(admin.id, None)

    # -- ChannelHooks: filters (lock held) -----------------------------------------------

    def filter_attached(self, node: Node, f: Filter) -> None:
        if node.side == "consumer" and self._filters.attach(node, f):
            f.add_listener(self._filter_changed)
            self.types_subscribed(filter_types(f), [])

    def filter_detached(self, node: Node, f: Filter) -> None:
        if node.side == "consumer" and self._filters.detach(node, f):
            f.remove_listener(self._filter_changed)
            self.types_subscribed([], filter_types(f))

    def _filter_changed(self, f: Filter, added: list[tuple[int, Constraint, EventTypes]],
                        removed: list[int]) -> None:
        with self.lock:
            self._filters.update(f, added, removed)
        if f.destroyed:
            self.forget_filter(f)

    def forget_filter(self, f: Filter) -> None:
        """A destroyed filter is detached from every object of this channel."""
        with self.lock:
            changed = False
            for side in ("consumer", "supplier"):
                for a in self._admins[side].values():
                    for node in (a, *a.proxies()):
                        changed = node.forget_filter(f) or changed
            if changed:
                self.save()

    # -- ChannelHooks: announced event types ---------------------------------------------

    def types_subscribed(self, added: list[EventType], removed: list[EventType]) -> None:
        new, gone = self._subs.change(added, removed)
        if new or gone:
            self._notify_types("supplier", "subscription_change", new, gone)

    def types_offered(self, added: list[EventType], removed: list[EventType]) -> None:
        new, gone = self._offers.change(added, removed)
        if new or gone:
            self._notify_types("consumer", "offer_change", new, gone)

    def _notify_types(self, side: str, method: str, new: list[EventType],
                      gone: list[EventType]) -> None:
        for a in list(self._admins[side].values()):
            for p in a.proxies():
                p.notify_types(method, new, gone)

    def subscribed_types(self) -> list[EventType]:
        """The event types consumers announced (and those of consumer-side filters)."""
        with self.lock:
            return self._subs.types()

    def offered_types(self) -> list[EventType]:
        """The event types suppliers announced."""
        with self.lock:
            return self._offers.types()

    # -- state ---------------------------------------------------------------------------

    def save(self) -> None:
        """Store the channel's snapshot if it is persistent (a structural change)."""
        store = self._journal.store
        if store is not None:
            store.save_channel(self.snapshot())

    def snapshot(self) -> ChannelState:
        """The channel's state record (admins, proxies, QoS, filters by id, counts)."""
        with self.lock:
            return ChannelState(
                self.id, props(self._qos), props(self._admin_props), self._next_admin,
                self._next_proxy, tuple(a.snapshot() for side in ("consumer", "supplier")
                                        for a in self._admins[side].values()),
                self._subs.counted(), self._offers.counted())

    def restore_events(self, events: list[StoredEvent], reserved: int) -> None:
        """Queue the events that came back from the store; new sequence numbers start
        after every stored or reserved one."""
        high = 0
        with self.lock:
            for ev in events:
                high = max(high, ev.seq)
                p = self._suppliers.get(ev.proxy)
                if p is None:
                    continue
                p.restore_entry(QueueEntry(ev.seq, Envelope.from_packed(ev.body), ev.priority,
                                           ev.deadline, ev.start, True))
                self._counters.queued += 1
            self._journal.restored(high, reserved)


__all__ = ["EventChannel", "FactoryHooks"]
