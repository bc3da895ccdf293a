"""Durable sessions: a client's notifications kept while it is away, numbered per session.

A client that connects with a session id gets a :class:`Session` at its access broker
(what MQTT 5 calls a persistent session and NATS JetStream a durable consumer). Every
notification row (one event, with the ids of the client's profiles it matched) delivered
to the session gets the next per-session sequence number (``sseq``, from 1) and stays in
the session's buffer until the client acknowledges it, cumulatively. A client that
disconnects -- or is killed -- and comes back resumes after its last acknowledged
number: each row reaches it once per session.

The buffer is bounded per session by rows, bytes and age (:class:`SessionLimits`);
beyond a bound the oldest rows go, and what went is counted per reason and reported to
the client when it comes back (the first number still held tells it which rows it
lost), never silently. Rows are kept as they travel: one columnar event block per
chunk, with consecutive sequence numbers, so a waiting session costs about the bytes of
its rows (``bench/mobility.py`` measures it).

The session's state moves with the client: a handoff (:mod:`.handoff`) ships it to the
new access broker as one ``TRANSFER`` (:meth:`Session.to_wire`). ``hw`` -- the highest
publication number handled per publisher -- lets the new broker drop rows the old one
already handled (see ``docs/mobility.md``, "Duplicates").
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from siftbus.errors import ConfigError, WireError
from siftbus.model import Profile, Schema
from siftbus.wire.events import Block, decode_block, encode_block

from .duplicates import Seen

SESSION_PREFIX = "~"
"""Session ids appear in gids and publication sources behind this prefix (a character
no broker or client name may hold, so a session's ids never clash with others)."""


@dataclass(frozen=True, slots=True)
class SessionLimits:
    """What one session may hold while its client is away (or has not acknowledged)."""

    max_count: int = 100_000
    """Rows (notified events) buffered."""
    max_bytes: int = 16 * 1024 * 1024
    """Bytes of buffered rows (keys, stamps, source, profile ids)."""
    max_age: float = 3600.0
    """Seconds a row may wait in the buffer."""
    expiry: float = 3600.0
    """Seconds a session lives with its client away; then it and its profiles go."""

    def capped(self, ceiling: SessionLimits) -> SessionLimits:
        """Each limit at most the ``ceiling``'s (what a broker allows a client)."""
        return SessionLimits(min(self.max_count, ceiling.max_count),
                             min(self.max_bytes, ceiling.max_bytes),
                             min(self.max_age, ceiling.max_age),
                             min(self.expiry, ceiling.expiry))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], base: SessionLimits | None = None, *,
                     error: type[ConfigError] | type[WireError] = WireError
                     ) -> SessionLimits:
        """``base`` with the limits given in ``data`` (positive numbers; an unknown
        name or a bad value is refused naming it)."""
        base = base or SessionLimits()
        out: dict[str, Any] = {}
        for key, value in data.items():
            if key not in _LIMIT_NAMES:
                raise error(f"unknown session limit {key!r} (have "
                            f"{', '.join(_LIMIT_NAMES)})", field=str(key)[:100])
            kind: tuple[type, ...] = (int,) if key.startswith("max_c") or key == "max_bytes" \
                else (int, float)
            if isinstance(value, bool) or not isinstance(value, kind) or not value > 0:  # type: ignore[operator]
                raise error(f"session limit {key} must be a positive "
                            f"{'whole number' if kind == (int,) else 'number'}", field=key)
            out[key] = value
        return replace(base, **out)


_LIMIT_NAMES = ("max_count", "max_bytes", "max_age", "expiry")


