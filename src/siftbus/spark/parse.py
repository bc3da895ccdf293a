"""Parse and validate events into the keyed layout the match stage reads
(:mod:`~siftbus.spark.keyed` defines it and builds its batches).

The keyed layout is one row per event with its domain keys in schema order, split by kind:

=========  ==================  =====================================================
column     type                meaning
=========  ==================  =====================================================
source     string              the file (or stream) the event came from
event      int64               0-based index of the event in its source (blank lines are
                               no events: the numbers ``siftbus match`` prints)
type       string              event type name
ikeys      list<int64>         keys of the ordered attributes (int, scaled decimal,
                               enum ordinal), in schema order
skeys      list<string>        values of the string attributes, in schema order
text       string              the event as it arrived (for delivery); may be null
=========  ==================  =====================================================

Bad records never vanish: they leave the parse stage with an ``error`` (the reason, as
:class:`~siftbus.errors.SiftbusError` words it), a ``line`` and a ``column``, and the
pipeline writes them to the dead-letter output. The functions here work on Arrow record
batches and need no JVM; :mod:`siftbus.spark.pipeline` runs them inside ``mapInArrow``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from siftbus.errors import EventError, SiftbusError
from siftbus.match.ingest import ScannedTexts, scan_text_columns
from siftbus.model import EventType, event_from_dict
from siftbus.model.event import parse_event
from siftbus.model.textio import TEXT_LIMITS, MiB, TextLimits, decode_line, parse_json_line
from siftbus.spark.keyed import (
    KEYED_DDL,
    PARSED_DDL,
    PARSED_SCHEMA,
    ParsedRows,
    TypeLayout,
    event_to_keyed,
    keyed_to_event,
    layouts_for,
    schema_from_text,
)
from siftbus.spark.ranges import line_batches
from siftbus.wire import cloudevents


def parse_text_batch(batch: pa.RecordBatch, schema_text: str,
                     limits: TextLimits = TEXT_LIMITS,
                     counted: dict[tuple[str | None, int], tuple[int, int]] | None = None,
                     ) -> pa.RecordBatch:
    """Parse JSON-lines rows ``(source, line, text)`` or ``(source, line, events_before,
    text)`` (see :func:`~siftbus.spark.sources.number_lines`); ``line`` counts from 1.

    The rules are those of ``siftbus check`` and ``match`` (:mod:`siftbus.model.textio`):
    Spark's text reader already skips a BOM at the start of a file and ends lines at
    ``\\n``, ``\\r\\n`` and ``\\r``; here each line must be UTF-8 and at most
    ``limits.max_line_bytes`` long, and :func:`~siftbus.model.event.parse_event` applies
    the JSON limits (depth, digits, no NaN, no repeated key, no lone surrogate). Blank
    lines are no events and are dropped; every other line yields one row, good or bad
    (with the reason ``siftbus check`` gives): a bad line never stops the job. The lines
    the compiled scanner is sure of skip ``parse_event`` and become rows column-wise,
    from the scanner's key matrix (:func:`~siftbus.match.ingest.scan_text_columns`: the
    same events, proven in tests/match/test_ingest.py, and the same rows, proven in
    tests/spark/test_stages.py); only their numbering is a loop over rows. Every other
    line, and every error, is ``parse_event``'s, row by row.

    ``event`` numbers a file's events from 0 as ``siftbus match`` does: ``events_before``
    plus the events of the same file and partition before this one. ``counted`` carries
    that count (and the last line seen) from one batch of a partition to the next.
    """
    schema = schema_from_text(schema_text)
    layouts = layouts_for(schema_text)
    counted = {} if counted is None else counted
    out = ParsedRows()
    at: list[int] = []  # row of the batch of each row of ``out``
    sources = batch.column("source").to_pylist()
    lines = batch.column("line").to_pylist()
    befores = (batch.column("events_before").to_pylist()
               if "events_before" in batch.schema.names else [0] * batch.num_rows)
    # Spark's text source does not check the encoding: take the bytes and decode here,
    # line by line, so that one bad line is one dead letter.
    raw = batch.column("text").cast(pa.binary()).to_pylist()
    scanned = scan_text_columns(raw, schema, limits=limits)  # the scanner's sure answers
    sure = np.zeros(len(raw), np.bool_)
    if scanned is not None:
        sure[scanned.rows] = True
    sure_events: list[int] = []  # event numbers of the sure rows, in order
    whole = _numbered_at_once(batch, sure, counted)
    if whole is not None:  # every line a sure event, of one file: numbered as a range
        assert scanned is not None
        return _scanned_batch(batch, scanned, whole, layouts)

    def number(source: str | None, line: int, before: int) -> int:
        key = (source, before)
        seen, last = counted.get(key, (0, 0))
        if line <= last:
            # Numbering relies on rows arriving in file order; never number them wrongly.
            raise RuntimeError(f"{source}: line {line} arrived after line {last}")
        counted[key] = (seen + 1, line)
        return before + seen

    for i, (source, line, before, data, fast) in enumerate(zip(
            sources, lines, befores, raw, sure.tolist(), strict=True)):
        if fast:  # a good event, one ASCII line within the limits: only its number here
            sure_events.append(number(source, line, before))
            continue
        if data is None:
            continue
        too_long = len(data) > limits.max_line_bytes
        text: str | None = None
        problem: SiftbusError | None = None
        if too_long:
            problem = EventError(f"line longer than {_size(limits.max_line_bytes)} "
                                 "(TextLimits.max_line_bytes)", source=source, line=line,
                                 column=1)
        else:
            try:
                text = decode_line(data, source=source, line=line, kind=EventError)
            except EventError as exc:
                problem = exc
            else:
                if not text.strip():
                    continue  # not an event (sources.BLANK_LINE says the same on the JVM)
        event = number(source, line, before)
        at.append(i)
        if problem is not None:
            shown = _cut(data) if too_long else data.decode("utf-8", "backslashreplace")
            out.bad(source, event, None, shown, problem, line)
            continue
        assert text is not None
        try:  # a structured CloudEvent line is read by its own rule (docs/cloudevents.md)
            ev = (cloudevents.parse_line(text, schema, source=source, lineno=line)
                  if cloudevents.is_cloudevent_line(text) else
                  parse_event(text, schema, source=source, lineno=line, limits=limits))
        except SiftbusError as exc:
            out.bad(source, event, _type_of(text), text, exc, line)
            continue
        out.good(source, event, ev, layouts, text, line)
    if scanned is None or not len(scanned.rows):
        return out.batch()
    fast_batch = _scanned_batch(batch, scanned, sure_events, layouts)
    if not at:
        return fast_batch
    # put the scanner's rows and the others back in the order of the input
    slow_batch = out.batch()
    order = pa.array(np.argsort(np.concatenate([scanned.rows, np.asarray(at, np.int64)]),
                                kind="stable"))
    return pa.RecordBatch.from_arrays(
        [pa.concat_arrays([fast_batch.column(c), slow_batch.column(c)]).take(order)
         for c in range(len(PARSED_SCHEMA))], schema=PARSED_SCHEMA)


def _numbered_at_once(batch: pa.RecordBatch, sure: np.ndarray,
                      counted: dict[tuple[str | None, int], tuple[int, int]]
                      ) -> np.ndarray | None:
    """The event numbers of a batch whose lines are all events the scanner is sure of,
    of one file and range, in rising line order (the common batch), without a loop over
    its rows; ``None`` for any other batch (numbered row by row)."""
    n = batch.num_rows
    if not n or not sure.all() or "events_before" not in batch.schema.names:
        return None
    source, before = batch.column("source"), batch.column("events_before")
    if source.null_count or len(pc.unique(source)) != 1 or len(pc.unique(before)) != 1:
        return None
    lines = batch.column("line").to_numpy(zero_copy_only=False)
    key = (source[0].as_py(), int(before[0].as_py()))
    seen, last = counted.get(key, (0, 0))
    if lines[0] <= last or (n > 1 and not (np.diff(lines) > 0).all()):
        return None  # out of order: the row loop says which line
    counted[key] = (seen + n, int(lines[-1]))
    return np.arange(key[1] + seen, key[1] + seen + n, dtype=np.int64)


def _scanned_batch(batch: pa.RecordBatch, sc: ScannedTexts, events: list[int] | np.ndarray,
                   layouts: dict[str, TypeLayout]) -> pa.RecordBatch:
    """The parse stage's rows of the texts the scanner is sure of, built as columns: the
    keys come from the scanner's key matrix, the text and source from the input batch
    (an ASCII line decodes to itself)."""
    m = len(sc.rows)
    take = pa.array(sc.rows)
    types = sc.tables.types
    ordered = [[a.position for a, (is_str, _) in zip(t.attributes, layouts[t.name].slots,
                                                     strict=True) if not is_str]
               for t in types]
    strings = [[a.position for a, (is_str, _) in zip(t.attributes, layouts[t.name].slots,
                                                     strict=True) if is_str]
               for t in types]

    def lists(width: list[list[int]], fill: Any) -> tuple[np.ndarray, Any]:
        """Offsets of per-row lists of ``len(width[type])`` items, and their values."""
        counts = np.array([len(w) for w in width], np.int64)[sc.types]
        offsets = np.zeros(m + 1, np.int32)
        np.cumsum(counts, out=offsets[1:])
        values = fill(int(offsets[-1]))
        for t, positions in enumerate(width):
            which = np.flatnonzero(sc.types == t)
            if not len(which) or not positions:
                continue
            for j, pos in enumerate(positions):
                values[offsets[which] + j] = (sc.keys[which, pos] if fill is _ints
                                              else sc.strings(which, pos))
        return offsets, values

    ioff, ivals = lists(ordered, _ints)
    soff, svals = lists(strings, _objects)
    text = batch.column("text").take(take)
    if text.type != pa.string():
        text = text.cast(pa.string())
    return pa.RecordBatch.from_arrays([
        batch.column("source").take(take).cast(pa.string()),
        pa.array(np.asarray(events, np.int64)),
        pa.array([t.name for t in types], pa.string()).take(pa.array(sc.types)),
        pa.ListArray.from_arrays(pa.array(ioff), pa.array(ivals, pa.int64())),
        pa.ListArray.from_arrays(pa.array(soff), pa.array(svals.tolist(), pa.string())),
        text,
        pa.nulls(m, pa.string()),
        batch.column("line").take(take).cast(pa.int64()),
        pa.nulls(m, pa.int32()),
    ], schema=PARSED_SCHEMA)


def _ints(n: int) -> np.ndarray:
    return np.empty(n, np.int64)


def _objects(n: int) -> np.ndarray:
    return np.empty(n, object)


def _size(n: int) -> str:
    return f"{n // MiB} MiB" if n % MiB == 0 else f"{n} bytes"


def _cut(data: bytes, keep: int = 100) -> str:
    """A too-long line for its dead letter: its start, its length and its end."""
    head = data[:keep].decode("utf-8", "backslashreplace")
    tail = data[-keep:].decode("utf-8", "backslashreplace")
    return f"{head}… ({len(data):,} bytes) …{tail}"


def _type_of(text: str) -> str | None:
    try:
        data = parse_json_line(text)
    except SiftbusError:
        return None
    t = data.get("type") if isinstance(data, dict) else None
    return t if isinstance(t, str) else None


def parse_wide_batch(batch: pa.RecordBatch, schema_text: str) -> pa.RecordBatch:
    """Parse rows of a wide table (``type`` plus one column per attribute, null if absent).

    Needs ``source`` and ``event`` columns (the pipeline adds them). A null attribute is
    treated as absent, so the type's attributes must all be non-null.
    """
    schema = schema_from_text(schema_text)
    layouts = layouts_for(schema_text)
    out = ParsedRows()
    for row in batch.to_pylist():
        source = row.pop("source")
        event = int(row.pop("event"))
        data = {k: _plain(v) for k, v in row.items() if v is not None}
        text = json.dumps(data, default=str)
        try:
            ev = event_from_dict(data, schema)
        except SiftbusError as exc:
            exc.located(source=source, line=event + 1)
            tname = data.get("type")
            out.bad(source, event, tname if isinstance(tname, str) else None, text, exc)
            continue
        out.good(source, event, ev, layouts, text)
    return out.batch()


XML_SOURCE_DDL = "source string, content binary"
"""The rows of an XML source: one whole document per row (see ``sources.read_xml``)."""


def _xml_value(etype: EventType, name: str, text: str) -> object:
    """An attribute's value from XML text, typed as the JSON reader would have typed it."""
    from siftbus.model.domain import DecimalDomain, IntDomain

    if name in etype and isinstance(etype.attribute(name).domain, IntDomain | DecimalDomain):
        try:
            return Decimal(text.strip())
        except ArithmeticError:
            spec = etype.attribute(name).domain.spec
            raise EventError(f"{etype.name}.{name}: {text!r} is not a number (domain {spec})",
                             field=name) from None
    # Unknown names stay text: Event.of then reports them with the type's attributes.
    return text


