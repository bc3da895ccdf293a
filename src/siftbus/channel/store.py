"""The durable store: persistent channels, their admins, proxies, filters and undelivered
events in SQLite (WAL journal).

Tables::

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

import itertools
import json
import sqlite3
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgpack

from siftbus.errors import EnvironmentProblem

if TYPE_CHECKING:
    from siftbus.channel.core import Entry, EventChannel, EventChannelFactory

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

    def save_channel(self, channel_id: int, data: dict[str, Any]) -> None:
        self._write("INSERT OR REPLACE INTO channels VALUES (?, ?)",
                    (channel_id, json.dumps(data)))

    def delete_channel(self, channel_id: int) -> None:
        with self._lock:
            self._db.execute("BEGIN")
            self._db.execute("DELETE FROM channels WHERE id = ?", (channel_id,))
            self._db.execute("DELETE FROM events WHERE channel = ?", (channel_id,))
            self._db.execute("DELETE FROM seqs WHERE channel = ?", (channel_id,))
            self._db.execute("COMMIT")

    def save_filter(self, filter_id: int, data: dict[str, Any]) -> None:
        self._write("INSERT OR REPLACE INTO filters VALUES (?, ?)",
                    (filter_id, json.dumps(data)))

    def delete_filter(self, filter_id: int) -> None:
        self._write("DELETE FROM filters WHERE id = ?", (filter_id,))

    def add_events(self, channel_id: int, rows: list[tuple[int, Entry]]) -> None:
        """Store (proxy id, entry) pairs in one transaction."""
        self._write("INSERT OR REPLACE INTO events VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [(channel_id, pid, e.seq, e.priority, e.deadline, e.start,
                      msgpack.packb(e.msg.to_wire(), use_bin_type=True)) for pid, e in rows])

    def delete_events(self, channel_id: int, proxy_id: int, seqs: list[int]) -> None:
        self._write("DELETE FROM events WHERE channel = ? AND proxy = ? AND seq = ?",
                    [(channel_id, proxy_id, s) for s in seqs])

    def delete_proxy_events(self, channel_id: int, proxy_id: int) -> None:
        self._write("DELETE FROM events WHERE channel = ? AND proxy = ?",
                    (channel_id, proxy_id))

    def reserve_seq(self, channel_id: int, upto: int) -> None:
        self._write("INSERT OR REPLACE INTO seqs VALUES (?, ?)", (channel_id, upto))

    def load(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]],
                            list[tuple[Any, ...]], dict[int, int]]:
        """(channels, filters, event rows ordered by seq, reserved seqs)."""
        with self._lock:
            chans = [json.loads(d) for (d,) in
                     self._db.execute("SELECT data FROM channels ORDER BY id")]
            filters = [json.loads(d) for (d,) in
                       self._db.execute("SELECT data FROM filters ORDER BY id")]
            events = list(self._db.execute(
                "SELECT channel, proxy, seq, priority, deadline, start, body FROM events "
                "ORDER BY channel, seq"))
            seqs = dict(self._db.execute("SELECT channel, reserved FROM seqs").fetchall())
        return chans, filters, events, seqs

    def event_count(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM events").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _peek(counter: itertools.count[int]) -> tuple[int, itertools.count[int]]:
    n = next(counter)
    return n, itertools.count(n)


def snapshot(ch: EventChannel) -> dict[str, Any]:
    """The JSON document that :func:`restore` turns back into the channel."""
    from siftbus.channel.core import ConsumerAdmin, ProxySupplier

    n_admin, ch._next_admin = _peek(ch._next_admin)
    n_proxy, ch._next_proxy = _peek(ch._next_proxy)

    def mf(node: Any, attr: str) -> int | None:
        f = getattr(node, attr, None)
        return None if f is None else f.id

    admins = []
    for side in ("consumer", "supplier"):
        for a in ch._admins[side].values():
            proxies = []
            for p in a._proxies.values():
                nf, p._next_filter = _peek(p._next_filter)
                proxies.append({
                    "id": p.id, "cls": type(p).__name__, "kind": p.kind, "qos": p._qos,
                    "connected": p.connected, "client": p.client is not None,
                    "suspended": p.suspended, "keyed": p.id not in a._unkeyed,
                    "filters": {str(k): f.id for k, f in p._filters.items()},
                    "next_filter": nf,
                    "priority_filter": mf(p, "_priority_filter"),
                    "lifetime_filter": mf(p, "_lifetime_filter"),
                    "updates": p._updates_on,
                    "delivered": p.delivered if isinstance(p, ProxySupplier) else 0,
                })
            nf, a._next_filter = _peek(a._next_filter)
            admins.append({
                "side": side, "id": a.id, "op": a.op, "qos": a._qos,
                "filters": {str(k): f.id for k, f in a._filters.items()}, "next_filter": nf,
                "priority_filter": mf(a, "_priority_filter") if isinstance(a, ConsumerAdmin)
                else None,
                "lifetime_filter": mf(a, "_lifetime_filter") if isinstance(a, ConsumerAdmin)
                else None,
                "proxies": proxies,
            })
    return {
        "id": ch.id, "qos": ch._qos, "admin": ch._admin_props, "next_admin": n_admin,
        "next_proxy": n_proxy, "admins": admins,
        "subs": [[d, t, n] for (d, t), n in ch._subs.items()],
        "offers": [[d, t, n] for (d, t), n in ch._offers.items()],
    }


def restore(factory: EventChannelFactory, store: ChannelStore) -> None:
    """Rebuild every stored channel (with filters and undelivered events) in ``factory``.

    Proxies whose client was a remote or nil reference come back connected (remote
    clients simply go on calling them); proxies that held an in-process client object
    come back disconnected with their queue intact, ready for ``connect_*`` again.
    """
    from siftbus.channel import core
    from siftbus.channel.core import ConsumerAdmin, EventChannel, Message, SupplierAdmin

    chans, filters, events, seqs = store.load()
    ff = factory.filter_factory
    for fd in filters:
        ff.restore(fd)

    def get_filter(fid: int | None) -> Any:
        if fid is None:
            return None
        try:
            return ff.get_filter(int(fid))
        except KeyError:
            return None

    top = 0
    by_id: dict[int, EventChannel] = {}
    for data in chans:
        cid = int(data["id"])
        top = max(top, cid)
        ch = EventChannel(factory, cid, data["qos"], data["admin"])
        ch._restoring = True
        ch._admins = {"consumer": {}, "supplier": {}}
        ch._next_admin = itertools.count(int(data["next_admin"]))
        ch._next_proxy = itertools.count(int(data["next_proxy"]))
        for ad in data["admins"]:
            cls = ConsumerAdmin if ad["side"] == "consumer" else SupplierAdmin
            a = cls(ch, int(ad["id"]), ad["op"], dict(ad["qos"]))
            ch._admins[ad["side"]][a.id] = a
            a._next_filter = itertools.count(int(ad["next_filter"]))
            for k, fid in ad["filters"].items():
                f = get_filter(fid)
                if f is not None:
                    a._filters[int(k)] = f
                    ch._filter_attached(a, f)
            if isinstance(a, ConsumerAdmin):
                a._priority_filter = get_filter(ad.get("priority_filter"))
                a._lifetime_filter = get_filter(ad.get("lifetime_filter"))
            for pd in ad["proxies"]:
                pcls = getattr(core, pd["cls"])
                p = pcls(a, int(pd["id"]), pd["kind"], dict(pd["qos"]))
                a._proxies[p.id] = p
                if not pd["keyed"]:
                    a._unkeyed.add(p.id)
                ch._proxy_added(p)
                p._next_filter = itertools.count(int(pd["next_filter"]))
                for k, fid in pd["filters"].items():
                    f = get_filter(fid)
                    if f is not None:
                        p._filters[int(k)] = f
                        ch._filter_attached(p, f)
                if hasattr(p, "_priority_filter"):
                    p._priority_filter = get_filter(pd.get("priority_filter"))
                    p._lifetime_filter = get_filter(pd.get("lifetime_filter"))
                p.connected = bool(pd["connected"]) and not pd["client"]
                p.suspended = bool(pd["suspended"]) and p.connected
                p._updates_on = bool(pd.get("updates"))
                if isinstance(p, core.ProxySupplier):
                    p.delivered = int(pd.get("delivered", 0))
        ch._subs = {(d, t): int(n) for d, t, n in data.get("subs", ())}
        ch._offers = {(d, t): int(n) for d, t, n in data.get("offers", ())}
        by_id[cid] = ch
    high: dict[int, int] = {}
    for cid, pid, seq, prio, deadline, start, body in events:
        high[cid] = max(high.get(cid, 0), seq)
        owner = by_id.get(cid)
        p = owner._supplier_proxies.get(pid) if owner is not None else None
        if owner is None or p is None:
            continue
        msg = Message.from_wire(msgpack.unpackb(body, raw=False, strict_map_key=False))
        e = core.Entry(seq, msg, prio, deadline, start, True)
        p._push_entry(e)
        owner._queued += 1
        if p.mode == "push":
            owner._push_ready.add(pid)
    for cid, ch in by_id.items():
        start_seq = max(high.get(cid, 0), seqs.get(cid, 0)) + 1
        ch._seq_next = start_seq
        ch._seq_reserved = start_seq
        ch._restoring = False
        factory._channels[cid] = ch
    factory._next = itertools.count(max(top + 1, _peek(factory._next)[0]))


__all__ = ["ChannelStore", "restore", "snapshot"]
