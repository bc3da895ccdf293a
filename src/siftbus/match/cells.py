"""Elementary cells of one attribute: where an event's value falls, per attribute.

For an ordered attribute the cells are the elementary intervals between the boundary
points of all conditions on it (PrimAS' ``Arr``): every condition accepts either all
or none of the keys of a cell. A cell is named by its lower bound; cell ``i`` is
``bounds[i] .. bounds[i+1]-1``.

For a string attribute the cells are equivalence classes of strings: one cell per
string that some condition names (an ``=``/``in`` value or a ``!=`` exclusion), and one
cell per prefix (including ``""``) for all other strings, keyed by the longest
condition prefix they start with. Two strings in the same cell satisfy exactly the
same conditions.

:func:`layout` derives the cells of every attribute from columnar profiles and the
*pieces*: for each constraint, the runs of consecutive cells it accepts.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from siftbus.errors import DomainError
from siftbus.match.columns import ProfileColumns, str_array
from siftbus.model import Event, EventType, StringConstraint, StringDomain


@dataclass(frozen=True, slots=True)
class AttributeCells:
    """The cells of one attribute."""

    name: str
    """Attribute name."""
    position: int
    """Attribute position in its event type."""
    ordered: bool
    """Integer keys (interval cells) or strings (class cells)."""
    min_key: int
    """Smallest key of an ordered domain (0 for strings)."""
    max_key: int
    """Largest key of an ordered domain (0 for strings)."""
    bounds: np.ndarray
    """Ordered: int64 lower bounds of the cells, ``bounds[0] == min_key``."""
    exact: Mapping[str, int]
    """String: cell of each string some condition names."""
    prefixes: Mapping[str, int]
    """String: cell of the other strings, by the longest condition prefix they start with."""
    prefix_lens: tuple[int, ...]
    """String: the lengths of the condition prefixes, longest first."""
    n_cells: int
    """Number of cells."""
    bounds_seq: tuple[int, ...] = ()
    """Ordered: ``bounds`` as a tuple (bisecting one key is faster on it than on an array)."""
    table: np.ndarray | None = None
    """Ordered, small domains: int32 cell of every key (``key - min_key``); a column's
    cells are then one gather instead of a binary search per key."""

    def cell_of(self, key: object) -> int:
        """The cell of one key (int for ordered attributes, str for strings)."""
        if self.ordered:
            assert isinstance(key, int)
            if self.bounds_seq:
                return bisect_right(self.bounds_seq, key) - 1
            return int(np.searchsorted(self.bounds, key, side="right")) - 1
        assert isinstance(key, str)
        c = self.exact.get(key)
        if c is not None:
            return c
        for n in self.prefix_lens:
            c = self.prefixes.get(key[:n]) if len(key) >= n else None
            if c is not None:
                return c
        return self.prefixes[""]

    def cells_of(self, values: Any) -> np.ndarray:
        """The cells of a column of keys (int64 array or str array); checks the domain."""
        if self.ordered:
            keys = ordered_keys(self.name, values, self.min_key, self.max_key)
            if self.table is not None:
                return self.table[keys - self.min_key]
            return (np.searchsorted(self.bounds, keys, side="right") - 1).astype(np.int32)
        if isinstance(values, np.ndarray) and values.dtype.kind == "U":
            # a numpy unicode array holds nothing but strings: the cells by binary search
            # (unless a condition's string ends in NUL, which such an array cannot hold)
            tables = _string_tables(self)
            if tables is not None:
                return _string_cells(values, *tables)
            arr = values
        else:
            arr = string_keys(self.name, values)
        if len(arr) == 0:
            return np.zeros(0, np.int32)
        uniq, inverse = np.unique(arr.astype(str), return_inverse=True)
        cell_of = self.cell_of
        table = np.array([cell_of(u) for u in uniq.tolist()], dtype=np.int32)
        return table[inverse.reshape(-1)]


_TABLES: dict[int, tuple[AttributeCells, Any]] = {}
"""Per string attribute's cells (by identity; held, so the id is not reused): sorted
unicode arrays of its named strings and of its prefixes by length, with their cells."""


def _string_tables(ac: AttributeCells) -> Any:
    got = _TABLES.get(id(ac))
    if got is not None and got[0] is ac:
        return got[1]
    if len(_TABLES) >= 32:  # a broker recompiles: old cells are held until cleared
        _TABLES.clear()
    names = list(ac.exact) + list(ac.prefixes)
    tables: Any = None
    if not any(n.endswith("\0") for n in names):
        ex = sorted(ac.exact.items())
        by_len = [sorted((p, c) for p, c in ac.prefixes.items() if len(p) == n)
                  for n in ac.prefix_lens]
        tables = (str_array([k for k, _ in ex]), np.array([c for _, c in ex], np.int32),
                  [(n, str_array([k for k, _ in ps]), np.array([c for _, c in ps], np.int32))
                   for n, ps in zip(ac.prefix_lens, by_len, strict=True)],
                  ac.prefixes[""])
    _TABLES[id(ac)] = (ac, tables)
    return tables


def _hits(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which ``values`` are among the sorted ``keys``, and where."""
    if not len(keys):
        return np.zeros(len(values), bool), np.zeros(len(values), np.int64)
    pos = np.minimum(np.searchsorted(keys, values), len(keys) - 1)
    return keys[pos] == values, pos


