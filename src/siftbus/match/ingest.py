"""Profile and event files into columns at memory speed, agreeing with the specification.

:func:`load_profile_columns` turns a profile file into :class:`ProfileColumns` (one per
event type) and :func:`read_event_chunks` an event file into key columns, both without a
Python object per line for the common line. Each runs the compiled scanners of
:mod:`siftbus.match.scan_numba` over a whole file (or chunk) and hands every line they are
not sure about to the specification's own path, one line at a time:

* profiles: :func:`~siftbus.model.textio.decode_line` and
  :func:`~siftbus.lang.profile.iter_profile_lines` (the lark grammar, ``Profile.build``);
* events: :func:`~siftbus.model.textio.decode_line` and
  :func:`~siftbus.model.event.parse_event` (``parse_json_line``, ``event_from_dict``).

So every value, and every error with its file, line and column, is the specification's:
the scanners only ever accept lines they get right, and the first bad line of a file is
reported as ``load_profiles`` and ``read_events`` report it (duplicate profile ids
included). Which lines the scanners take is their business; what comes out is not
(``tests/match/test_ingest.py`` checks both paths against each other with hypothesis on
random and mutated lines).

When the kernels are not compiled (``SIFTBUS_KERNELS=python``, or ``auto`` on a small
file: :func:`siftbus.match.kernel.compiled_for`) the specification's path reads the whole
file.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from siftbus.errors import EventError, InputError, ProfileError, SiftbusError
from siftbus.lang.profile import (
    PROFILE_LIMITS,
    ProfileLimits,
    iter_profile_lines,
    load_profiles,
    read_profile_lines,
)
from siftbus.match import kernel
from siftbus.match.columns import ProfileColumns, str_array
from siftbus.match.scan_blocks import (
    STRING_MATRIX_BYTES,
    SchemaTables,
    _spans_to_str,
    add_parts,
    string_conditions,
)
from siftbus.model import (
    Event,
    EventType,
    Profile,
    Schema,
    StringConstraint,
    parse_event,
)
from siftbus.model.textio import BOM, TEXT_LIMITS, TextLimits, decode_line, read_lines

CHUNK_BYTES = 1 << 22
"""Bytes of an event file scanned at once (whole lines; a longer line extends the chunk)."""


def _too_long(n: int, source: str, kind: type[InputError], limits: TextLimits,
              limit_name: str) -> InputError:
    """The error :func:`read_lines` gives for line ``n`` longer than the limit."""
    fake = io.BytesIO(b"x" * (limits.max_line_bytes + 1))
    try:
        for _ in read_lines(fake, source=source, kind=kind, limits=limits,
                            limit_name=limit_name):
            pass
    except InputError as exc:
        exc.line = n
        return exc
    raise AssertionError("read_lines accepted a line over its limit")


# -- profiles ---------------------------------------------------------------------------


def load_profile_columns(path: str | os.PathLike[str], schema: Schema, *,
                         limits: ProfileLimits = PROFILE_LIMITS, fast: bool | None = None,
                         chunk_bytes: int = CHUNK_BYTES) -> list[ProfileColumns]:
    """The profiles of a profile file as columns, one :class:`ProfileColumns` per event
    type that has profiles; the first bad line raises exactly what
    :func:`~siftbus.lang.profile.load_profiles` raises.

    ``fast`` forces the scanners on or off (default: :func:`kernel.compiled_for`). The
    file is scanned ``chunk_bytes`` of whole lines at a time.
    """
    p = Path(path)
    source = str(p)
    use = kernel.compiled_for(p.stat().st_size if p.exists() else 0) if fast is None else fast
    if not use or schema.extended:  # the scanners read finite kinds only (issue 31)
        return _columns_of(load_profiles(p, schema, limits=limits))
    from siftbus.match.scan_numba import OK, SLOW, scan_profiles

    tables = SchemaTables.of(schema)
    strings: dict[tuple[int, str], StringConstraint] = {}
    text_limits = TextLimits(max_line_bytes=4 * limits.max_line)
    limit_name = f"ProfileLimits.max_line is {limits.max_line} characters"
    parts: dict[int, list[ProfileColumns]] = {}
    seen: list[tuple[np.ndarray, np.ndarray]] = []  # (line, id) of every valid profile
    error: SiftbusError | None = None
    line0 = 0
    for data in _line_blocks(p, source, ProfileError, chunk_bytes, text_limits.max_line_bytes):
        b = np.frombuffer(data, np.uint8)
        status, start, end, id_end, sub_s, sub_e, ptype, rows, r, srows, sr = scan_profiles(
            b, *tables.args(), limits.max_line, limits.max_conditions, limits.max_string,
            limits.max_number)
        slow: list[tuple[int, Profile]] = []
        for ln in np.flatnonzero(status == SLOW).tolist():
            raw = data[start[ln]:end[ln]]
            n = line0 + ln + 1
            try:
                if len(raw) > text_limits.max_line_bytes:
                    raise _too_long(n, source, ProfileError, text_limits, limit_name)
                text = decode_line(raw, source=source, line=n, kind=ProfileError)
            except InputError as exc:
                error = exc
                break
            for item in iter_profile_lines([(n, text)], schema, source=source,
                                           limits=limits):
                if isinstance(item, SiftbusError):
                    error = item
                else:
                    slow.append((ln, item))
            if error is not None:
                break
        upto = (error.line or 1) - 1 - line0 if error is not None else len(status)
        ok = np.flatnonzero(status[:upto] == OK)
        ok_ids = _spans_to_str(b, start[ok], id_end[ok])
        seen.append((ok + line0, ok_ids))
        if slow:
            seen.append((np.array([ln for ln, _ in slow], np.int64) + line0,
                         str_array([q.id for _, q in slow])))
        add_parts(parts, tables, b, ok, ok_ids, sub_s, sub_e, ptype, rows[:r],
                   string_conditions(data, srows[:sr], strings), slow)
        line0 += len(status)
        if error is not None:
            break
    last = (error.line or 1) - 1 if error is not None else line0
    dup = _first_duplicate(seen, last)
    if dup is not None:
        wanted = set(dup)
        texts = [(n, t) for n, t in read_profile_lines(p, limits=limits) if n - 1 in wanted]
        for item in iter_profile_lines(texts, schema, source=source, limits=limits):
            if isinstance(item, SiftbusError):
                raise item
        raise AssertionError("a duplicate id the specification accepts")
    if error is not None:
        raise error
    out = []
    for t in sorted(parts):
        out.append(ProfileColumns.concat(parts.pop(t)))  # each block's columns freed here
    return out


def _first_duplicate(seen: list[tuple[np.ndarray, np.ndarray]], last: int
                     ) -> tuple[int, int] | None:
    """(first line, repeating line) (from 0) of the first id used twice before ``last``."""
    if not seen:
        return None
    lines = np.concatenate([x for x, _ in seen])
    ids = np.concatenate([y for _, y in seen]) if len(seen) > 1 else seen[0][1]
    if len(lines) < 2:
        return None
    by_line = np.argsort(lines, kind="stable")
    lines, ids = lines[by_line], ids[by_line]
    _, first_at, inverse = np.unique(ids, return_index=True, return_inverse=True)
    again = np.flatnonzero(first_at[inverse] != np.arange(len(ids)))
    if not len(again) or lines[again[0]] >= last:
        return None
    k = int(again[0])
    return int(lines[first_at[inverse[k]]]), int(lines[k])


def _line_blocks(p: Path, source: str, kind: type[InputError], chunk_bytes: int,
                 max_line_bytes: int) -> Iterator[bytes]:
    """The file in blocks of whole lines (a BOM at its start removed); a line longer than
    ``max_line_bytes`` ends its block early (it is refused by the caller)."""
    try:
        fh = p.open("rb")
    except OSError:
        for _ in read_lines(p, source=source, kind=kind):  # raises its own error
            break
        raise
    with fh:
        carry = b""
        first = True
        while True:
            block = fh.read(chunk_bytes)
            data = carry + block if carry else block
            if first:
                first = False
                if data.startswith(BOM):
                    data = data[len(BOM):]
            if not block:
                if data:
                    yield data
                return
            cut = data.rfind(b"\n") + 1
            if cut == 0:  # no line end yet: a long line, read on (up to the limit)
                if len(data) <= max_line_bytes + 2:
                    carry = data
                    continue
                cut = len(data)
            carry = data[cut:]
            yield data[:cut]


def _columns_of(profiles: Sequence[Profile]) -> list[ProfileColumns]:
    by_type: dict[str, list[Profile]] = {}
    for p in profiles:
        by_type.setdefault(p.type_name, []).append(p)
    return [ProfileColumns.from_profiles(g[0].etype, g) for g in by_type.values()]


TEXTS_PER_SCAN = MAX_SCANNED_TEXT = 2048
"""Texts per scan of :func:`scan_profile_texts`, and its longest text (longer ones go to
the grammar): so the id columns of one scan, as wide as its longest id, stay small."""


def scan_profile_texts(texts: Sequence[object], schema: Schema, *,
                       limits: ProfileLimits = PROFILE_LIMITS, fast: bool | None = None
                       ) -> list[Profile | None]:
    """For each single profile line (a broker store's rows, say): either exactly the
    :class:`Profile` :func:`~siftbus.lang.profile.parse_profile` gives it (with these
    ``limits``), or ``None`` -- a blank, comment or bad line, one that is not a short
    single ASCII line, or one the scanner leaves to the specification -- for the caller
    to hand to ``parse_profile`` (which gives the value or the error). Never raises for a
    bad text.

    ``fast`` forces the scanner on or off (default: :func:`kernel.compiled_for` of the
    texts' total length); off, every answer is ``None``.
    """
    out: list[Profile | None] = [None] * len(texts)
    lines = [(i, t) for i, t in enumerate(texts)
             if type(t) is str and len(t) <= MAX_SCANNED_TEXT and t.isascii()
             and "\n" not in t and "\r" not in t]
    use = kernel.compiled_for(sum(len(t) + 1 for _, t in lines)) if fast is None else fast
    if not use or not lines or schema.extended:  # the scanners read finite kinds only
        return out
    from siftbus.match.scan_numba import OK, scan_profiles

    tables = SchemaTables.of(schema)
    strings: dict[tuple[int, str], StringConstraint] = {}
    for k in range(0, len(lines), TEXTS_PER_SCAN):
        part = lines[k:k + TEXTS_PER_SCAN]
        data = "".join(t + "\n" for _, t in part).encode("ascii")
        b = np.frombuffer(data, np.uint8)
        status, start, _, id_end, sub_s, sub_e, ptype, rows, r, srows, sr = scan_profiles(
            b, *tables.args(), limits.max_line, limits.max_conditions, limits.max_string,
            limits.max_number)
        ok = np.flatnonzero(status == OK)
        parts: dict[int, list[ProfileColumns]] = {}
        add_parts(parts, tables, b, ok, _spans_to_str(b, start[ok], id_end[ok]), sub_s,
                   sub_e, ptype, rows[:r], string_conditions(data, srows[:sr], strings), [])
        for t, (cols,) in parts.items():
            for ln, p in zip(ok[ptype[ok] == t].tolist(), cols.profiles(), strict=True):
                out[part[ln][0]] = p
    return out


# -- events -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TypeColumns:
    """The events of one type in a chunk: their positions and key columns."""

    etype: EventType
    positions: np.ndarray
    """int64 positions of the events in the chunk."""
    columns: dict[str, np.ndarray]
    """Attribute name -> int64 keys (ordered attributes) or strings (a numpy unicode
    array, or ``str`` objects)."""


@dataclass(frozen=True, slots=True)
class EventChunk:
    """Consecutive events of a file, as key columns per type."""

    first: int
    """Index (from 0) of the chunk's first event in the file."""
    n: int
    """Events in the chunk."""
    groups: tuple[TypeColumns, ...]
    bytes_read: int
    """Bytes of the file this chunk covers."""

    def events(self) -> list[Event]:
        """The events as :class:`Event` objects, in order (for matchers without columns)."""
        out: list[Event | None] = [None] * self.n
        for g in self.groups:
            cols = [g.columns[a.name].tolist() for a in g.etype.attributes]
            rows = zip(*cols, strict=True) if cols else [()] * len(g.positions)
            for pos, keys in zip(g.positions.tolist(), rows, strict=True):
                out[pos] = Event(g.etype, tuple(keys))
        return out  # type: ignore[return-value]


def _scanner_within(limits: TextLimits) -> bool:
    """Whether the event scanner accepts nothing these limits refuse: it takes numbers of
    up to ``MAX_DIGITS`` digits and flat objects (depth 1), so tighter JSON limits send
    every line to the specification."""
    from siftbus.match.scan_numba import MAX_DIGITS

    return limits.max_int_digits >= MAX_DIGITS


def read_event_chunks(path: str | os.PathLike[str], schema: Schema, *,
                      limits: TextLimits = TEXT_LIMITS, chunk_bytes: int = CHUNK_BYTES,
                      fast: bool | None = None) -> Iterator[EventChunk]:
    """The events of a JSON-lines file in chunks of key columns; the first bad line raises
    exactly what :func:`~siftbus.model.event.read_events` raises.

    ``fast`` forces the scanners on or off (default: :func:`kernel.compiled_for`).
    """
    p = Path(path)
    source = str(p)
    use = kernel.compiled_for(p.stat().st_size if p.exists() else 0) if fast is None else fast
    if not use or not _scanner_within(limits) or schema.extended:  # finite kinds only
        yield from _spec_chunks(p, schema, limits)
        return
    tables = SchemaTables.of(schema)
    line0 = 0
    first = 0
    for data in _line_blocks(p, source, EventError, chunk_bytes, limits.max_line_bytes):
        chunk, n_lines = _event_chunk(data, schema, tables, source, limits, line0, first)
        line0 += n_lines
        first += chunk.n
        yield chunk


@dataclass(frozen=True, slots=True)
class ScannedTexts:
    """What the compiled scanner is sure of in a list of single JSON lines, as columns."""

    rows: np.ndarray
    """int64 indices (ascending) of the texts that are good events."""
    types: np.ndarray
    """int64 per good text: its type's index in ``tables.types``."""
    keys: np.ndarray
    """int64 ``(len(rows), max attributes)``: the domain keys in schema order (string
    attributes' cells are meaningless: see :meth:`strings`)."""
    tables: SchemaTables
    text: np.ndarray
    """The scanned texts joined, their strings' escapes decoded (uint8; the string spans
    point into it)."""
    str_start: np.ndarray
    str_end: np.ndarray

    def strings(self, which: np.ndarray, position: int) -> np.ndarray:
        """The values (numpy unicode) of the string attribute at ``position`` of the good
        texts ``which`` (indices into ``rows``)."""
        return _spans_to_str(self.text, self.str_start[which, position],
                             self.str_end[which, position])


def scan_text_columns(texts: Sequence[str | bytes | None], schema: Schema, *,
                      limits: TextLimits = TEXT_LIMITS, fast: bool | None = None
                      ) -> ScannedTexts | None:
    """The good events among single JSON lines that the compiled scanner is sure of, as
    key columns (:class:`ScannedTexts`): exactly the events
    :func:`~siftbus.model.event.parse_event` gives those texts. Every other text -- a
    blank or bad line, one with non-ASCII text or an escape of NUL or beyond ASCII, or one
    the scanner leaves to the specification -- is left out, for the caller to hand to
    ``parse_event``. Never raises for a bad line; ``None`` when the scanner does not run.

    ``fast`` forces the scanner on or off (default: :func:`kernel.compiled_for` of the
    texts' total length).
    """
    # One text per line of the scanned buffer: texts that are not one ASCII line stay out.
    lines = [(i, t.encode("ascii") if isinstance(t, str) else t)
             for i, t in enumerate(texts) if t is not None and t.isascii()]
    lines = [(i, t) for i, t in lines if b"\n" not in t and b"\r" not in t]
    size = sum(len(t) + 1 for _, t in lines)
    use = kernel.compiled_for(size) if fast is None else fast
    if not use or not lines or not _scanner_within(limits) or schema.extended:
        return None
    from siftbus.match.events_numba import scan_events
    from siftbus.match.scan_numba import OK

    tables = SchemaTables.of(schema)
    data = b"\n".join(t for _, t in lines)
    status, _, _, etype, keys, str_s, str_e, text = scan_events(
        np.frombuffer(data, np.uint8), *tables.args(), tables.max_attrs,
        limits.max_line_bytes)
    ok = np.flatnonzero(status == OK)
    take = np.fromiter((i for i, _ in lines), np.int64, len(lines))
    return ScannedTexts(take[ok], etype[ok].astype(np.int64), keys[ok], tables, text,
                        str_s[ok], str_e[ok])


def scan_event_texts(texts: Sequence[str | bytes | None], schema: Schema, *,
                     limits: TextLimits = TEXT_LIMITS, fast: bool | None = None
                     ) -> list[Event | None]:
    """The events of single JSON lines (a Spark batch's texts, as ``str`` or UTF-8
    ``bytes``) that the compiled scanner is sure of, else ``None``: for each text, either
    exactly the :class:`Event`
    :func:`~siftbus.model.event.parse_event` gives it, or ``None`` -- a blank or bad line,
    one with non-ASCII text or an escape of NUL or beyond ASCII, or one the scanner leaves
    to the specification -- for the caller to hand to ``parse_event`` (which gives the value or
    the error). Never raises for a bad line.

    ``fast`` forces the scanner on or off (default: :func:`kernel.compiled_for` of the
    texts' total length); off, every answer is ``None``. The same scan as columns:
    :func:`scan_text_columns`.
    """
    out: list[Event | None] = [None] * len(texts)
    sc = scan_text_columns(texts, schema, limits=limits, fast=fast)
    if sc is None:
        return out
    tables = sc.tables
    strings = [[a.position for a in t.attributes
                if tables.kind[tables.type_attr[ti] + a.position] == 3]
               for ti, t in enumerate(tables.types)]
    data = sc.text.tobytes()
    for k, (i, t) in enumerate(zip(sc.rows.tolist(), sc.types.tolist(), strict=True)):
        et = tables.types[t]
        row: list[Any] = sc.keys[k, :len(et.attributes)].tolist()
        for q in strings[t]:
            row[q] = data[sc.str_start[k, q]:sc.str_end[k, q]].decode("ascii")
        out[i] = Event(et, tuple(row))
    return out


def _spec_chunks(path: Path, schema: Schema, limits: TextLimits,
                 size: int = 4096) -> Iterator[EventChunk]:
    """The specification's reader, in chunks of ``size`` events."""
    from siftbus.match.cells import events_to_columns
    from siftbus.model import read_events

    batch: list[Event] = []
    first = 0
    for ev in read_events(path, schema, limits=limits):
        batch.append(ev)
        if len(batch) >= size:
            yield _chunk_of(batch, first, events_to_columns)
            first += len(batch)
            batch = []
    if batch:
        yield _chunk_of(batch, first, events_to_columns)


def _chunk_of(events: list[Event], first: int, to_columns: Any) -> EventChunk:
    by_type: dict[str, list[int]] = {}
    for i, e in enumerate(events):
        by_type.setdefault(e.etype.name, []).append(i)
    groups = tuple(TypeColumns(events[idx[0]].etype, np.array(idx, np.int64),
                               to_columns(events[idx[0]].etype, [events[i] for i in idx]))
                   for idx in by_type.values())
    return EventChunk(first, len(events), groups, 0)


def _string_column(text: np.ndarray, lines: np.ndarray, s: np.ndarray, e: np.ndarray,
                   ok: np.ndarray) -> np.ndarray:
    """The values (scanned: ASCII, escapes decoded in ``text``) of one string attribute
    of a chunk's lines of one type: a numpy unicode array, or ``str`` objects when the
    values are long."""
    s = np.where(ok, s, 0)
    e = np.where(ok, e, 0)
    if len(s) and int((e - s).max()) * len(s) <= STRING_MATRIX_BYTES:
        return _spans_to_str(text, s, e)
    data = text.tobytes()
    col = np.empty(len(lines), object)
    col[:] = [data[x:y].decode("ascii") for x, y in zip(s.tolist(), e.tolist(), strict=True)]
    return col


def _event_chunk(data: bytes, schema: Schema, tables: SchemaTables, source: str,
                 limits: TextLimits, line0: int, first: int) -> tuple[EventChunk, int]:
    from siftbus.match.events_numba import scan_events

    b = np.frombuffer(data, np.uint8)
    status, start, end, etype, keys, str_s, str_e, decoded = scan_events(
        b, *tables.args(), tables.max_attrs, limits.max_line_bytes)
    ok_status, skip_status = 0, 1
    type_index = {t.name: i for i, t in enumerate(tables.types)}
    slow_events: dict[int, Event] = {}
    for ln in np.flatnonzero(status == 2).tolist():
        raw = data[start[ln]:end[ln]]
        n = line0 + ln + 1
        if len(raw) > limits.max_line_bytes:
            raise _too_long(n, source, EventError, limits, "TextLimits.max_line_bytes")
        text = decode_line(raw, source=source, line=n, kind=EventError)
        if not text.strip():
            status[ln] = skip_status
            continue
        ev = parse_event(text, schema, source=source, lineno=n, limits=limits)
        slow_events[ln] = ev
        etype[ln] = type_index[ev.etype.name]
    is_event = status != skip_status
    pos_of_line = np.cumsum(is_event) - 1
    groups = []
    for t, et in enumerate(tables.types):
        lines = np.flatnonzero(is_event & (etype == t))
        if not len(lines):
            continue
        cols: dict[str, np.ndarray] = {}
        slow_here = [ln for ln in lines.tolist() if ln in slow_events]
        for a in et.attributes:
            q = a.position
            if tables.kind[tables.type_attr[t] + q] == 3:
                col = _string_column(decoded, lines, str_s[lines, q], str_e[lines, q],
                                     status[lines] == ok_status)
            else:
                col = keys[lines, q].copy()
            if slow_here:
                if col.dtype.kind == "U":  # a slow line's string may be wider, or end in NUL
                    col = col.astype(object)
                where = np.searchsorted(lines, slow_here)
                for w, ln in zip(where.tolist(), slow_here, strict=True):
                    col[w] = slow_events[ln].keys[q]
            cols[a.name] = col
        groups.append(TypeColumns(et, pos_of_line[lines].astype(np.int64), cols))
    return EventChunk(first, int(is_event.sum()), tuple(groups), len(data)), len(status)
