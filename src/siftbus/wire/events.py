"""Events on the wire: envelopes and columnar event blocks (codec only, no I/O).

Profiles and events travel in a structured form, not as text, so a broker never parses
profile language on the hot path:

* event envelope: ``[type, [key, ...], src, seq, ts]`` -- keys in schema order (decimals
  as scaled integers, enums as ordinals), ``src``/``seq`` identify the publication and
  ``ts`` is the publisher's clock (seconds) for latency measurement;
* event block (what PUB and NOTIFY carry): consecutive events of one type in columnar
  form, ``{"t": type, "n": rows, "k": keys, "src": src, "seq": seqs, "ts": stamps}``.
  ``k`` is the ``n x attributes`` key matrix as little-endian int64 bytes (row-major)
  when every attribute of the type is ordered, else a list of ``n`` key lists; ``src``
  is one string for the whole block or a list of ``n``; ``seq`` and ``ts`` are
  little-endian int64 / float64 bytes. A NOTIFY to a client adds ``np`` (little-endian
  int32 bytes: matching profile ids per row) and ``p`` (those ids, row after row). A
  batch is a list of blocks, one per event type; when it has several, every block
  carries ``at`` (little-endian int32 bytes), its rows' positions in the publication
  order (increasing within a block); without ``at`` the order is the blocks' order. So
  a broker decodes and matches a whole batch with one kernel call per type and without
  one Python object per event.

Events of extended types (optional, nested, array or open-kind attributes) take the
same envelope and block forms with their keys as lists (:mod:`.extended` says how absent
values, arrays and keys beyond int64 are written).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from siftbus.errors import WireError
from siftbus.match.base import positions_by_type
from siftbus.model import Event, EventType, Schema, StringDomain

from .extended import decode_keys, encode_keys
from .frames import get


@dataclass(frozen=True, slots=True)
class Envelope:
    """A published event with its identity and timestamp, as it travels the network."""

    event: Event
    src: str
    """The publishing client (unique in the network)."""
    seq: int
    """The publication's sequence number at ``src``."""
    ts: float
    """The publisher's clock when it published (seconds since the epoch)."""

    @property
    def ident(self) -> tuple[str, int]:
        return (self.src, self.seq)


def encode_event_keys(ev: Event) -> list[Any]:
    """An event's keys as they travel (the inverse of :func:`decode_event_keys`)."""
    return encode_keys(ev.keys) if ev.etype.extended else list(ev.keys)


def encode_envelope(env: Envelope) -> list[Any]:
    ev = env.event
    return [ev.etype.name, encode_event_keys(ev), env.src, env.seq, env.ts]


def decode_envelope(data: Any, schema: Schema) -> Envelope:
    """Check and build an envelope; raises :class:`WireError` naming the problem."""
    if not isinstance(data, list | tuple) or len(data) != 5:
        raise WireError("an event must be [type, keys, src, seq, ts]")
    tname, keys, src, seq, ts = data
    if not isinstance(tname, str):
        raise WireError("event type must be a string")
    etype = schema.get(tname)
    if etype is None:
        raise WireError(f"unknown event type {tname!r}", field="type")
    if not isinstance(src, str) or not isinstance(seq, int) or isinstance(seq, bool):
        raise WireError("event src must be a string and seq an integer")
    if not isinstance(ts, float | int) or isinstance(ts, bool):
        raise WireError("event ts must be a number")
    return Envelope(decode_event_keys(etype, keys), src, seq, float(ts))


_BOUNDS: dict[int, tuple[EventType, tuple[tuple[int, int] | None, ...]]] = {}


def _bounds(etype: EventType) -> tuple[tuple[int, int] | None, ...]:
    """Per attribute: the key range of an ordered domain, ``None`` for a string."""
    hit = _BOUNDS.get(id(etype))
    if hit is not None and hit[0] is etype:
        return hit[1]
    b = tuple(None if isinstance(a.domain, StringDomain) else (a.domain.min_key,
                                                               a.domain.max_key)
              for a in etype.attributes)
    _BOUNDS[id(etype)] = (etype, b)
    return b


def decode_event_keys(etype: EventType, keys: Any) -> Event:
    if etype.extended:
        return Event(etype, decode_keys(etype, keys))
    bounds = _bounds(etype)
    if type(keys) is not list or len(keys) != len(bounds):
        if isinstance(keys, tuple) and len(keys) == len(bounds):
            keys = list(keys)
        else:
            raise WireError(f"{etype.name} event needs {len(bounds)} keys")
    for b, k in zip(bounds, keys, strict=True):
        if b is None:
            if type(k) is not str:
                break
        elif type(k) is not int or not b[0] <= k <= b[1]:
            break
    else:
        return Event(etype, tuple(keys))
    for attr, k in zip(etype.attributes, keys, strict=True):  # the slow path names it
        dom = attr.domain
        if isinstance(dom, StringDomain):
            if not isinstance(k, str):
                raise WireError(f"{etype.name}.{attr.name} must be a string", field=attr.name)
        elif type(k) is not int or not dom.min_key <= k <= dom.max_key:
            raise WireError(f"{etype.name}.{attr.name}: key {k!r} is outside {dom.spec}",
                            field=attr.name)
    raise AssertionError("unreachable: the fast check found a bad key")


