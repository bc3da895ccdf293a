"""Reading a publish request's body: one event, a JSON array, or JSON lines.

Every item is checked against the schema on its own: the valid ones are published, the
others are reported with their line (JSON lines) or their position in the array
(``line`` counts items from 1 there), so a batch with one bad line loses only that line.
Plain event text is read with orjson (:mod:`.codec`), everything else -- and every
refused line -- with the exact event reader, so both give the same answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from siftbus.errors import EventError, QuotaExceeded, SiftbusError
from siftbus.model import Event, Schema, event_from_dict, parse_event
from siftbus.model.textio import parse_json_line

from .cloudevents import cloudevents_items, is_cloudevents_body
from .codec import fast_event_array, fast_event_object, plain_events
from .limits import GatewayLimits

JSON_LINES = ("application/x-ndjson", "application/jsonl", "application/json-lines",
              "application/jsonlines", "text/plain")
"""Content types read as JSON lines (one event per line); ``application/json`` is one
event or an array of events."""


@dataclass(frozen=True, slots=True)
class LineError:
    """One refused item of a publish request."""

    line: int
    """The line of the body (JSON lines), or the item's position from 1 (an array)."""
    column: int | None
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"line": self.line, "column": self.column, "message": self.message}


@dataclass(frozen=True, slots=True)
class ParsedBatch:
    """What a publish body holds: the valid events and the refused items."""

    events: tuple[Event, ...]
    errors: tuple[LineError, ...]
    error_count: int
    """All refused items (``errors`` holds at most ``max_errors`` of them)."""


def _refusal(exc: SiftbusError, line: int) -> LineError:
    return LineError(exc.line or line, exc.column, exc.message)


def parse_publish_body(text: str, content_type: str, schema: Schema,
                       limits: GatewayLimits, ce_headers: Mapping[str, str] | None = None
                       ) -> ParsedBatch:
    """Events and per-item errors of a body (see the module docstring); CloudEvents
    (structured, batch, or binary with ``ce_headers``) by :mod:`.cloudevents`.

    The body as a whole is refused (an exception) only when it is too big, or when an
    ``application/json`` body is not JSON or neither an object nor an array.
    """
    media = content_type.split(";", 1)[0].strip().lower()
    events: list[Event] = []
    errors: list[LineError] = []
    count = 0

    def refuse(err: LineError) -> None:
        nonlocal count
        count += 1
        if len(errors) < limits.max_errors:
            errors.append(err)

    if is_cloudevents_body(media, ce_headers or {}):
        ces = cloudevents_items(text.encode(), media, ce_headers or {}, schema)
        _check_size(len(ces), limits)
        for i, ce in enumerate(ces, 1):
            if isinstance(ce, SiftbusError):
                refuse(LineError(i, None, ce.message))
            else:
                events.append(ce)
        return ParsedBatch(tuple(events), tuple(errors), count)

    if media in JSON_LINES:
        lines = text.splitlines()
        items = [(i, ln) for i, ln in enumerate(lines, 1) if ln.strip()]
        _check_size(len(items), limits)
        plain = [fast_event_object(ln) for _, ln in items]
        checked = iter(plain_events([d for d in plain if d is not None], schema))
        for (i, ln), d in zip(items, plain, strict=True):
            ev = next(checked) if d is not None else None
            if ev is not None:  # the common case: plain text, plainly valid
                events.append(ev)
                continue
            try:  # the exact reader: its event, or its error with line and column
                events.append(parse_event(ln, schema, source="body", lineno=i))
            except SiftbusError as exc:
                refuse(_refusal(exc, i))
        return ParsedBatch(tuple(events), tuple(errors), count)
    data = fast_event_array(text)
    if data is None:
        data = parse_json_line(text, source="body", line=1, kind=EventError,
                               decimals=True, unique_keys=True)
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        raise EventError("the body must be an event (a JSON object) or an array of events",
                         source="body", line=1, column=1)
    _check_size(len(data), limits)
    quick = plain_events([d if isinstance(d, dict) else {} for d in data], schema)
    for i, (item, ev) in enumerate(zip(data, quick, strict=True), 1):
        if ev is not None:
            events.append(ev)
            continue
        try:
            if not isinstance(item, dict):
                raise EventError("an event must be a JSON object")
            events.append(event_from_dict(item, schema))
        except SiftbusError as exc:
            refuse(LineError(i, None, exc.message))
    return ParsedBatch(tuple(events), tuple(errors), count)


def _check_size(n: int, limits: GatewayLimits) -> None:
    if n > limits.max_batch:
        raise QuotaExceeded(f"{n} events in one request: at most {limits.max_batch}",
                            quota="max_batch", limit=limits.max_batch)


__all__ = ["JSON_LINES", "LineError", "ParsedBatch", "parse_publish_body"]
