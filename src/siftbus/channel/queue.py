"""The queue of one consumer (ProxySupplier): delivery order, a bound with a discard
policy, StartTime holds and StopTime/Timeout expiry. No I/O and no locking: the
proxy that owns a queue calls it under its channel's lock.

Order (OrderPolicy): Any/Fifo = arrival (sequence number), Priority = highest first (then
arrival), Deadline = earliest expiry first (events without one last). The victim on a full
queue (DiscardPolicy): Any/Fifo the oldest, Lifo the newest, Priority the lowest priority
(the newest of those), Deadline the soonest to expire.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any, NamedTuple

from siftbus.channel import qos as Q
from siftbus.channel.envelope import Envelope

_NEVER = 2**63
"""A deadline later than any TimeT: entries without a deadline sort last."""


class QueueEntry(NamedTuple):
    """An event queued for one consumer, with what its QoS made of it. Proxies with the
    same QoS share one entry (one sequence number and one computation per event).

    Immutable; a NamedTuple rather than a frozen dataclass because one is built per
    event (and QoS group) on the push path, where a frozen dataclass costs three times
    as much to build. Entries are compared by identity (sequence numbers are unique)."""

    seq: int
    """The channel's sequence number of this event (only grows, also across restarts)."""
    envelope: Envelope
    priority: int
    deadline: int | None
    """Absolute TimeT after which the entry is dropped (Timeout/StopTime), or None."""
    start: int | None
    """Absolute TimeT before which the entry is held back (StartTime), or None."""
    persistent: bool
    """Stored until acknowledged (EventReliability and ConnectionReliability Persistent)."""


def _key_function(order: int) -> Callable[[QueueEntry], tuple[Any, ...]]:
    # The entry is the last element: keys never compare entries (sequence numbers are
    # unique within one queue).
    if order == Q.PRIORITY_ORDER:
        return lambda e: (-e.priority, e.seq, e)
    if order == Q.DEADLINE_ORDER:
        return lambda e: (e.deadline if e.deadline is not None else _NEVER, e.seq, e)
    return lambda e: (e.seq, e)


class EventQueue:
    """Entries waiting for one consumer: a heap in delivery order plus the entries held
    until their StartTime."""

    __slots__ = ("_discard", "_heap", "_held", "_key", "_limit", "_order")

    def __init__(self, order: int = Q.PRIORITY_ORDER, discard: int = Q.FIFO_ORDER,
                 limit: int = 0) -> None:
        self._heap: list[tuple[Any, ...]] = []
        self._held: list[QueueEntry] = []
        self._order = order
        self._key = _key_function(order)
        self._discard = discard
        self._limit = limit

    def configure(self, order: int, discard: int, limit: int) -> None:
        """New OrderPolicy, DiscardPolicy and MaxEventsPerConsumer (0 = no bound); the
        entries already queued are put in the new order."""
        self._discard = discard
        self._limit = limit
        if order != self._order:
            self._order = order
            self._key = _key_function(order)
            self._heap = [self._key(t[-1]) for t in self._heap]
            heapq.heapify(self._heap)

    def __len__(self) -> int:
        return len(self._heap) + len(self._held)

    @property
    def ready(self) -> int:
        """Entries not held back by a StartTime (some may have expired meanwhile)."""
        return len(self._heap)

    @property
    def held(self) -> int:
        """Entries waiting for their StartTime."""
        return len(self._held)

    def entries(self) -> list[QueueEntry]:
        """Every queued entry (in no particular order)."""
        return [t[-1] for t in self._heap] + self._held

    def put(self, e: QueueEntry) -> None:
        """Queue ``e`` without looking at the bound (an entry coming back)."""
        heapq.heappush(self._heap, self._key(e))

    def offer(self, e: QueueEntry) -> QueueEntry | None:
        """Queue ``e`` within the bound; returns the entry discarded to make room (which
        is ``e`` itself when the policy refuses the newcomer), or None."""
        victim = None
        if self._limit and len(self) >= self._limit:
            victim = self.victim(e)
            if victim is e:
                return e
            self.remove(victim)
        heapq.heappush(self._heap, self._key(e))
        return victim

    def victim(self, incoming: QueueEntry) -> QueueEntry:
        """Which of the queued entries and ``incoming`` the DiscardPolicy gives up."""
        policy = self._discard
        cands = [*self.entries(), incoming]
        if policy == Q.LIFO_ORDER:
            return max(cands, key=lambda e: e.seq)
        if policy == Q.PRIORITY_ORDER:
            return min(cands, key=lambda e: (e.priority, -e.seq))
        if policy == Q.DEADLINE_ORDER:
            return min(cands, key=lambda e: (e.deadline if e.deadline is not None else _NEVER,
                                             e.seq))
        return min(cands, key=lambda e: e.seq)

    def remove(self, e: QueueEntry) -> None:
        if e in self._held:
            self._held.remove(e)
            return
        self._heap = [t for t in self._heap if t[-1] is not e]
        heapq.heapify(self._heap)

    def remove_upto(self, seq: int) -> list[QueueEntry]:
        """Take out every entry numbered ``seq`` or lower; returns them."""
        gone = [e for e in self.entries() if e.seq <= seq]
        if gone:
            self._held = [e for e in self._held if e.seq > seq]
            self._heap = [t for t in self._heap if t[-1].seq > seq]
            heapq.heapify(self._heap)
        return gone

    def take(self, n: int, now: int) -> tuple[list[QueueEntry], list[QueueEntry]]:
        """Up to ``n`` deliverable entries in order, and the entries found expired on the
        way (dropped); entries whose StartTime is after ``now`` are held back."""
        if self._held:
            still = []
            for e in self._held:
                if e.start is not None and e.start > now:
                    still.append(e)
                else:
                    heapq.heappush(self._heap, self._key(e))
            self._held = still
        out: list[QueueEntry] = []
        expired: list[QueueEntry] = []
        heap = self._heap
        while heap and len(out) < n:
            e = heapq.heappop(heap)[-1]
            if e.deadline is not None and e.deadline <= now:
                expired.append(e)
                continue
            if e.start is not None and e.start > now:
                self._held.append(e)
                continue
            out.append(e)
        return out, expired

    def clear(self) -> list[QueueEntry]:
        """Empty the queue; returns what it held."""
        gone = self.entries()
        self._heap, self._held = [], []
        return gone


__all__ = ["EventQueue", "QueueEntry"]
