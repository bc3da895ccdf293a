"""What a subscriber receives: :class:`Notification` values one by one, or a whole
NOTIFY frame at once as a columnar :class:`NotificationBatch` (immutable values; no I/O).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from siftbus.model import Event, EventType
from siftbus.wire.events import Block, in_order


@dataclass(frozen=True, slots=True)
class Notification:
    """An event delivered for one of this client's profiles."""

    profile: str
    """The id of the matching profile (the client's own id)."""
    event: Event
    src: str
    """The publisher (``broker/client``)."""
    seq: int
    """The publication's sequence number at its publisher."""
    ts: float
    """The publisher's clock at publication (seconds)."""
    n: int = 0
    """The row's session number (``0`` outside a session): keep the highest one stored
    with the output and give it back as ``SessionState(id, last=n)`` after a crash, so
    the session resumes after it (``docs/mobility.md``)."""

    @property
    def latency(self) -> float:
        """Seconds from publication to now (same-machine clocks)."""
        return time.time() - self.ts


def _frozen(a: np.ndarray) -> np.ndarray:
    """``a`` made read-only (a view when it is writable), so a batch is immutable."""
    if a.flags.writeable:
        a = a.view()
        a.flags.writeable = False
    return a


@dataclass(frozen=True, slots=True)
class NotifyBlock:
    """Consecutive notified events of one type in columnar form, with the ids of this
    client's profiles that each row matched (one block of a NOTIFY frame).

    The arrays are read-only; row ``i`` matched ``counts[i]`` profiles, whose ids are
    ``ids[offsets[i]:offsets[i + 1]]`` (sorted within a row).
    """

    block: Block
    """The event rows (keys, publishers, sequence numbers, stamps, positions)."""
    counts: np.ndarray
    """int32: how many of this client's profiles each row matched (at least one)."""
    ids: tuple[str, ...]
    """The matching profile ids, row after row."""

    @property
    def etype(self) -> EventType:
        return self.block.etype

    @property
    def keys(self) -> np.ndarray:
        """``[rows, attributes]`` keys in schema order (int64 when every attribute is
        ordered, else an object array of ints and strs)."""
        return self.block.keys

    @property
    def src(self) -> str | list[str]:
        """The publisher (``broker/client``) of every row, or one per row."""
        return self.block.src

    @property
    def seq(self) -> np.ndarray:
        """int64 sequence numbers at the publishers."""
        return self.block.seq

    @property
    def ts(self) -> np.ndarray:
        """float64 publication times (seconds since the epoch)."""
        return self.block.ts

    @property
    def at(self) -> np.ndarray | None:
        """The rows' positions in the frame's publication order (several blocks only)."""
        return self.block.at

    def __len__(self) -> int:
        """Notifications (profile ids) in this block."""
        return len(self.ids)

    @property
    def offsets(self) -> np.ndarray:
        """int64 ``[rows + 1]``: where each row's ids start in :attr:`ids`."""
        out = np.zeros(len(self.counts) + 1, np.int64)
        np.cumsum(self.counts, out=out[1:])
        return out

    def rows(self) -> np.ndarray:
        """int64: the row of each notification (aligned with :attr:`ids`)."""
        return np.repeat(np.arange(len(self.counts), dtype=np.int64), self.counts)

    def _filtered(self, keep: np.ndarray) -> NotifyBlock | None:
        """The notifications where ``keep`` (aligned with :attr:`ids`) is true, without
        rows left with none; ``None`` when nothing is kept."""
        if not keep.any():
            return None
        if keep.all() and int(self.counts.min()) > 0:
            return self
        counts = np.bincount(self.rows()[keep], minlength=len(self.counts))
        live = np.flatnonzero(counts)
        ids = tuple(p for p, k in zip(self.ids, keep.tolist(), strict=True) if k)
        return notify_block(self.block.take(live), counts[live].astype(np.int32), ids)


def notify_block(block: Block, counts: np.ndarray, ids: Sequence[str]) -> NotifyBlock:
    """A :class:`NotifyBlock` of a decoded block, its arrays made read-only."""
    b = Block(block.etype, _frozen(block.keys), block.src, _frozen(block.seq),
              _frozen(block.ts), None if block.at is None else _frozen(block.at))
    return NotifyBlock(b, _frozen(counts), tuple(ids))


@dataclass(frozen=True, slots=True)
class NotificationBatch:
    """The notifications of one NOTIFY frame for one batch consumer, in columnar form.

    It is what a ``batch_callback`` receives: no Python object is built per
    notification until asked for. ``len(batch)`` is the number of notifications;
    iterating yields :class:`Notification` values lazily in publication order (within
    an event, profile ids sorted) -- exactly what the per-notification API would have
    delivered for the same profiles.
    """

    blocks: tuple[NotifyBlock, ...]
    """One block per event type in the frame (rows without a match for this consumer
    are left out)."""

    def __len__(self) -> int:
        return sum(len(b.ids) for b in self.blocks)

    @property
    def n_events(self) -> int:
        """Distinct notified events (rows) in the batch."""
        return sum(len(b.counts) for b in self.blocks)

    def _ordered(self) -> Iterator[tuple[Event, str, int, float, list[str]]]:
        return in_order([(b.block, b.counts, list(b.ids)) for b in self.blocks])

    def __iter__(self) -> Iterator[Notification]:
        for ev, src, seq, ts, pids in self._ordered():
            for pid in pids:
                yield Notification(pid, ev, src, seq, ts)

    def to_events(self) -> list[Event]:
        """The notified events, each once, in publication order."""
        return [row[0] for row in self._ordered()]

    def ids(self) -> list[str]:
        """The profile id of every notification (block after block, as :meth:`stamps`)."""
        return [p for b in self.blocks for p in b.ids]

    def stamps(self) -> np.ndarray:
        """float64: the publication time of every notification (block after block)."""
        if not self.blocks:
            return np.zeros(0, np.float64)
        return np.concatenate([np.repeat(b.ts, b.counts) for b in self.blocks])


def event_json(n: Notification) -> str:
    """One JSON line for a notification (what ``siftbus subscribe`` prints)."""
    return json.dumps({"profile": n.profile, "src": n.src, "seq": n.seq,
                       "event": json.loads(n.event.to_json())})


__all__ = ["Notification", "NotificationBatch", "NotifyBlock", "event_json", "notify_block"]