def _string_cells(values: np.ndarray, ex_keys: np.ndarray, ex_cells: np.ndarray,
                  by_len: list[tuple[int, np.ndarray, np.ndarray]], other: int) -> np.ndarray:
    """:meth:`AttributeCells.cell_of` of every value: its named string's cell, else the
    cell of its longest condition prefix, else the cell of ``""``."""
    out = np.full(len(values), other, np.int32)
    hit, pos = _hits(ex_keys, values)
    out[hit] = ex_cells[pos[hit]]
    todo = ~hit
    lens = np.char.str_len(values)
    for n, keys, cells in by_len:  # longest first
        at = np.flatnonzero(todo & (lens >= n))
        if not len(at):
            continue
        hit, pos = _hits(keys, values[at].astype(f"U{n}"))
        out[at[hit]] = cells[pos[hit]]
        todo[at[hit]] = False
    return out


def ordered_keys(name: str, values: Any, min_key: int, max_key: int) -> np.ndarray:
    """A column of ordered keys as int64, checked: integers (ints, or floats without a
    fraction) within ``min_key..max_key``; :class:`DomainError` names the column."""
    keys = np.asarray(values)
    if keys.dtype.kind == "O" and all(
            isinstance(v, int) and not isinstance(v, bool) for v in keys):
        keys = keys.astype(np.int64)
    if keys.dtype.kind not in "iu":
        if keys.dtype.kind == "f" and np.all(np.isfinite(keys)) and np.all(
                keys == np.round(keys)):
            keys = keys.astype(np.int64)
        else:
            raise DomainError(f"column {name!r} must hold integer keys, got {keys.dtype}",
                              field=name)
    if len(keys) and (keys.min() < min_key or keys.max() > max_key):
        bad = keys[(keys < min_key) | (keys > max_key)][0]
        raise DomainError(f"column {name!r}: key {int(bad)} is outside "
                          f"{min_key}..{max_key}", field=name)
    return keys.astype(np.int64, copy=False)


def string_keys(name: str, values: Any) -> np.ndarray:
    """A column of string keys as an object array, checked: every value a ``str``."""
    arr = np.asarray(values, dtype=object)
    for v in arr:
        if not isinstance(v, str):
            raise DomainError(f"column {name!r}: {v!r} is not a string", field=name)
    return arr


@dataclass(frozen=True, slots=True)
class Pieces:
    """Per attribute: profile ``slots[i]`` accepts cells ``first[i]..last[i]`` (slot order)."""

    slots: np.ndarray
    """int32 profile slots, non-decreasing."""
    first: np.ndarray
    """int32 first cell of each run."""
    last: np.ndarray
    """int32 last cell of each run (inclusive)."""