def encode_events(envs: Sequence[Envelope]) -> list[list[Any]]:
    return [encode_envelope(e) for e in envs]


def decode_events(data: Any, schema: Schema) -> list[Envelope]:
    if not isinstance(data, list):
        raise WireError("events must be a list", field="events")
    out = []
    get_type = schema.get
    for d in data:
        # fast path for well-formed envelopes; anything odd goes the checked way
        if type(d) is list and len(d) == 5:
            tname, keys, src, seq, ts = d
            etype = get_type(tname) if type(tname) is str else None
            if (etype is not None and type(src) is str and type(seq) is int
                    and type(ts) is float):
                out.append(Envelope(decode_event_keys(etype, keys), src, seq, ts))
                continue
        out.append(decode_envelope(d, schema))
    return out


# ---------------------------------------------------------------------------------------
# Event blocks (columnar batches)

_I8 = np.dtype("<i8")
_F8 = np.dtype("<f8")
_I4 = np.dtype("<i4")


@dataclass(frozen=True, slots=True)
class _TypeInfo:
    etype: EventType
    ordered: bool
    """Every attribute has an ordered domain (keys fit one int64 matrix)."""
    lo: np.ndarray
    hi: np.ndarray


_TYPE_INFO: dict[int, _TypeInfo] = {}


def _type_info(etype: EventType) -> _TypeInfo:
    hit = _TYPE_INFO.get(id(etype))
    if hit is not None and hit.etype is etype:
        return hit
    b = _bounds(etype)
    # extended keys (absent, arrays, beyond int64) travel as lists, never as one matrix
    ordered = all(x is not None for x in b) and not etype.extended
    lo = np.array([x[0] if ordered and x is not None else 0 for x in b], np.int64)
    hi = np.array([x[1] if ordered and x is not None else 0 for x in b], np.int64)
    info = _TypeInfo(etype, ordered, lo, hi)
    _TYPE_INFO[id(etype)] = info
    return info


def _object_rows(rows: Sequence[tuple[Any, ...]], m: int) -> np.ndarray:
    """Key rows as an ``[n, m]`` object array, one key per cell (an array attribute's
    tuple stays one cell: numpy would read it as a row if given whole rows)."""
    keys = np.empty((len(rows), m), object)
    for i, r in enumerate(rows):
        for j, k in enumerate(r):
            keys[i, j] = k
    return keys


@dataclass(frozen=True, slots=True)
class Block:
    """Consecutive events of one type in columnar form (a decoded event block)."""

    etype: EventType
    keys: np.ndarray
    """``[n, attributes]`` keys in schema order: int64 when every attribute is ordered,
    else an object array (ints and strs)."""
    src: str | list[str]
    """The publisher of every row, or one per row."""
    seq: np.ndarray
    """int64 sequence numbers."""
    ts: np.ndarray
    """float64 publication times (seconds since the epoch)."""
    at: np.ndarray | None = None
    """Positions of the rows in the batch's event order (when it has several blocks)."""

    def __len__(self) -> int:
        return len(self.seq)

    @classmethod
    def of_events(cls, events: Sequence[Event], src: str | list[str],
                  seq: np.ndarray, ts: np.ndarray, at: np.ndarray | None = None) -> Block:
        """A block of events of one type (checked to share it)."""
        etype = events[0].etype
        if any(e.etype is not etype and e.etype.name != etype.name for e in events):
            raise WireError("a block holds events of one type only", field="type")
        rows = [e.keys for e in events]
        if _type_info(etype).ordered:
            keys = np.array(rows, np.int64).reshape(len(rows), len(etype.attributes))
        else:
            keys = _object_rows(rows, len(etype.attributes))
        return cls(etype, keys, src, seq, ts, at)

    def srcs(self) -> list[str]:
        """The publisher of each row."""
        return [self.src] * len(self) if isinstance(self.src, str) else self.src

    def events(self) -> list[Event]:
        """One :class:`Event` per row (for the slow paths and clients)."""
        et = self.etype
        return [Event(et, tuple(r)) for r in self.keys.tolist()]

    def envelopes(self) -> list[Envelope]:
        return [Envelope(e, s, q, t) for e, s, q, t in zip(
            self.events(), self.srcs(), self.seq.tolist(), self.ts.tolist(), strict=True)]

    def columns(self) -> dict[str, np.ndarray]:
        """``{attribute: keys}`` for ``CompiledIndex.match_columns``."""
        out: dict[str, np.ndarray] = {}
        for a in self.etype.attributes:
            col = self.keys[:, a.position]
            if col.dtype == object and not isinstance(a.domain, StringDomain):
                col = col.astype(np.int64)
            out[a.name] = col
        return out

    def take(self, rows: np.ndarray) -> Block:
        """The block of the given rows (sorted row indices)."""
        src = self.src if isinstance(self.src, str) else [self.src[i] for i in rows.tolist()]
        return Block(self.etype, self.keys[rows], src, self.seq[rows], self.ts[rows],
                     None if self.at is None else self.at[rows])

    def with_src(self, src: str) -> Block:
        return Block(self.etype, self.keys, src, self.seq, self.ts, self.at)