@dataclass(frozen=True, slots=True)
class SessionPolicy:
    """A broker's rules for sessions (``[network.sessions]`` of the network config).

    ``limits`` are both the defaults and the ceilings of every session's limits (a client
    may ask for less).
    """

    limits: SessionLimits = SessionLimits()
    max_sessions: int = 10_000
    """Sessions one broker holds (attached, away or arriving)."""
    max_inflight: int = 20_000
    """Rows sent to a connected client and not yet acknowledged; the rest waits in the
    buffer until acknowledgements come (flow control, like JetStream's max ack pending)."""
    handoff_timeout: float = 30.0
    """Seconds an arriving session waits for its state from the old broker before it
    starts without it (the client is told: ``handoff_failed``)."""
    ping_interval: float = 0.05
    """Seconds between pings of the ping/pong handoff (its epoch T)."""
    max_deferred: int = 10_000
    """Requests of a client held while its handoff runs (more are refused)."""
    dedupe_window: float = 10.0
    """Seconds a session remembers the publication numbers it handled: a copy of a
    notification still travelling toward its new broker after this long would be
    delivered twice."""
    claim_timeout: float = 5.0
    """Seconds a broker waits, on a secured network, for the holders of a session to
    confirm that a connecting client's principal owns it (:mod:`.claims`); without an
    answer the client is refused, never granted the session."""

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["limits"] = self.limits.to_dict()
        return d

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> SessionPolicy:
        """A policy from ``[network.sessions]``; :class:`ConfigError` naming a bad key."""
        lim = {k: v for k, v in data.items() if k in _LIMIT_NAMES}
        rest = {k: v for k, v in data.items() if k not in _LIMIT_NAMES}
        limits = SessionLimits.from_mapping(lim, error=ConfigError)
        out: dict[str, Any] = {}
        for key, value in rest.items():
            if key not in ("max_sessions", "max_inflight", "handoff_timeout",
                           "ping_interval", "max_deferred", "dedupe_window",
                           "claim_timeout"):
                raise ConfigError(f"unknown [network.sessions] key {key!r}", field=str(key))
            whole = key.startswith("max_")
            if isinstance(value, bool) or not isinstance(value, int if whole else (int, float)) \
                    or not value > 0:
                raise ConfigError(f"[network.sessions] {key} must be a positive "
                                  f"{'whole number' if whole else 'number of seconds'}",
                                  field=key)
            out[key] = value
        return cls(limits, **out)


DEFAULT_POLICY = SessionPolicy()


# ---- buffered rows -------------------------------------------------------------------------


class Chunk:
    """Consecutive rows of one session: one event block with the ids each row matched,
    numbered ``first``, ``first + 1``, ..."""

    __slots__ = ("block", "counts", "first", "nbytes", "offsets", "pids", "t")

    def __init__(self, first: int, block: Block, counts: np.ndarray, pids: list[str],
                 t: float) -> None:
        self.first = first
        self.block = block
        self.counts = np.asarray(counts, np.int32)
        self.pids = pids
        self.offsets = np.concatenate(([0], np.cumsum(self.counts, dtype=np.int64)))
        self.t = t
        self.nbytes = int(row_bytes(block, self.counts, pids).sum())

    def __len__(self) -> int:
        return len(self.block)

    @property
    def last(self) -> int:
        return self.first + len(self.block) - 1

    def rows_bytes(self) -> np.ndarray:
        return row_bytes(self.block, self.counts, self.pids)

    def tail(self, k: int) -> Chunk:
        """The chunk without its first ``k`` rows."""
        n = len(self.block)
        rows = np.arange(k, n)
        return Chunk(self.first + k, self.block.take(rows), self.counts[k:],
                     self.pids[int(self.offsets[k]):], self.t)

    def to_wire(self) -> dict[str, Any]:
        """The NOTIFY block of these rows, with ``ss`` (first number) and ``ti`` (when
        they arrived)."""
        d = encode_block(self.block, self.counts, self.pids)
        d["ss"] = self.first
        d["ti"] = self.t
        return d

    @classmethod
    def from_wire(cls, d: Any, schema: Schema) -> Chunk:
        block, counts, pids = decode_block(d, schema, notify=True)
        first, t = d.get("ss"), d.get("ti", 0.0)
        if type(first) is not int or first < 1 or not isinstance(t, int | float):
            raise WireError("a session chunk needs 'ss' (its first number) and 'ti'",
                            field="ss")
        return cls(first, block, counts, pids, float(t))