def layout(cols: ProfileColumns) -> tuple[list[AttributeCells], list[Pieces]]:
    """Cells and pieces of every attribute for the profiles of ``cols`` (slot = their
    position in ``cols``)."""
    etype = cols.etype
    m = len(etype.attributes)
    by_attr = np.argsort(cols.iv_attr, kind="stable")  # keeps slot order within an attribute
    attr = cols.iv_attr[by_attr]
    starts = np.searchsorted(attr, np.arange(m + 1))
    slots, lo, hi = cols.iv_slot[by_attr], cols.iv_lo[by_attr], cols.iv_hi[by_attr]
    s_by = np.argsort(cols.st_attr, kind="stable")  # slot order within an attribute
    s_starts = np.searchsorted(cols.st_attr[s_by], np.arange(m + 1))
    s_slot, s_con = cols.st_slot[s_by], cols.st_con[s_by]
    cells: list[AttributeCells] = []
    pieces: list[Pieces] = []
    for attr_ in etype.attributes:
        pos = attr_.position
        if isinstance(attr_.domain, StringDomain):
            a, b = s_starts[pos], s_starts[pos + 1]
            ac, pc = _string_layout(attr_.name, pos, s_slot[a:b], s_con[a:b])
        else:
            a, b = starts[pos], starts[pos + 1]
            ac, pc = _ordered_layout(attr_.name, pos, attr_.domain.min_key,
                                     attr_.domain.max_key, slots[a:b].astype(np.int32),
                                     lo[a:b], hi[a:b])
        cells.append(ac)
        pieces.append(pc)
    return cells, pieces


SEQ_MAX = 1 << 12
"""Attributes of at most this many cells keep their bounds as a tuple too (bisecting one
key is faster on it than on an array); a tuple of Python ints costs ~40 bytes a cell."""

TABLE_MAX = 1 << 16
"""Ordered domains of at most this many keys get a key -> cell table (256 KiB at most)."""


def _ordered_layout(name: str, pos: int, min_key: int, max_key: int, slots: np.ndarray,
                    lo: np.ndarray, hi: np.ndarray) -> tuple[AttributeCells, Pieces]:
    size = max_key - min_key + 1
    if size <= max(1 << 16, 4 * len(lo)):
        # A small domain: mark the cell starts on it, number them by a running count.
        mark = np.zeros(size + 1, bool)
        mark[0] = True
        mark[lo - min_key] = True
        mark[hi + 1 - min_key] = True
        mark = mark[:size]
        cell_no = np.cumsum(mark, dtype=np.int32) - 1
        bounds = np.flatnonzero(mark).astype(np.int64) + min_key
        first = cell_no[lo - min_key]
        last = cell_no[hi - min_key]
        table = cell_no if size <= TABLE_MAX else None
    else:
        table = None
        ends = hi + 1
        bounds = np.unique(np.concatenate([np.array([min_key], np.int64), lo,
                                           ends[ends <= max_key]]))
        first = (np.searchsorted(bounds, lo, side="right") - 1).astype(np.int32)
        last = (np.searchsorted(bounds, hi, side="right") - 1).astype(np.int32)
    cells = AttributeCells(name, pos, True, min_key, max_key, bounds, {}, {}, (), len(bounds),
                           tuple(bounds.tolist()) if len(bounds) <= SEQ_MAX else (), table)
    return cells, Pieces(slots, first, last)