def _json_value(v: object) -> object:
    return float(v) if isinstance(v, Decimal) else v


def _xml_event(el: Any, etype: EventType) -> dict[str, object]:
    """The event an XML element stands for: its XML attributes and leaf child elements are
    the event's attributes (the element's local name is the type)."""
    from lxml import etree

    data: dict[str, object] = {"type": etype.name}

    def put(name: str, text: str) -> None:
        if name in data:
            raise EventError(f"{etype.name}: attribute {name!r} is given twice", field=name)
        data[name] = _xml_value(etype, name, text)

    for qname, value in el.attrib.items():
        put(etree.QName(qname).localname, value)
    for child in el:
        if not isinstance(child.tag, str):
            continue  # comments and processing instructions
        name = etree.QName(child).localname
        if len(child):
            raise EventError(f"{etype.name}: element <{name}> has child elements; an "
                             "attribute value must be text", field=name)
        put(name, child.text or "")
    return data


def parse_xml_batch(batch: pa.RecordBatch, schema_text: str) -> pa.RecordBatch:
    """Cut XML documents ``(source, content)`` into events with the XML filter's splitter.

    Every element whose local name is an event type of the schema is an event, wherever
    it sits in the document (any wrapper; other elements are not events); its XML
    attributes and leaf child elements give the attribute values
    (``<Temp room="3"><value>21.5</value>...</Temp>``). ``event`` is the 0-based position
    of the event in its document. A good event's ``text`` is its JSON line, a bad one's
    the element's XML, and the reason names the XML line. A document that is not
    well-formed keeps the events before the error and adds one bad row with the parser's
    line and column.
    """
    from lxml import etree

    from siftbus.errors import XmlInputError
    from siftbus.xmlfilter.splitter import cut

    schema = schema_from_text(schema_text)
    layouts = layouts_for(schema_text)
    out = ParsedRows()
    sources = batch.column("source").to_pylist()
    contents = batch.column("content").to_pylist()
    for source, content in zip(sources, contents, strict=True):
        k = 0
        try:
            for el, _tags in cut(content or b"", set(), set(schema.names), name=source):
                etype = schema[etree.QName(el).localname]
                try:
                    ev = event_from_dict(_xml_event(el, etype), schema)
                except SiftbusError as exc:
                    exc.message = f"XML line {el.sourceline}: {exc.message}"
                    out.bad(source, k, etype.name,
                            etree.tostring(el, with_tail=False, encoding="unicode"), exc)
                else:
                    text = json.dumps({"type": etype.name, **{
                        a.name: _json_value(a.domain.value(key))
                        for a, key in zip(etype.attributes, ev.keys, strict=True)}})
                    out.good(source, k, ev, layouts, text)
                k += 1
        except XmlInputError as exc:
            if exc.line is not None and f"line {exc.line}" not in exc.message:
                exc.message = f"XML line {exc.line}: {exc.message}"
            out.bad(source, k, None, None, exc)
    return out.batch()


