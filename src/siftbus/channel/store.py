"""The durable store: persistent channels, their admins, proxies, filters and undelivered
events in SQLite (WAL journal).

The store keeps the state records of :mod:`siftbus.channel.state` and knows nothing of the
objects they come from. Tables::

    channels(id, data)        one JSON snapshot per channel (QoS, admin properties, admins,
                              proxies, filter attachments, subscription/offer counts, id
                              counters); rewritten on every structural change (rare)
    filters(id, data)         one JSON document per filter object (constraints, values)
    events(channel, proxy, seq, priority, deadline, start, body)
                              one row per (persistent event, ProxySupplier) still to be
                              delivered; ``body`` is the msgpack wire form
    seqs(channel, reserved)   the high-water mark of event sequence numbers

An event is inserted (and committed) before the supplier's push returns, and deleted
when the consumer acknowledged it (push returned, in-process pull returned, or a remote
``pull`` acknowledged its sequence number). WAL with ``synchronous=NORMAL`` survives the
process being killed; pass ``synchronous="FULL"`` to survive power loss as well.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from siftbus.channel.state import ChannelState, FilterState, StoreContents, StoredEvent
from siftbus.errors import EnvironmentProblem, InputError

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS channels (id INTEGER PRIMARY KEY, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS filters (id INTEGER PRIMARY KEY, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS events (
    channel INTEGER NOT NULL, proxy INTEGER NOT NULL, seq INTEGER NOT NULL,
    priority INTEGER NOT NULL, deadline INTEGER, start INTEGER, body BLOB NOT NULL,
    PRIMARY KEY (channel, proxy, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS seqs (channel INTEGER PRIMARY KEY, reserved INTEGER NOT NULL);
"""

SEQ_BLOCK = 100_000
"""Sequence numbers are reserved in the store this many at a time."""


class ChannelStore:
    """A SQLite file holding persistent channels; safe to use from several threads."""

    def __init__(self, path: str | Path, *, synchronous: str = "NORMAL") -> None:
        self.path = Path(path)
        try:
            self._db = sqlite3.connect(str(self.path), check_same_thread=False,
                                       isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={synchronous}")
            self._db.executescript(_SCHEMA)
        except sqlite3.Error as exc:
            raise EnvironmentProblem(f"cannot open channel store: {exc}",
                                     source=str(self.path)) from None
        self._lock = threading.Lock()

    def _write(self, sql: str, rows: Iterable[tuple[Any, ...]] | tuple[Any, ...]) -> None:
        with self._lock:
            if isinstance(rows, tuple):
                self._db.execute(sql, rows)
            else:
                self._db.execute("BEGIN")
                try:
                    self._db.executemany(sql, rows)
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")

    def save_channel(self, state: ChannelState) -> None:
        self._write("INSERT OR REPLACE INTO channels VALUES (?, ?)",
                    (state.id, json.dumps(state.to_json())))

    def delete_channel(self, channel_id: int) -> None:
        with self._lock:
            self._db.execute("BEGIN")
            self._db.execute("DELETE FROM channels WHERE id = ?", (channel_id,))
            self._db.execute("DELETE FROM events WHERE channel = ?", (channel_id,))
            self._db.execute("DELETE FROM seqs WHERE channel = ?", (channel_id,))
            self._db.execute("COMMIT")

    def save_filter(self, state: FilterState) -> None:
        self._write("INSERT OR REPLACE INTO filters VALUES (?, ?)",
                    (state.id, json.dumps(state.to_json())))

    def delete_filter(self, filter_id: int) -> None:
        self._write("DELETE FROM filters WHERE id = ?", (filter_id,))

    def add_events(self, events: Sequence[StoredEvent]) -> None:
        """Store events in one transaction (committed when this returns)."""
        self._write("INSERT OR REPLACE INTO events VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [(e.channel, e.proxy, e.seq, e.priority, e.deadline, e.start, e.body)
                     for e in events])

    def delete_events(self, channel_id: int, proxy_id: int, seqs: Sequence[int]) -> None:
        self._write("DELETE FROM events WHERE channel = ? AND proxy = ? AND seq = ?",
                    [(channel_id, proxy_id, s) for s in seqs])

    def delete_proxy_events(self, channel_id: int, proxy_id: int) -> None:
        self._write("DELETE FROM events WHERE channel = ? AND proxy = ?",
                    (channel_id, proxy_id))

    def reserve_seq(self, channel_id: int, upto: int) -> None:
        self._write("INSERT OR REPLACE INTO seqs VALUES (?, ?)", (channel_id, upto))

    def load(self) -> StoreContents:
        """Every stored record (events ordered by channel and sequence number); a damaged
        store raises InputError naming the row."""
        with self._lock:
            try:
                chans = [self._record(ChannelState.from_json, d, "channel", i)
                         for i, d in self._db.execute("SELECT id, data FROM channels ORDER BY id")]
                filters = [self._record(FilterState.from_json, d, "filter", i)
                           for i, d in self._db.execute("SELECT id, data FROM filters ORDER BY id")]
                events = [StoredEvent(*row) for row in self._db.execute(
                    "SELECT channel, proxy, seq, priority, deadline, start, body FROM events "
                    "ORDER BY channel, seq")]
                seqs = dict(self._db.execute("SELECT channel, reserved FROM seqs").fetchall())
            except sqlite3.Error as exc:
                raise EnvironmentProblem(f"cannot read the channel store: {exc}",
                                         source=str(self.path)) from None
        return StoreContents(chans, filters, events, seqs)

    def _record(self, parse: Callable[[Any], T], data: Any, what: str, row: Any) -> T:
        try:
            return parse(json.loads(data))
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
            raise InputError(f"the channel store is damaged: {what} {row}: "
                             f"{type(exc).__name__} {str(exc)[:80]}",
                             source=str(self.path)) from None

    def event_count(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM events").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()


__all__ = ["SEQ_BLOCK", "ChannelStore"]