def encode_block(b: Block, counts: np.ndarray | None = None,
                 pids: list[str] | None = None) -> dict[str, Any]:
    """The wire form of a block; with ``counts``/``pids`` a client NOTIFY block."""
    n = len(b)
    keys: Any = (np.ascontiguousarray(b.keys, _I8).tobytes()
                 if b.keys.dtype != object else
                 [encode_keys(tuple(r)) for r in b.keys.tolist()] if b.etype.extended
                 else b.keys.tolist())
    d: dict[str, Any] = {"t": b.etype.name, "n": n, "k": keys, "src": b.src,
                         "seq": np.ascontiguousarray(b.seq, _I8).tobytes(),
                         "ts": np.ascontiguousarray(b.ts, _F8).tobytes()}
    if b.at is not None:
        d["at"] = np.ascontiguousarray(b.at, _I4).tobytes()
    if counts is not None:
        d["np"] = np.ascontiguousarray(counts, _I4).tobytes()
        d["p"] = pids if pids is not None else []
    return d


def group_by_type(events: Sequence[Event]) -> list[np.ndarray | None]:
    """Positions of the events of each type (first appearance order); ``[None]`` when
    every event has the same type (one block, no positions needed)."""
    if not events:
        return []
    first = events[0].etype
    if all(e.etype is first for e in events):
        return [None]
    return [np.array(g, np.int64) for g in positions_by_type(events).values()]


def blocks_of_envelopes(envs: Sequence[Envelope]) -> list[Block]:
    """Envelopes as blocks: one per event type, with positions when there are several."""
    out: list[Block] = []
    for at in group_by_type([e.event for e in envs]):
        run = list(envs) if at is None else [envs[i] for i in at.tolist()]
        srcs = [e.src for e in run]
        src: str | list[str] = srcs[0] if srcs.count(srcs[0]) == len(srcs) else srcs
        out.append(Block.of_events([e.event for e in run], src,
                                   np.array([e.seq for e in run], np.int64),
                                   np.array([e.ts for e in run], np.float64), at))
    return out


def encode_envelope_blocks(envs: Sequence[Envelope]) -> list[dict[str, Any]]:
    """Envelopes in the block wire form (what PUB and NOTIFY carry)."""
    return [encode_block(b) for b in blocks_of_envelopes(envs)]


def _buffer(d: dict[str, Any], name: str, dtype: np.dtype[Any], n: int) -> np.ndarray:
    v = d.get(name)
    if not isinstance(v, bytes) or len(v) != n * dtype.itemsize:
        raise WireError(f"event block field {name!r} must be {n} x {dtype.itemsize} bytes",
                        field=name)
    return np.frombuffer(v, dtype).astype(dtype.newbyteorder("="), copy=False)