def _plain(v: object) -> object:
    # Parquet doubles arrive as floats; domains round decimals from their shortest repr.
    if isinstance(v, float):
        return Decimal(repr(v))
    return v


def validate_keyed_batch(batch: pa.RecordBatch, schema_text: str) -> pa.RecordBatch:
    """Check already-keyed rows against the schema (type known, key counts, domains).

    Vectorised per type with numpy; rows that fail get an ``error`` like any bad record.
    """
    layouts = layouts_for(schema_text)
    n = batch.num_rows
    types = batch.column("type").to_pylist()
    error: list[str | None] = [None] * n
    ik = batch.column("ikeys")
    sk = batch.column("skeys")
    by_type: dict[str | None, list[int]] = {}
    for i, t in enumerate(types):
        by_type.setdefault(t, []).append(i)
    for t, rows in by_type.items():
        layout = layouts.get(t) if t is not None else None
        if layout is None:
            for i in rows:
                error[i] = f"unknown event type {t!r}"
            continue
        idx = pa.array(rows, pa.int64())
        ik_t = ik.take(idx)
        sk_t = sk.take(idx)
        ilen = _lengths(ik_t)
        slen = _lengths(sk_t)
        wrong = (ilen != len(layout.ordered)) | (slen != len(layout.strings))
        ok_rows = np.flatnonzero(~wrong)
        if len(layout.ordered) and len(ok_rows):
            sub = ik_t.take(pa.array(ok_rows, pa.int64()))
            flat = sub.flatten()
            if flat.null_count:
                wrong[ok_rows] = True
            else:
                vals = flat.to_numpy(zero_copy_only=False).reshape(len(ok_rows), -1)
                lo = np.array([b[0] for b in layout.bounds], dtype=np.int64)
                hi = np.array([b[1] for b in layout.bounds], dtype=np.int64)
                out_of = ((vals < lo) | (vals > hi)).any(axis=1)
                for j in np.flatnonzero(out_of):
                    bad_attr = np.flatnonzero((vals[j] < lo) | (vals[j] > hi))[0]
                    error[rows[ok_rows[j]]] = (
                        f"{t}.{layout.ordered[bad_attr]}: key {int(vals[j][bad_attr])} is "
                        f"outside {lo[bad_attr]}..{hi[bad_attr]}")
        for j in np.flatnonzero(wrong):
            if error[rows[j]] is None:
                error[rows[j]] = (f"{t} needs {len(layout.ordered)} ordered and "
                                  f"{len(layout.strings)} string keys")
    text = (batch.column("text") if "text" in batch.schema.names
            else pa.nulls(n, pa.string()))
    event = batch.column("event")
    line = pc.add(event.cast(pa.int64()), 1)
    return pa.RecordBatch.from_arrays([
        batch.column("source"), event, batch.column("type"),
        ik, sk, text, pa.array(error, pa.string()), line, pa.nulls(n, pa.int32()),
    ], schema=PARSED_SCHEMA)