def _string_layout(name: str, pos: int, con_slot: np.ndarray, cons: np.ndarray
                   ) -> tuple[AttributeCells, Pieces]:
    """Cells and pieces of one string attribute from its conditions: profile slots
    (non-decreasing) and their :class:`StringConstraint` objects."""
    # Profiles written alike share one constraint object (the scanners make one per
    # distinct text): each distinct one is laid out once, its runs repeated per profile.
    # The objects are told apart by identity, in first-seen order (held by ``cons``).
    ident = np.fromiter(map(id, cons), np.int64, len(cons))
    _, first_at, which = np.unique(ident, return_index=True, return_inverse=True)
    seen = np.argsort(first_at, kind="stable")
    renumber = np.empty(len(seen), np.int64)
    renumber[seen] = np.arange(len(seen))
    which = renumber[which.reshape(-1)]
    distinct: list[StringConstraint] = cons[first_at[seen]].tolist()
    # every named string of every distinct constraint (a set's values, a prefix's
    # exclusions), with its constraint
    is_set = np.array([con.allowed is not None for con in distinct], bool)
    named: list[str] = []
    counts = []
    for con in distinct:
        vals = con.allowed if con.allowed is not None else con.excluded
        named.extend(vals)
        counts.append(len(vals))
    owner = np.repeat(np.arange(len(distinct), dtype=np.int64),
                      np.array(counts, np.int64)) if distinct else np.zeros(0, np.int64)
    prefix_names = {""} | {con.prefix for con in distinct if con.allowed is None}
    # Cells are numbered in code point order of their representatives (an exact string,
    # or the prefix itself for the class of unnamed strings starting with it): the cells
    # whose representatives start with a prefix are then one block, and a prefix
    # condition accepts that block less its excluded strings -- a few runs, not one piece
    # per cell (100,000 mixed profiles: 45 million pieces before).
    names = set(named)
    reps = [(s, is_exact) for s in sorted(names | prefix_names)  # a prefix before
            for is_exact in (False, True)                       # the same string
            if (s in names if is_exact else s in prefix_names)]
    keys = [s for s, _ in reps]
    exact = {s: i for i, (s, is_exact) in enumerate(reps) if is_exact}
    prefixes = {s: i for i, (s, is_exact) in enumerate(reps) if not is_exact}
    cell = np.fromiter((exact[s] for s in named), np.int64, len(named))
    # a set: its cells in runs of consecutive cells
    sel = np.flatnonzero(is_set[owner])
    sel = sel[np.lexsort((cell[sel], owner[sel]))]
    o, c = owner[sel], cell[sel]
    head = np.ones(len(sel), bool)
    head[1:] = (o[1:] != o[:-1]) | (c[1:] != c[:-1] + 1)
    heads = np.flatnonzero(head)
    tails = np.append(heads[1:], len(sel))[:len(heads)] - 1
    set_owner, set_first, set_last = o[heads], c[heads], c[tails]
    # a prefix: its block less its excluded cells, i.e. the runs between them
    blocks: dict[str, tuple[int, int]] = {}
    lo = np.zeros(len(distinct), np.int64)
    hi = np.zeros(len(distinct), np.int64)
    for k in np.flatnonzero(~is_set).tolist():
        pre = distinct[k].prefix
        block = blocks.get(pre)
        if block is None:
            block = blocks[pre] = _block(keys, pre)
        lo[k], hi[k] = block
    pk = np.flatnonzero(~is_set)
    sel = np.flatnonzero(~is_set[owner])
    sel = sel[(cell[sel] >= lo[owner[sel]]) & (cell[sel] <= hi[owner[sel]])]
    eo, ec = owner[sel], cell[sel]
    # per prefix constraint, in order: starts lo, c1 + 1, ...; ends c1 - 1, ..., hi
    s_owner = np.concatenate([pk, eo])
    s_at = np.concatenate([lo[pk], ec + 1])
    s_rank = np.concatenate([np.full(len(pk), -1, np.int64), ec])
    e_rank = np.concatenate([np.full(len(pk), len(keys), np.int64), ec])
    e_at = np.concatenate([hi[pk], ec - 1])
    by_start = np.lexsort((s_rank, s_owner))
    by_end = np.lexsort((e_rank, s_owner))
    pre_owner, pre_first, pre_last = s_owner[by_start], s_at[by_start], e_at[by_end]
    keep = pre_first <= pre_last
    run_owner = np.concatenate([set_owner, pre_owner[keep]])
    run_first = np.concatenate([set_first, pre_first[keep]])
    run_last = np.concatenate([set_last, pre_last[keep]])
    order = np.lexsort((run_first, run_owner))
    run_owner, run_first, run_last = run_owner[order], run_first[order], run_last[order]
    n_runs = np.bincount(run_owner, minlength=len(distinct))
    at = np.concatenate([[0], np.cumsum(n_runs)])  # runs of distinct k: at[k]:at[k + 1]
    count = n_runs[which]
    ps = np.repeat(con_slot.astype(np.int32), count)
    # each profile's runs: its distinct constraint's, in order
    run = np.repeat(at[:-1][which] - np.cumsum(count) + count, count) + np.arange(len(ps))
    # already in (slot, first cell) order: slots come non-decreasing, one condition
    # each, and a distinct constraint's runs by first cell
    pf = run_first[run].astype(np.int32)
    pl = run_last[run].astype(np.int32)
    cells = AttributeCells(name, pos, False, 0, 0, np.zeros(0, np.int64), exact, prefixes,
                           tuple(sorted({len(s) for s in prefixes if s}, reverse=True)),
                           len(reps))
    return cells, Pieces(ps, pf, pl)


