"""The journal of one channel's persistent events: sequence numbers that never go back
(reserved in the store in blocks), events written to the store before the supplier's
push returns, and deleted when acknowledged, dropped, or their proxy goes.

One push is one journal batch: :meth:`EventJournal.begin`, :meth:`EventJournal.record`
per queued persistent entry, :meth:`EventJournal.commit` (one transaction). An entry
dropped before the commit never reaches the store.
"""

from __future__ import annotations

from collections.abc import Iterable

from siftbus.channel.queue import QueueEntry
from siftbus.channel.state import StoredEvent
from siftbus.channel.store import SEQ_BLOCK, ChannelStore


class EventJournal:
    """Sequence numbers and stored events of one channel; ``store`` None: the channel is
    not persistent (numbers are still handed out, nothing is written)."""

    def __init__(self, channel_id: int, store: ChannelStore | None) -> None:
        self.channel_id = channel_id
        self.store = store
        self._next = 1
        self._reserved = 1  # numbers below this are reserved in the store
        self._pending: dict[tuple[int, int], StoredEvent] | None = None

    def next_seq(self) -> int:
        """The next sequence number (only grows, also across restarts)."""
        n = self._next
        self._next = n + 1
        if n >= self._reserved and self.store is not None:
            self._reserved = n + SEQ_BLOCK
            self.store.reserve_seq(self.channel_id, self._reserved)
        return n

    def restored(self, high: int, reserved: int) -> None:
        """After a restart: numbers go on after every stored or reserved one."""
        self._next = self._reserved = max(high, reserved) + 1

    def begin(self) -> None:
        self._pending = {}

    def record(self, proxy_id: int, e: QueueEntry) -> None:
        """A persistent entry was queued for ``proxy_id`` in the current batch."""
        if self._pending is not None and self.store is not None:
            self._pending[(proxy_id, e.seq)] = StoredEvent(
                self.channel_id, proxy_id, e.seq, e.priority, e.deadline, e.start,
                e.envelope.packed())

    def commit(self) -> None:
        """Write the batch's entries (one transaction); the push may return then."""
        pending, self._pending = self._pending, None
        if pending and self.store is not None:
            self.store.add_events(list(pending.values()))

    def forget(self, proxy_id: int, entries: Iterable[QueueEntry]) -> None:
        """Entries of ``proxy_id`` are done with (acknowledged, dropped): they leave the
        store, or the current batch if they never got there."""
        if self.store is None:
            return
        pending = self._pending
        stored = []
        for e in entries:
            if not e.persistent:
                continue
            if pending is not None and (proxy_id, e.seq) in pending:
                del pending[(proxy_id, e.seq)]  # queued and dropped in one push
            else:
                stored.append(e.seq)
        if stored:
            self.store.delete_events(self.channel_id, proxy_id, stored)

    def proxy_gone(self, proxy_id: int, entries: Iterable[QueueEntry]) -> None:
        """The proxy was destroyed with these entries (queued or in flight)."""
        if self.store is not None and any(e.persistent for e in entries):
            self.store.delete_proxy_events(self.channel_id, proxy_id)


__all__ = ["EventJournal"]