def row_bytes(block: Block, counts: np.ndarray, pids: list[str]) -> np.ndarray:
    """Bytes of each row as it is held and sent: keys, number and time stamps, source,
    the count and the profile ids it matched."""
    n = len(block)
    if not n:
        return np.zeros(0, np.int64)
    keys = block.keys
    fixed = 20 + (keys.shape[1] * 8 if keys.dtype != object else
                  sum(len(str(k)) + 1 for k in keys[0].tolist()))
    per = np.full(n, fixed, np.int64)
    if isinstance(block.src, str):
        per += len(block.src)
    else:
        per += np.fromiter((len(s) for s in block.src), np.int64, n)
    if pids:
        lens = np.fromiter((len(p) + 1 for p in pids), np.int64, len(pids))
        starts = np.concatenate(([0], np.cumsum(counts, dtype=np.int64)[:-1]))
        nz = counts > 0
        if nz.any():
            per[nz] += np.add.reduceat(lens, starts[nz])
    return per


def keep_rows(block: Block, counts: np.ndarray, pids: list[str], keep: np.ndarray
              ) -> tuple[Block, np.ndarray, list[str]] | None:
    """The rows of a notification block where ``keep`` is true (``None`` if none)."""
    if keep.all():
        return block, counts, pids
    if not keep.any():
        return None
    offsets = np.concatenate(([0], np.cumsum(counts, dtype=np.int64)))
    rows = np.flatnonzero(keep)
    out: list[str] = []
    for r in rows.tolist():
        out.extend(pids[int(offsets[r]):int(offsets[r + 1])])
    return block.take(rows), counts[rows], out


def publication_runs(items: list[tuple[Block, np.ndarray, list[str]]]
                     ) -> list[tuple[Block, np.ndarray, list[str]]]:
    """The rows of one delivery in publication order, as runs of consecutive rows of
    one block, without positions: a session numbers its rows in this order (numbered
    block by block, Temperature s1, Motion s2, Temperature s3, Motion s4 got the numbers
    1, 3, 2, 4, issue 30), and a chunk's order is its numbers' order."""
    if len(items) < 2 or any(b.at is None for b, _, _ in items):
        return [(replace(b, at=None) if b.at is not None else b, c, p) for b, c, p in items]
    at = np.concatenate([b.at for b, _, _ in items])
    which = np.repeat(np.arange(len(items)), [len(b) for b, _, _ in items])
    row = np.concatenate([np.arange(len(b)) for b, _, _ in items])
    order = np.argsort(at, kind="stable")
    which, row = which[order], row[order]
    cuts = np.flatnonzero(np.diff(which)) + 1
    out = []
    for start, end in zip(np.concatenate(([0], cuts)).tolist(),
                          np.concatenate((cuts, [len(order)])).tolist(), strict=True):
        block, counts, pids = items[int(which[start])]
        keep = np.zeros(len(block), bool)
        keep[row[start:end]] = True  # consecutive rows: positions rise within a block
        kept = keep_rows(block, counts, pids, keep)
        assert kept is not None
        out.append((replace(kept[0], at=None), kept[1], kept[2]))
    return out


def unique_pids(block: Block, counts: np.ndarray, pids: list[str]
                ) -> tuple[Block, np.ndarray, list[str]]:
    """Each row's profile ids once: a session that came back to a broker where the
    gids of its earlier attachment still wait for the old broker's release matches a
    row with both (the rendezvous handoff subscribes anew under a new tag), and the
    client has one profile of that id (seed 649371)."""
    counts = np.asarray(counts)
    if len(pids) == len(set(pids)) or not (counts > 1).any():
        return block, counts, pids
    out: list[str] = []
    new = np.empty(len(counts), np.int32)
    at = 0
    for i, k in enumerate(counts.tolist()):
        row = list(dict.fromkeys(pids[at:at + k]))
        at += k
        new[i] = len(row)
        out.extend(row)
    return block, new, out