def _block(keys: list[str], prefix: str) -> tuple[int, int]:
    """First and last index of the sorted ``keys`` that start with ``prefix`` (one block:
    ``prefix`` itself is among them, as the representative of its class)."""
    lo = bisect_left(keys, prefix)
    a, b = lo, len(keys)
    while a < b:  # the block's end: the first key after it that does not start with it
        mid = (a + b) // 2
        if keys[mid].startswith(prefix):
            a = mid + 1
        else:
            b = mid
    return lo, a - 1


def event_cells(cells: Sequence[AttributeCells], event: Event) -> list[int]:
    """The cell of each attribute value of one event."""
    keys = event.keys
    return [ac.cell_of(keys[ac.position]) for ac in cells]


def column_cells(cells: Sequence[AttributeCells], columns: Any, n_rows: int | None = None
                 ) -> np.ndarray:
    """int32 ``[rows, attributes]`` cells of columnar events (dict of arrays or RecordBatch)."""
    cols = as_columns(columns, [ac.name for ac in cells])
    n = n_rows if n_rows is not None else (len(next(iter(cols.values()))) if cols else 0)
    out = np.empty((n, len(cells)), np.int32)
    for ac in cells:
        col = cols[ac.name]
        if len(col) != n:
            raise DomainError(f"column {ac.name!r} has {len(col)} rows, expected {n}",
                              field=ac.name)
        out[:, ac.position] = ac.cells_of(col)
    return out


def n_rows(columns: Any) -> int:
    """Rows of columnar events (a mapping of arrays or a pyarrow RecordBatch)."""
    if hasattr(columns, "num_rows"):
        return int(columns.num_rows)
    for v in columns.values():
        return len(v)
    return 0


def as_columns(columns: Any, names: Sequence[str]) -> dict[str, Any]:
    """``{name: array}`` for the named attributes; accepts a mapping or a pyarrow batch."""
    out: dict[str, Any] = {}
    if hasattr(columns, "schema") and hasattr(columns, "column"):  # pyarrow RecordBatch/Table
        present = set(columns.schema.names)
        for name in names:
            if name not in present:
                raise DomainError(f"the record batch has no column {name!r}", field=name)
            col = columns.column(name)
            if col.null_count:
                raise DomainError(f"column {name!r} holds nulls", field=name)
            out[name] = col.to_numpy(zero_copy_only=False)
        return out
    for name in names:
        if name not in columns:
            raise DomainError(f"no column {name!r} among {sorted(columns)}", field=name)
        out[name] = columns[name]
    return out


def events_to_columns(etype: EventType, events: Sequence[Event]) -> dict[str, np.ndarray]:
    """Columnar form of events of one type: int64 keys for ordered attributes, str objects
    for strings. Raises :class:`DomainError` for an event of another type."""
    for e in events:
        if e.etype.name != etype.name:
            raise DomainError(f"event of type {e.etype.name} among {etype.name} events",
                              field="type")
    out: dict[str, np.ndarray] = {}
    rows = [e.keys for e in events]
    if rows and not any(isinstance(a.domain, StringDomain) for a in etype.attributes):
        matrix = np.array(rows, dtype=np.int64)  # one C-level pass over all keys
        return {a.name: np.ascontiguousarray(matrix[:, a.position])
                for a in etype.attributes}
    for attr in etype.attributes:
        i = attr.position
        if isinstance(attr.domain, StringDomain):
            col = np.empty(len(rows), dtype=object)
            col[:] = [r[i] for r in rows]
            out[attr.name] = col
        else:
            out[attr.name] = np.fromiter((r[i] for r in rows), dtype=np.int64, count=len(rows))
    return out