def decode_block(d: Any, schema: Schema, *, notify: bool = False
                 ) -> tuple[Block, np.ndarray, list[str]]:
    """Check and build a block; with ``notify`` also its per-row profile ids.

    Returns the block, the number of profile ids per row and the ids (empty unless
    ``notify``). Raises :class:`WireError` naming the problem.
    """
    if not isinstance(d, dict):
        raise WireError("an event block must be a map")
    tname = d.get("t")
    etype = schema.get(tname) if isinstance(tname, str) else None
    if etype is None:
        raise WireError(f"unknown event type {tname!r}", field="type")
    n = d.get("n")
    if type(n) is not int or n < 0:
        raise WireError("event block field 'n' must be a row count", field="n")
    info = _type_info(etype)
    m = len(etype.attributes)
    k = d.get("k")
    if info.ordered:
        if not isinstance(k, bytes) or len(k) != n * m * 8:
            raise WireError(f"{etype.name} block keys must be {n} x {m} int64 values",
                            field="k")
        keys = np.frombuffer(k, _I8).astype(np.int64, copy=False).reshape(n, m)
        if n:
            bad = (keys < info.lo) | (keys > info.hi)
            if bad.any():
                r, c = (int(x) for x in np.argwhere(bad)[0])
                attr = etype.attributes[c]
                raise WireError(f"{etype.name}.{attr.name}: key {int(keys[r, c])} is "
                                f"outside {attr.domain.spec}", field=attr.name)
    else:
        if not isinstance(k, list) or len(k) != n:
            raise WireError(f"{etype.name} block keys must be a list of {n} rows",
                            field="k")
        keys = _object_rows([decode_event_keys(etype, row).keys for row in k], m)
    src = d.get("src")
    if not isinstance(src, str) and not (isinstance(src, list) and len(src) == n
                                         and all(type(s) is str for s in src)):
        raise WireError("event block field 'src' must be a string or one per row",
                        field="src")
    at = None if d.get("at") is None else _buffer(d, "at", _I4, n)
    block = Block(etype, keys, src, _buffer(d, "seq", _I8, n), _buffer(d, "ts", _F8, n), at)
    if not notify:
        return block, np.zeros(0, np.int32), []
    counts = _buffer(d, "np", _I4, n)
    pids = d.get("p")
    if (not isinstance(pids, list) or (n and counts.min() < 0)
            or len(pids) != int(counts.sum(dtype=np.int64))
            or not all(type(p) is str for p in pids)):
        raise WireError("notification block needs 'p': np[i] profile ids per row",
                        field="p")
    return block, counts, pids


def decode_batch(body: dict[str, Any], schema: Schema, *, notify: bool = False
                 ) -> list[tuple[Block, np.ndarray, list[str]]]:
    """The blocks of a PUB or NOTIFY body: ``blocks``, or ``events`` (envelope list)."""
    if "blocks" in body:
        blocks = body["blocks"]
        if not isinstance(blocks, list):
            raise WireError("'blocks' must be a list", field="blocks")
        return [decode_block(d, schema, notify=notify) for d in blocks]
    if notify:
        raise WireError("a notification needs 'blocks'", field="blocks")
    envs = decode_events(get(body, "events", list), schema)
    return [(b, np.zeros(0, np.int32), []) for b in blocks_of_envelopes(envs)]


def _rows(block: Block, counts: np.ndarray, pids: list[str]
          ) -> Iterator[tuple[Event, str, int, float, list[str]]]:
    at = 0
    for ev, src, seq, ts, k in zip(block.events(), block.srcs(), block.seq.tolist(),
                                   block.ts.tolist(), counts.tolist(), strict=True):
        yield ev, src, seq, ts, pids[at:at + k]
        at += k


def in_order(blocks: Sequence[tuple[Block, np.ndarray, list[str]]]
             ) -> Iterator[tuple[Event, str, int, float, list[str]]]:
    """The rows of a NOTIFY's blocks in publication order: ``(event, src, seq, ts, ids)``.

    Blocks with positions (``at``) are merged by them; otherwise block after block.
    """
    if len(blocks) < 2 or any(b.at is None for b, _, _ in blocks):
        for block, counts, pids in blocks:
            yield from _rows(block, counts, pids)
        return
    rows = [r for block, counts, pids in blocks for r in _rows(block, counts, pids)]
    keys = [k for b, _, _ in blocks for k in b.at.tolist()]  # type: ignore[union-attr]
    for i in sorted(range(len(rows)), key=keys.__getitem__):
        yield rows[i]


def notify_count(body: dict[str, Any]) -> int:
    """Notifications (profile ids) carried by a client NOTIFY body."""
    return sum(len(d.get("p", ())) for d in body.get("blocks", ()))


def split_block(d: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Cut an encoded block (of two rows or more) in two halves, rows in order."""
    n = d["n"]
    h = n // 2

    def cut(v: Any, width: int) -> tuple[Any, Any]:
        if isinstance(v, bytes):
            return v[:h * width], v[h * width:]
        return v[:h], v[h:]

    a: dict[str, Any] = {"t": d["t"], "n": h}
    b: dict[str, Any] = {"t": d["t"], "n": n - h}
    if "at" in d:
        a["at"], b["at"] = cut(d["at"], 4)
    a["k"], b["k"] = cut(d["k"], len(d["k"]) // n if isinstance(d["k"], bytes) else 0)
    if isinstance(d["src"], str):
        a["src"] = b["src"] = d["src"]
    else:
        a["src"], b["src"] = cut(d["src"], 0)
    a["seq"], b["seq"] = cut(d["seq"], 8)
    a["ts"], b["ts"] = cut(d["ts"], 8)
    if "np" in d:
        a["np"], b["np"] = cut(d["np"], 4)
        first = int(np.frombuffer(a["np"], _I4).sum())
        a["p"], b["p"] = d["p"][:first], d["p"][first:]
    return a, b
