"""The ProxySupplier: it serves one consumer, queues the events that pass its filters
(with its QoS: priority, lifetime, order, bound and discard policy) and keeps the
in-flight window of events sent to a remote consumer and not yet acknowledged.

Every method that touches the queue runs under the channel's lock (the public ones take
it; those documented "lock held" expect the caller to hold it).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from siftbus.channel import qos as Q
from siftbus.channel.clock import timet_now
from siftbus.channel.event_types import EventType, type_list
from siftbus.channel.filter import Filter, MappingFilter
from siftbus.channel.node import MappingFilterHolder
from siftbus.channel.proxy.base import ALL_NOW_UPDATES_OFF, AdminHooks, Proxy
from siftbus.channel.queue import EventQueue, QueueEntry
from siftbus.channel.state import ProxyState
from siftbus.channel.terms import DeliveryTerms
from siftbus.errors import Disconnected


def _queue_settings(qos: Mapping[str, Any]) -> tuple[int, int, int]:
    return (qos.get(Q.ORDER_POLICY, Q.PRIORITY_ORDER), qos.get(Q.DISCARD_POLICY, Q.FIFO_ORDER),
            qos.get(Q.MAX_EVENTS_PER_CONSUMER, 0))


class ProxySupplier(MappingFilterHolder, Proxy):
    """Serves one consumer: queues the events that pass its filters, with QoS."""

    level = "proxy_supplier"
    side = "consumer"

    def __init__(self, admin: AdminHooks, proxy_id: int, kind: str, qos: Mapping[str, Any],
                 *, keyed: bool = True) -> None:
        super().__init__(admin, proxy_id, kind, qos, keyed=keyed)
        self._queue = EventQueue(*_queue_settings(self._qos))
        self._terms = DeliveryTerms.from_qos(self._qos)
        self._inflight: list[QueueEntry] = []  # sent, not acknowledged yet
        self._restored_upto = 0  # entries up to this number came back from the store
        self.delivered = 0
        """Events handed to the consumer."""
        self.discarded = 0
        """Events this proxy's DiscardPolicy gave up."""

    # -- mapping filters -----------------------------------------------------------------

    def mapping_filters(self) -> tuple[list[MappingFilter], list[MappingFilter]] | None:
        """The live priority and lifetime mapping filters that apply (this proxy's,
        then its admin's); None when there are none at all (the common case)."""
        a = self.admin
        if not self._has_maps and not a.has_mapping_filters:
            return None
        prio = [f for f in (self._priority_filter, a.priority_filter)
                if f is not None and not f.destroyed]
        life = [f for f in (self._lifetime_filter, a.lifetime_filter)
                if f is not None and not f.destroyed]
        return prio, life

    def _restore_mapping(self, state: ProxyState,
                         lookup: Callable[[int | None], Filter | None]) -> None:
        self._set_maps(lookup(state.priority_filter), lookup(state.lifetime_filter))
        self.delivered = state.delivered

    # -- the specification's operations --------------------------------------------------

    def subscription_change(self, added: Iterable[Any], removed: Iterable[Any]) -> None:
        self._alive()
        with self.channel.lock:
            self.channel.types_subscribed(type_list(added), type_list(removed))

    def obtain_offered_types(self, mode: str = ALL_NOW_UPDATES_OFF) -> list[EventType]:
        """The event types suppliers offer; with ``*_UPDATES_ON`` the connected consumer's
        ``offer_change`` is called on every later change."""
        return self._obtain_types(mode, self.channel.offered_types)

    def validate_event_qos(self, required: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
        Q.validate_qos(required, "event", persistent_ok=self.channel.persistent_ok)
        return Q.qos_ranges("event")

    # -- state the channel reads ---------------------------------------------------------

    @property
    def queue_length(self) -> int:
        return len(self._queue)

    @property
    def in_flight(self) -> int:
        """Events sent to a remote consumer and not acknowledged yet."""
        return len(self._inflight)

    @property
    def ready(self) -> int:
        """Queued events not held back by a StartTime."""
        return self._queue.ready

    @property
    def held(self) -> int:
        """Queued events waiting for their StartTime."""
        return self._queue.held

    @property
    def terms(self) -> DeliveryTerms:
        return self._terms

    @property
    def delivered_count(self) -> int:
        return self.delivered

    def batch_policy(self) -> tuple[int, float]:
        """(MaximumBatchSize, PacingInterval in seconds) of a sequence proxy."""
        return (max(1, self._qos.get(Q.MAXIMUM_BATCH_SIZE, 1)),
                self._qos.get(Q.PACING_INTERVAL, 0) / 1e7)

    def _qos_changed(self) -> None:
        self._terms = DeliveryTerms.from_qos(self._qos)
        self._queue.configure(*_queue_settings(self._qos))

    def _filters_changed(self) -> None:
        self.admin.proxy_filters_changed(self)

    # -- the queue (lock held) -----------------------------------------------------------

    def enqueue(self, e: QueueEntry, channel_full: bool) -> bool:
        """Queue ``e``; ``channel_full``: the channel's MaxQueueLength is reached, so this
        proxy's DiscardPolicy first gives one entry up. Returns whether ``e`` was queued
        (the entries given up are reported to the channel)."""
        q = self._queue
        if channel_full:
            victim = q.victim(e) if len(q) else e
            if victim is e:
                self._discard(e, queued=False)
                return False
            q.remove(victim)
            self._discard(victim, queued=True)
        dropped = q.offer(e)
        if dropped is e:
            self._discard(e, queued=False)
            return False
        if dropped is not None:
            self._discard(dropped, queued=True)
        return True

    def _discard(self, e: QueueEntry, *, queued: bool) -> None:
        self.discarded += 1
        self.channel.entries_dropped(self, [e], expired=False, queued=queued)

    def requeue(self, entries: Iterable[QueueEntry]) -> None:
        """Entries taken out go back into the queue (no bound applies)."""
        for e in entries:
            self._queue.put(e)

    def restore_entry(self, e: QueueEntry) -> None:
        """An entry that came back from the store (before any client calls)."""
        self._queue.put(e)
        self._restored_upto = max(self._restored_upto, e.seq)

    def take(self, n: int, now: int) -> list[QueueEntry]:
        """Up to ``n`` deliverable entries in order (the expired ones on the way are
        dropped); they still count as queued until :meth:`delivered_entries`."""
        got, expired = self._queue.take(n, now)
        if expired:
            self.channel.entries_dropped(self, expired, expired=True)
        return got

    def delivered_entries(self, entries: list[QueueEntry], *, acked: bool = True) -> None:
        """Taken entries reached the consumer (``acked``: no redelivery needed)."""
        self.delivered += len(entries)
        self.channel.entries_delivered(self, entries, acked=acked)

    def drain(self) -> tuple[list[QueueEntry], list[QueueEntry]]:
        """Empty the queue and the in-flight window (the proxy goes): (queued, in flight)."""
        queued = self._queue.clear()
        inflight, self._inflight = self._inflight, []
        return queued, inflight

    # -- pulls by an in-process consumer -------------------------------------------------

    def _pull(self, n: int, block: bool, timeout: float | None) -> list[QueueEntry]:
        self._alive()
        ch = self.channel
        deadline = None if timeout is None else time.monotonic() + timeout
        with ch.lock:
            while True:
                if not self.connected:
                    raise Disconnected(f"{type(self).__name__} {self.id} is not connected")
                got = self.take(n, timet_now())
                if got:
                    self.delivered_entries(got)
                    return got
                if not block:
                    return []
                wait = 0.05 if deadline is None else min(0.05, deadline - time.monotonic())
                if wait <= 0:
                    return []
                ch.cond.wait(wait)
                self._alive()

    # -- remote pulls with acknowledgement -----------------------------------------------

    def pull_acked(self, max_number: int, ack: int | None) -> list[QueueEntry]:
        """For remote consumers: acknowledge everything up to ``ack``, then return the
        unacknowledged entries again followed by new ones (up to ``max_number``); the
        client drops sequence numbers it has seen, so delivery is exactly once.

        After a restart the window sent before it is unknown; its events are back in the
        queue, and ``ack`` acknowledges those numbered up to it too, so that only the
        unacknowledged ones are sent again."""
        self._alive()
        with self.channel.lock:
            if not self.connected:
                raise Disconnected(f"{type(self).__name__} {self.id} is not connected")
            if ack is not None:
                self._ack_upto(ack)
            room = max_number - len(self._inflight)
            if room > 0:
                got = self.take(room, timet_now())
                if got:
                    self.delivered_entries(got, acked=False)
                    self._inflight.extend(got)
            return list(self._inflight[:max_number])

    def _ack_upto(self, ack: int) -> None:
        if self._inflight:
            done = [e for e in self._inflight if e.seq <= ack]
            self._inflight = [e for e in self._inflight if e.seq > ack]
            if done:
                self.channel.entries_acked(self, done)
        if self._restored_upto:
            gone = self._queue.remove_upto(min(ack, self._restored_upto))
            if gone:  # delivered before the restart, acknowledged now
                self.delivered_entries(gone)
            if ack >= self._restored_upto:
                self._restored_upto = 0

    # -- remote push (siftbus.channel.remote; lock held) ---------------------------------

    def take_remote(self, n: int, now: int) -> list[QueueEntry]:
        """Up to ``n`` new entries for a remote push consumer; they stay in flight until
        :meth:`ack_remote` (or go back to the queue with :meth:`return_in_flight`)."""
        got = self.take(n, now)
        if got:
            self.delivered_entries(got, acked=False)
            self._inflight.extend(got)
        return got

    def ack_remote(self, seq: int) -> int:
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
        self.channel.entries_acked(self, done)
        return k

    def return_in_flight(self) -> None:
        """The remote consumer went away: what was in flight is queued again (sent again
        to the next connection, which drops the sequence numbers it has seen)."""
        back = self._inflight
        if not back:
            return
        self._inflight = []
        self.requeue(back)
        self.delivered -= len(back)
        self.channel.entries_returned(self, back)


__all__ = ["ProxySupplier"]