# ---- one session ------------------------------------------------------------------------------


class Session:
    """The state of one session at its access broker.

    ``state``: ``attached`` (its client is connected here), ``away`` (kept for the
    client), ``arriving`` (the client is here, the state is still on its way from the old
    broker: rows for it wait in ``pending`` without numbers).
    """

    def __init__(self, sid: str, limits: SessionLimits, now: float) -> None:
        self.id = sid
        self.link = "@" + sid
        self.limits = limits
        self.state = "away"
        self.next = 1
        """The number the next row gets."""
        self.acked = 0
        """The client acknowledged every row up to this number."""
        self.sent = 0
        """Rows up to this number were sent to the connected client."""
        self.chunks: deque[Chunk] = deque()
        self.count = 0
        self.nbytes = 0
        self.overflow = {"count": 0, "bytes": 0, "age": 0}
        """Rows dropped from the buffer, by the limit that dropped them."""
        self.lost = 0
        """Every row up to this number that is not acknowledged was dropped."""
        self.seen = Seen()
        """Publication numbers handled lately, per stream (publisher and event type)."""
        self.epoch = 0
        """The attachment this copy belongs to (orders handoffs of this session): a
        (round, broker) pair as one number, unique per broker (:mod:`.overlay`)."""
        self.tag = 0
        """The epoch whose gids the session's profiles carry (``~id/tag/pid``)."""
        self.pub_seq = 0
        """The next publication number of the session's client (publishers)."""
        self.principal = ""
        """The session's owner on a secured network (``""``: not recorded -- an open
        network, or a state from before owners were recorded)."""
        self.away_since: float | None = now
        self.pending: list[tuple[list[tuple[Block, np.ndarray, list[str]]], float]] = []
        self.pending_rows = 0
        self.pending_overflow = 0
        self.profiles: dict[str, Profile] | None = None
        """An arriving session's profiles under the client's ids (then the table's)."""
        self.deadline = 0.0
        """When an arriving session stops waiting for its state."""
        self.probing = False
        """A moved publisher's probe is out: its requests wait (advertisement mode)."""
        self.draining = False
        """Its state waits for the connected client to acknowledge what it was sent
        before it goes to another broker: nothing more is sent to the client."""

    # ---- buffer ---------------------------------------------------------------------------

    def append(self, items: list[tuple[Block, np.ndarray, list[str]]], now: float,
               *, filtered: bool = True) -> list[Chunk]:
        """Number and buffer the rows of one delivery (its blocks, one per event type);
        rows of session publishers already seen are dropped first (a publisher's resent
        rows)."""
        if filtered and self.seen.high:
            kept_items = []
            for block, counts, pids in items:
                kept = keep_rows(block, counts, pids,
                                 ~self.seen.mask(block, prefix=SESSION_PREFIX))
                if kept is not None:
                    kept_items.append(kept)
            items = kept_items
        out = []
        for block, counts, pids in publication_runs(items):
            c = Chunk(self.next, block, counts, pids, now)
            self.next += len(block)
            self.chunks.append(c)
            self.count += len(c)
            self.nbytes += c.nbytes
            out.append(c)
            self.seen.add(block, now)
        return out

    def enforce(self, now: float) -> dict[str, int]:
        """Drop the oldest rows beyond the limits (and rows older than ``max_age``);
        returns what went per reason."""
        lim = self.limits
        gone = {"count": 0, "bytes": 0, "age": 0}
        cutoff = now - lim.max_age
        while self.chunks and self.chunks[0].t < cutoff:
            gone["age"] += self._drop_first(len(self.chunks[0]))
        while self.chunks and (self.count > lim.max_count or self.nbytes > lim.max_bytes):
            c = self.chunks[0]
            reason = "count" if self.count > lim.max_count else "bytes"
            if reason == "count":
                k = min(len(c), self.count - lim.max_count)
            else:
                excess = self.nbytes - lim.max_bytes
                k = int(np.searchsorted(np.cumsum(c.rows_bytes()), excess) + 1)
                k = min(len(c), k)
            gone[reason] += self._drop_first(k)
        for why, v in gone.items():
            self.overflow[why] += v
        return gone

    def _drop_first(self, k: int) -> int:
        c = self.chunks[0]
        if k >= len(c):
            self.chunks.popleft()
            self.count -= len(c)
            self.nbytes -= c.nbytes
            self.lost = max(self.lost, c.last)
            return len(c)
        rest = c.tail(k)
        self.chunks[0] = rest
        self.count -= k
        self.nbytes -= c.nbytes - rest.nbytes
        self.lost = max(self.lost, rest.first - 1)
        return k

    def ack(self, n: int) -> None:
        """The client has every row up to ``n``: they leave the buffer."""
        n = min(n, self.next - 1)
        if n <= self.acked:
            return
        self.acked = n
        while self.chunks and self.chunks[0].last <= n:
            c = self.chunks.popleft()
            self.count -= len(c)
            self.nbytes -= c.nbytes
        if self.chunks and self.chunks[0].first <= n:
            c = self.chunks[0]
            rest = c.tail(n - c.first + 1)
            self.chunks[0] = rest
            self.count -= len(c) - len(rest)
            self.nbytes -= c.nbytes - rest.nbytes
        self.sent = max(self.sent, n)

    def renumber_above(self, n: int) -> None:
        """Number the rows held after ``n`` when their numbers are at or below it: a copy
        of the session that forked (moves crossing a locate wave) numbered rows the client
        never had with numbers it has already used; they would be skipped as resent."""
        if n < self.next:  # the usual case: this copy numbered beyond the client's ack
            return
        base = self.chunks[0].first if self.chunks else self.next
        shift = n + 1 - base
        for c in self.chunks:
            c.first += shift
        self.next += shift
        self.acked = self.sent = n

    def unsent(self, limit: int) -> Iterator[Chunk]:
        """Buffered rows after :attr:`sent`, while fewer than ``limit`` rows are in
        flight (sent, not acknowledged)."""
        room = limit - (self.sent - self.acked)
        for c in self.chunks:
            if room <= 0:
                return
            if c.last <= self.sent:
                continue
            if c.first <= self.sent:
                c = c.tail(self.sent - c.first + 1)
            if len(c) > room:
                c = Chunk(c.first, c.block.take(np.arange(room)), c.counts[:room],
                          c.pids[:int(c.offsets[room])], c.t)
            room -= len(c)
            yield c

    def first_held(self) -> int:
        """The lowest number still buffered (``next`` when the buffer is empty)."""
        return self.chunks[0].first if self.chunks else self.next

    # ---- arriving ------------------------------------------------------------------------------

    def hold(self, items: list[tuple[Block, np.ndarray, list[str]]], now: float) -> None:
        """Keep a delivery that came while the state is on its way (numbered once the
        state is here)."""
        self.pending.append((items, now))
        self.pending_rows += sum(len(b) for b, _, _ in items)
        lim = self.limits.max_count
        while self.pending_rows > lim and self.pending:
            gone, _ = self.pending.pop(0)
            k = sum(len(b) for b, _, _ in gone)
            self.pending_rows -= k
            self.pending_overflow += k

    def merge_pending(self, old: Seen) -> int:
        """Number the held rows after the transferred ones, without those the old broker
        had handled (``old``: what it had seen); returns how many were dropped as
        duplicates."""
        dups = 0
        for items, t in self.pending:
            keep = []
            for block, counts, pids in items:
                kept = keep_rows(block, counts, pids, ~old.mask(block))
                dups += len(block) - (len(kept[0]) if kept is not None else 0)
                if kept is not None:
                    keep.append(kept)
            self.append(keep, t, filtered=False)
        self.pending = []
        self.pending_rows = 0
        self.overflow["count"] += self.pending_overflow
        self.pending_overflow = 0
        return dups

    def fold(self, chunks: list[Chunk], now: float) -> list[Chunk]:
        """Take the rows of another copy of this session whose claim lost to this one
        (two claims of one epoch, issue 30 item 2): those not handled here yet are
        numbered after this copy's own (held, while it is arriving) -- none dropped,
        none twice within the dedupe window. Returns the chunks added."""
        items = []
        for c in chunks:
            kept = keep_rows(c.block, c.counts, c.pids, ~self.seen.mask(c.block))
            if kept is not None:
                items.append(kept)
        if not items:
            return []
        if self.state == "arriving":
            self.hold(items, now)
            return []
        added = self.append(items, now, filtered=False)
        self.enforce(now)
        return added

    # ---- transfer -------------------------------------------------------------------------------

    def meta(self) -> dict[str, Any]:
        """Everything but the rows (msgpack-serialisable)."""
        return {"id": self.id, "limits": self.limits.to_dict(), "next": self.next,
                "acked": self.acked, "overflow": dict(self.overflow), "lost": self.lost,
                "epoch": self.epoch, "tag": self.tag,
                "pub": self.pub_seq, "principal": self.principal,
                "away": self.away_since}

    def to_wire(self) -> dict[str, Any]:
        return {**self.meta(), "seen": self.seen.to_wire(),
                "chunks": [c.to_wire() for c in self.chunks]}

    def load_meta(self, d: Mapping[str, Any], now: float) -> None:
        """Take the counters of a transferred or stored session (checked)."""
        try:
            self.limits = SessionLimits.from_mapping(d.get("limits") or {}, self.limits)
            self.next = _int(d, "next", 1)
            self.acked = _int(d, "acked", 0)
            self.lost = _int(d, "lost", 0)
            ov = d.get("overflow") or {}
            self.overflow = {k: int(ov.get(k, 0)) for k in ("count", "bytes", "age")}
            self.epoch = _int(d, "epoch", 0)
            self.tag = _int(d, "tag", 0)
            self.pub_seq = _int(d, "pub", 0)
            self.principal = str(d.get("principal") or "")
        except (TypeError, ValueError, AttributeError) as exc:
            raise WireError(f"bad session state for {self.id!r}: {exc}",
                            field="session") from None
        self.sent = self.acked

    def load_chunks(self, chunks: list[Chunk]) -> None:
        """Take transferred or stored rows (those at or below ``acked`` are skipped)."""
        for c in chunks:
            if c.last <= max(self.acked, self.lost):
                continue
            if c.first <= max(self.acked, self.lost):
                c = c.tail(max(self.acked, self.lost) - c.first + 1)
            self.chunks.append(c)
            self.count += len(c)
            self.nbytes += c.nbytes

    def status(self) -> dict[str, Any]:
        """What the client is told on (re)attaching: where its stream stands and what
        was dropped while it was away."""
        return {"id": self.id, "epoch": self.epoch, "tag": self.tag, "next": self.next,
                "acked": self.acked, "first": self.first_held(), "lost": self.lost,
                "overflow": dict(self.overflow), "buffered": self.count,
                "pub_seq": self.pub_seq, "limits": self.limits.to_dict()}


def _int(d: Mapping[str, Any], key: str, default: int) -> int:
    v = d.get(key, default)
    if type(v) is not int:
        raise ValueError(f"{key} must be an integer")
    return v


__all__ = ["DEFAULT_POLICY", "SESSION_PREFIX", "Chunk", "Session", "SessionLimits",
           "SessionPolicy", "keep_rows", "publication_runs", "row_bytes", "unique_pids"]
