"""The scanners' view of a schema and what a block's scanned profile rows become.

:class:`SchemaTables` is the schema as the compiled scanners of
:mod:`siftbus.match.scan_numba` and :mod:`siftbus.match.events_numba` read it;
:func:`string_conditions` and :func:`add_parts` turn one block's scanned profile rows
(string conditions, interval rows) into :class:`~siftbus.match.columns.ProfileColumns`
per event type. Apart from :mod:`siftbus.match.ingest`, which reads the files and hands
every line the scanners are not sure of to the specification, so that each module can be
read in one sitting.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from siftbus.match.columns import ProfileColumns, str_array
from siftbus.model import (
    DecimalDomain,
    EnumDomain,
    EventType,
    IntDomain,
    Profile,
    Schema,
    StringConstraint,
)

STRING_MATRIX_BYTES = 1 << 24
"""Strings of a block (an event attribute's values, profiles' string conditions) are cut
out of it as one byte matrix (rows x longest) when that is at most this large; else one
``decode`` each."""


@dataclass(frozen=True, slots=True)
class SchemaTables:
    """The schema as the scanners read it (see :mod:`siftbus.match.scan_numba`)."""

    types: tuple[EventType, ...]
    names: np.ndarray
    name_off: np.ndarray
    type_attr: np.ndarray
    kind: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    places: np.ndarray
    label_off: np.ndarray
    max_attrs: int

    @staticmethod
    @lru_cache(maxsize=16)
    def of(schema: Schema) -> SchemaTables:
        names: list[bytes] = [t.name.encode() for t in schema]
        type_attr = [0]
        kind: list[int] = []
        lo: list[int] = []
        hi: list[int] = []
        places: list[int] = []
        labels: list[tuple[str, ...]] = []
        for t in schema:
            for a in t.attributes:
                d = a.domain
                names.append(a.name.encode())
                kind.append(0 if isinstance(d, IntDomain) else 1 if isinstance(d, DecimalDomain)
                            else 2 if isinstance(d, EnumDomain) else 3)
                ordered = isinstance(d, IntDomain | DecimalDomain | EnumDomain)
                lo.append(d.min_key if ordered else 0)  # type: ignore[union-attr]
                hi.append(d.max_key if ordered else 0)  # type: ignore[union-attr]
                places.append(d.places if isinstance(d, DecimalDomain) else 0)
                labels.append(d.labels if isinstance(d, EnumDomain) else ())
            type_attr.append(len(kind))
        label_off = [len(names)]
        for ls in labels:
            names.extend(label.encode() for label in ls)
            label_off.append(len(names))
        off = np.zeros(len(names) + 1, np.int64)
        np.cumsum([len(n) for n in names], out=off[1:])
        return SchemaTables(tuple(schema), np.frombuffer(b"".join(names) or b"\0", np.uint8),
                            off, np.array(type_attr, np.int64), np.array(kind, np.int8),
                            np.array(lo, np.int64), np.array(hi, np.int64),
                            np.array(places, np.int64), np.array(label_off, np.int64),
                            max((len(t) for t in schema), default=1))

    def args(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                            np.ndarray, np.ndarray, np.ndarray, int]:
        """The tables in the order the scanners take them."""
        return (self.names, self.name_off, self.type_attr, self.kind, self.lo, self.hi,
                self.places, self.label_off, len(self.types))


def _spans_to_str(b: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """ASCII slices ``b[start:end]`` as a numpy unicode array, without a loop."""
    if not len(start):
        return str_array([])
    lens = end - start
    width = max(int(lens.max()), 1)
    idx = start[:, None] + np.arange(width)[None, :]
    inside = np.arange(width)[None, :] < lens[:, None]
    mat = np.where(inside, b[np.minimum(idx, len(b) - 1)], 0).astype(np.uint8)
    return np.ascontiguousarray(mat).view(f"S{width}").ravel().astype(f"U{width}")



def string_conditions(data: bytes, srows: np.ndarray,
                       cache: dict[tuple[int, str], StringConstraint]
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(line, attribute, constraint)`` of each string condition in the scanner's string
    rows, sorted by line and attribute; conditions written alike share one
    :class:`StringConstraint` (``cache``, by operator and text, kept across blocks), so
    one is made per distinct text, not per profile (and the index compiles each distinct
    one once: :func:`siftbus.match.cells.layout`)."""
    if not len(srows):
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, object)
    from siftbus.match.scan_numba import STR_IN, STR_NE  # once here, not per condition

    srows = srows[np.lexsort((srows[:, 1], srows[:, 0]))]  # stable: a set keeps its order
    line, attr = srows[:, 0], srows[:, 1]
    heads = np.flatnonzero(np.concatenate([[True], (line[1:] != line[:-1])
                                           | (attr[1:] != attr[:-1])]))
    ends = np.append(heads[1:], len(srows))
    # a condition's text: its values as written, from the first quote to the last
    texts = _decoded(data, srows[heads, 3] - 1, srows[ends - 1, 4] + 1)
    values: list[str] | None = None  # every value, decoded once, when one is needed
    cons = np.empty(len(heads), object)
    made: list[StringConstraint] = []
    for k, (op, text) in enumerate(zip(srows[heads, 2].tolist(), texts, strict=True)):
        con = cache.get((op, text))
        if con is None:
            if values is None:
                values = _decoded(data, srows[:, 3], srows[:, 4])
            vals = values[int(heads[k]):int(ends[k])]
            # already canonical (StringConstraint.make would change nothing): a set's
            # values, the one excluded value, or the prefix
            if op == STR_IN:
                con = StringConstraint(frozenset(vals))
            elif op == STR_NE:
                con = StringConstraint(None, "", frozenset(vals))
            else:
                con = StringConstraint(None, vals[0])
            cache[(op, text)] = con
        made.append(con)
    cons[:] = made
    return line[heads], attr[heads], cons