def _lengths(arr: pa.Array) -> np.ndarray:
    offsets = arr.offsets.to_numpy()
    lengths = np.diff(offsets).astype(np.int64)
    if arr.null_count:
        lengths[np.asarray(arr.is_null())] = -1
    return lengths


def parse_lines(lines: Sequence[str], schema_text: str, source: str = "<lines>"
                ) -> pa.RecordBatch:
    """Convenience for tests and small inputs: parse a list of JSON lines."""
    batch = pa.RecordBatch.from_arrays([
        pa.array([source] * len(lines), pa.string()),
        pa.array(range(1, len(lines) + 1), pa.int64()),
        pa.array(lines, pa.string()),
    ], names=["source", "line", "text"])
    return parse_text_batch(batch, schema_text)


def iter_parsed(batches: Iterator[pa.RecordBatch], schema_text: str, kind: str,
                limits: TextLimits = TEXT_LIMITS) -> Iterator[pa.RecordBatch]:
    """The ``mapInArrow`` body for a source of the given kind (text, wide or keyed)."""
    counted: dict[tuple[str | None, int], tuple[int, int]] = {}  # one partition's events
    for b in batches:
        if kind == "text":
            yield parse_text_batch(b, schema_text, limits, counted)
        elif kind == "wide":
            yield parse_wide_batch(b, schema_text)
        elif kind == "keyed":
            yield validate_keyed_batch(b, schema_text)
        elif kind == "xml":
            yield parse_xml_batch(b, schema_text)
        elif kind == "ranges":
            for row in b.to_pylist():
                for lines in line_batches(row):
                    yield parse_text_batch(lines, schema_text, limits, counted)
        else:
            raise EventError(f"unknown source kind {kind!r}")


__all__ = [
    "KEYED_DDL",
    "PARSED_DDL",
    "PARSED_SCHEMA",
    "XML_SOURCE_DDL",
    "TypeLayout",
    "event_to_keyed",
    "iter_parsed",
    "keyed_to_event",
    "layouts_for",
    "parse_lines",
    "parse_text_batch",
    "parse_wide_batch",
    "parse_xml_batch",
    "schema_from_text",
    "validate_keyed_batch",
]
