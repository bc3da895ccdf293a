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

:func:`layout` derives the cells of every attribute from a list of profiles and the
*pieces*: for each constraint, the runs of consecutive cells it accepts.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np

from siftbus.errors import DomainError
from siftbus.model import Event, EventType, IntervalSet, Profile, StringConstraint, StringDomain


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

    def cell_of(self, key: object) -> int:
        """The cell of one key (int for ordered attributes, str for strings)."""
        if self.ordered:
            assert isinstance(key, int)
            return bisect_right(self.bounds_seq, key) - 1
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
            keys = np.asarray(values)
            if keys.dtype.kind == "O" and all(
                    isinstance(v, int) and not isinstance(v, bool) for v in keys):
                keys = keys.astype(np.int64)
            if keys.dtype.kind not in "iu":
                if keys.dtype.kind == "f" and np.all(np.isfinite(keys)) and np.all(
                        keys == np.round(keys)):
                    keys = keys.astype(np.int64)
                else:
                    raise DomainError(f"column {self.name!r} must hold integer keys, "
                                      f"got {keys.dtype}", field=self.name)
            if len(keys) and (keys.min() < self.min_key or keys.max() > self.max_key):
                bad = keys[(keys < self.min_key) | (keys > self.max_key)][0]
                raise DomainError(f"column {self.name!r}: key {int(bad)} is outside "
                                  f"{self.min_key}..{self.max_key}", field=self.name)
            return (np.searchsorted(self.bounds, keys, side="right") - 1).astype(np.int32)
        arr = np.asarray(values, dtype=object)
        if len(arr) == 0:
            return np.zeros(0, np.int32)
        for v in arr:
            if not isinstance(v, str):
                raise DomainError(f"column {self.name!r}: {v!r} is not a string",
                                  field=self.name)
        uniq, inverse = np.unique(arr.astype(str), return_inverse=True)
        table = np.array([self.cell_of(str(u)) for u in uniq], dtype=np.int32)
        return table[inverse.reshape(-1)]


@dataclass(frozen=True, slots=True)
class Pieces:
    """Per attribute: profile ``slots[i]`` accepts cells ``first[i]..last[i]`` (slot order)."""

    slots: np.ndarray
    """int32 profile slots, non-decreasing."""
    first: np.ndarray
    """int32 first cell of each run."""
    last: np.ndarray
    """int32 last cell of each run (inclusive)."""


def layout(etype: EventType, profiles: Sequence[Profile]) -> tuple[list[AttributeCells],
                                                                   list[Pieces]]:
    """Cells and pieces of every attribute for ``profiles`` (slot = index in the list)."""
    m = len(etype.attributes)
    # One flat comprehension and one fromiter: about 5x faster than per-attribute appends.
    recs = [(c.position, iv[0], iv[1], slot)
            for slot, p in enumerate(profiles) for c in p.conditions
            if type(c.constraint) is IntervalSet for iv in c.constraint.intervals]
    flat = np.fromiter(chain.from_iterable(recs), dtype=np.int64,
                       count=4 * len(recs)).reshape(-1, 4)
    del recs
    by_attr = np.argsort(flat[:, 0], kind="stable")  # keeps slot order within an attribute
    flat = flat[by_attr]
    starts = np.searchsorted(flat[:, 0], np.arange(m + 1))
    strings: list[list[tuple[int, StringConstraint]]] = [[] for _ in range(m)]
    if any(isinstance(a.domain, StringDomain) for a in etype.attributes):
        for slot, p in enumerate(profiles):
            for c in p.conditions:
                if type(c.constraint) is StringConstraint:
                    strings[c.position].append((slot, c.constraint))
    cells: list[AttributeCells] = []
    pieces: list[Pieces] = []
    for attr in etype.attributes:
        pos = attr.position
        if isinstance(attr.domain, StringDomain):
            ac, pc = _string_layout(attr.name, pos, strings[pos])
        else:
            part = flat[starts[pos]:starts[pos + 1]]
            ac, pc = _ordered_layout(attr.name, pos, attr.domain.min_key, attr.domain.max_key,
                                     part[:, 3].astype(np.int32), part[:, 1].copy(),
                                     part[:, 2].copy())
        cells.append(ac)
        pieces.append(pc)
    return cells, pieces


def _ordered_layout(name: str, pos: int, min_key: int, max_key: int, slots: np.ndarray,
                    lo: np.ndarray, hi: np.ndarray) -> tuple[AttributeCells, Pieces]:
    ends = hi + 1
    bounds = np.unique(np.concatenate([np.array([min_key], np.int64), lo,
                                       ends[ends <= max_key]]))
    first = (np.searchsorted(bounds, lo, side="right") - 1).astype(np.int32)
    last = (np.searchsorted(bounds, hi, side="right") - 1).astype(np.int32)
    cells = AttributeCells(name, pos, True, min_key, max_key, bounds, {}, {}, (), len(bounds),
                           tuple(bounds.tolist()))
    return cells, Pieces(slots, first, last)


def _string_layout(name: str, pos: int, cons: list[tuple[int, StringConstraint]]
                   ) -> tuple[AttributeCells, Pieces]:
    exact_names: set[str] = set()
    prefix_names: set[str] = {""}
    for _, con in cons:
        if con.allowed is not None:
            exact_names.update(con.allowed)
        else:
            exact_names.update(con.excluded)
            prefix_names.add(con.prefix)
    exact = {s: i for i, s in enumerate(sorted(exact_names))}
    base = len(exact)
    prefixes = {s: base + i for i, s in enumerate(sorted(prefix_names))}
    # One representative per cell: an exact string, or the prefix itself for the class of
    # unnamed strings (it satisfies exactly the prefix conditions it starts with).
    reps: list[tuple[int, str, bool]] = [(c, s, True) for s, c in exact.items()]
    reps += [(c, s, False) for s, c in prefixes.items()]
    by_prefix: dict[str, list[tuple[int, frozenset[str]]]] = {}
    by_value: dict[str, list[int]] = {}
    for slot, con in cons:
        if con.allowed is not None:
            for s in con.allowed:
                by_value.setdefault(s, []).append(slot)
        else:
            by_prefix.setdefault(con.prefix, []).append((slot, con.excluded))
    plens = sorted({len(s) for s in by_prefix}, reverse=True)
    pairs_slot: list[int] = []
    pairs_cell: list[int] = []
    for cell, rep, is_exact in reps:
        if is_exact:
            for slot in by_value.get(rep, ()):
                pairs_slot.append(slot)
                pairs_cell.append(cell)
        for n in plens:
            if len(rep) < n:
                continue
            for slot, excluded in by_prefix.get(rep[:n], ()):
                if is_exact and rep in excluded:
                    continue
                pairs_slot.append(slot)
                pairs_cell.append(cell)
    ps = np.array(pairs_slot, np.int32)
    pc = np.array(pairs_cell, np.int32)
    order = np.lexsort((pc, ps))
    cells = AttributeCells(name, pos, False, 0, 0, np.zeros(0, np.int64), exact, prefixes,
                           tuple(sorted({len(s) for s in prefixes if s}, reverse=True)),
                           base + len(prefixes))
    return cells, Pieces(ps[order], pc[order], pc[order])


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