def _decoded(data: bytes, start: np.ndarray, end: np.ndarray) -> list[str]:
    """The ASCII slices ``data[start:end]`` as ``str``: one byte matrix when it is small
    enough (:data:`STRING_MATRIX_BYTES`), else one ``decode`` each."""
    if len(start) and int((end - start).max()) * len(start) <= STRING_MATRIX_BYTES:
        out: list[str] = _spans_to_str(np.frombuffer(data, np.uint8), start, end).tolist()
        return out
    return [data[a:b].decode("ascii") for a, b in zip(start.tolist(), end.tolist(),
                                                       strict=True)]


def add_parts(parts: dict[int, list[ProfileColumns]], tables: SchemaTables, b: np.ndarray,
               ok: np.ndarray, ok_ids: np.ndarray, sub_s: np.ndarray, sub_e: np.ndarray,
               ptype: np.ndarray, rows: np.ndarray,
               strings: tuple[np.ndarray, np.ndarray, np.ndarray],
               slow: list[tuple[int, Profile]]) -> None:
    """Columns per event type of one block's profiles (scanned and slow); ``strings``
    is :func:`string_conditions` of the block."""
    has_sub = sub_s[ok] >= 0
    any_sub = bool(has_sub.any())
    subs = np.full(len(ok), "", dtype=object)
    subs[has_sub] = _spans_to_str(b, sub_s[ok][has_sub], sub_e[ok][has_sub]).tolist()
    slot_in_type = np.full(len(ptype), -1, np.int64)
    # the rows and string conditions of valid lines, grouped by type once (stable: in
    # line order), not selected again from all of them for each type
    is_ok = np.zeros(len(ptype), bool)
    is_ok[ok] = True
    n_types = len(tables.types)
    rows = rows[is_ok[rows[:, 0]]] if len(rows) else rows
    row_by, row_at = _by_type(ptype[rows[:, 0]] if len(rows) else np.zeros(0, np.int32),
                              n_types)
    s_line, s_attr, s_con = strings
    s_by, s_at = _by_type(np.where(is_ok[s_line], ptype[s_line], n_types), n_types)
    for t, etype in enumerate(tables.types):
        of_t = ptype[ok] == t
        mine = ok[of_t]
        extra = [prof for _, prof in slow if prof.etype.name == etype.name]
        if len(mine):
            slot_in_type[mine] = np.arange(len(mine))
            rr = rows[row_by[row_at[t]:row_at[t + 1]]]
            ss = s_by[s_at[t]:s_at[t + 1]]
            if any_sub:
                names, codes = np.unique(subs[of_t].astype(str), return_inverse=True)
                if names[0] != "":
                    names = np.concatenate([[""], names])
                    codes = codes + 1
            else:  # no profile of the block names a subscriber: no sort of "" strings
                names, codes = np.array([""]), np.zeros(len(mine), np.int64)
            parts.setdefault(t, []).append(ProfileColumns(
                etype, ok_ids[of_t], codes.astype(np.int32),
                tuple(str(x) for x in names), slot_in_type[rr[:, 0]].astype(np.int32),
                rr[:, 1].astype(np.int16), rr[:, 2].copy(), rr[:, 3].copy(),
                slot_in_type[s_line[ss]].astype(np.int32), s_attr[ss].astype(np.int16),
                s_con[ss]))
        if extra:  # merged in line order, so that a file sorted by id stays sorted
            slow_cols = ProfileColumns.from_profiles(etype, extra)
            if len(mine):
                scanned = parts[t].pop()
                lines = np.concatenate([mine, [ln for ln, prof in slow
                                               if prof.etype.name == etype.name]])
                slow_cols = ProfileColumns.concat([scanned, slow_cols]).take(
                    np.argsort(lines, kind="stable"))
            parts.setdefault(t, []).append(slow_cols)


def _by_type(types: np.ndarray, n_types: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions grouped by type (stable), and where each type's start in them."""
    by = np.argsort(types, kind="stable")
    return by, np.searchsorted(types[by], np.arange(n_types + 1))


__all__ = ["STRING_MATRIX_BYTES", "SchemaTables", "add_parts", "string_conditions"]
