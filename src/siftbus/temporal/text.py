"""Persistent notifications as JSON lines (files, the CLI, examples).

One notification per line::

    {"id": "menu-0", "subspace": "Document(room in [1, 30], kind = menu)",
     "publisher": "canteen", "start": 0, "end": 3600}

``id`` and ``subspace`` (a profile without id, in the profile language) are required;
``publisher``, ``start`` (default: now), and ``end`` or ``ttl`` (seconds; default:
valid until withdrawn) are optional. Blank lines and lines starting with ``#`` are
skipped. Every error names the line and, where it can, the column; a line longer than
:data:`MAX_LINE` characters is refused before it is parsed.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from siftbus.errors import InputError, SiftbusError
from siftbus.lang.profile import format_profile, parse_profile_text, resolve
from siftbus.model import Schema
from siftbus.model.textio import parse_json_line, read_lines, split_lines

from .notification import PersistentNotification, Validity

MAX_LINE = 65_536
"""Characters of one notification line."""

_FIELDS = ("id", "subspace", "publisher", "start", "end", "ttl", "version")


def field_column(text: str, field: str | None, *, key: bool = False,
                 start: int = 0) -> int | None:
    """The column (from 1) of the value of ``"field":`` in the JSON line ``text`` (of the
    key itself with ``key``), searched from index ``start``; ``None`` when it is not
    there."""
    if not field or not text:
        return None
    m = re.compile(re.escape(json.dumps(field, ensure_ascii=False)) + r"\s*:\s*").search(
        text, start)
    if m is None:
        return None
    return (m.start() if key else m.end()) + 1


def _number(obj: dict[str, Any], name: str, line: int, source: str | None,
            allow_none: bool = False) -> float | None:
    v = obj.get(name)
    if v is None:
        if name in obj and not allow_none:
            raise InputError(f"{name!r} must be a number, not null", source=source,
                             line=line, field=name)
        return None
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise InputError(f"{name!r} must be a finite number of seconds, got {v!r}",
                         source=source, line=line, field=name)
    return float(v)


def parse_object_line(text: str, what: str, *, source: str | None = None,
                      line: int = 1) -> dict[str, Any]:
    """One JSON object from a line of at most :data:`MAX_LINE` characters (``what`` names
    it in the error when it is another JSON value)."""
    if len(text) > MAX_LINE:
        raise InputError(f"a line of {len(text)} characters exceeds the limit of "
                         f"{MAX_LINE}", source=source, line=line, column=MAX_LINE + 1,
                         field="max_line")
    obj = parse_json_line(text, source=source, line=line, unique_keys=True)
    if not isinstance(obj, dict):
        raise InputError(f"{what} must be a JSON object", source=source, line=line,
                         column=len(text) - len(text.lstrip()) + 1)
    return obj


def parse_notification(text: str, schema: Schema, *, now: float = 0.0,
                       source: str | None = None, line: int = 1) -> PersistentNotification:
    """One notification from a JSON line."""
    obj = parse_object_line(text, "a notification", source=source, line=line)
    try:
        return notification_from_json(obj, schema, now=now, source=source, line=line,
                                      text=text)
    except SiftbusError as exc:
        raise exc.located(column=1) from None  # a field it lacks: the line


def notification_from_json(obj: dict[str, Any], schema: Schema, *, now: float = 0.0,
                           source: str | None = None, line: int = 1,
                           text: str = "") -> PersistentNotification:
    """One notification from its decoded JSON object; ``text`` is the line it stands in
    (every error's column is counted from there: the offending value's, or a profile
    error's within the subspace)."""
    try:
        return _notification(obj, schema, now, source, line, text)
    except SiftbusError as exc:
        if exc.column is None and text:
            exc.column = field_column(text, exc.field, key=exc.field not in _FIELDS)
        raise exc.located(source=source, line=line) from None


def _notification(obj: dict[str, Any], schema: Schema, now: float, source: str | None,
                  line: int, text: str) -> PersistentNotification:
    unknown = sorted(set(obj) - set(_FIELDS))
    if unknown:
        raise InputError(f"unknown field {unknown[0]!r} (fields: {', '.join(_FIELDS)})",
                         source=source, line=line, field=unknown[0])
    for name in ("id", "subspace"):
        if not isinstance(obj.get(name), str):
            raise InputError(f"{name!r} must be a string", source=source, line=line,
                             field=name)
    nid, body = obj["id"], obj["subspace"]
    if not nid or not all(c.isalnum() or c in "_-./" for c in nid):
        raise InputError(f"'id' {nid[:50]!r} must be letters, digits, '_', '-', '.', '/'",
                         field="id")
    publisher = obj.get("publisher", "")
    if not isinstance(publisher, str):
        raise InputError("'publisher' must be a string", source=source, line=line,
                         field="publisher")
    version = obj.get("version", 0)
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise InputError("'version' must be a non-negative integer", source=source,
                         line=line, field="version")
    at = field_column(text, "subspace")
    offset = text.find(json.dumps(body, ensure_ascii=False), (at or 1) - 1)
    try:
        parsed = parse_profile_text(body, source=source, line=line)
        if parsed.id is not None:
            raise InputError("the subspace must not carry an id (the notification's "
                             "'id' names it)", field="subspace")
        subspace = resolve(parsed, schema, id=nid, source=source)
        validity = Validity.of(now, start=_number(obj, "start", line, source),
                               end=_number(obj, "end", line, source, allow_none=True),
                               ttl=_number(obj, "ttl", line, source))
        return PersistentNotification(nid, subspace, publisher, validity, version)
    except SiftbusError as exc:
        if exc.column is not None and offset >= 0 and exc.field not in _FIELDS:
            exc.column += offset + 1  # from the profile text to the line
        elif exc.column is None and exc.field not in _FIELDS:
            exc.column = offset + 1 if offset >= 0 else None  # the subspace's text
        raise


def _from_lines(lines: Iterable[tuple[int, str]], schema: Schema, now: float,
                source: str | None, unique: bool = False) -> Iterator[PersistentNotification]:
    seen: dict[str, int] = {}
    for i, raw in lines:
        stripped = raw.strip()
        if stripped and not stripped.startswith("#"):
            n = parse_notification(raw, schema, now=now, source=source, line=i)
            first = seen.setdefault(n.id, i) if unique else i
            if first != i:
                raise InputError(f"notification id {n.id!r} appears twice (first on line "
                                 f"{first})", source=source, line=i,
                                 column=field_column(raw, "id") or 1, field="id")
            yield n


def iter_notification_lines(text: str, schema: Schema, *, now: float = 0.0,
                            source: str | None = None) -> Iterator[PersistentNotification]:
    """Every notification of a JSON-lines text, in order."""
    return _from_lines(split_lines(text), schema, now, source)


def load_notifications(path: str | Path, schema: Schema, *,
                       now: float = 0.0) -> list[PersistentNotification]:
    """The notifications of a JSON-lines file (read by :func:`~siftbus.model.textio.read_lines`'s
    rules: strict UTF-8, BOM, any line end); ids must be unique."""
    return list(_from_lines(read_lines(path), schema, now, str(path), unique=True))


def notification_to_json(n: PersistentNotification) -> dict[str, Any]:
    """The JSON object of a notification (what :func:`parse_notification` reads)."""
    obj: dict[str, Any] = {"id": n.id,
                           "subspace": format_profile(n.subspace, with_id=False)}
    if n.publisher:
        obj["publisher"] = n.publisher
    if n.validity.start != -math.inf:
        obj["start"] = n.validity.start
    if n.validity.end != math.inf:
        obj["end"] = n.validity.end
    if n.version:
        obj["version"] = n.version
    return obj


def format_notification(n: PersistentNotification) -> str:
    return json.dumps(notification_to_json(n), ensure_ascii=False)


__all__ = ["MAX_LINE", "field_column", "format_notification", "iter_notification_lines",
           "load_notifications", "notification_from_json", "notification_to_json",
           "parse_notification",
           "parse_object_line"]
