"""Events: one value for every attribute of their type, each within its domain."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import IO, Any

from siftbus.errors import DomainError, EventError, SiftbusError, excerpt
from siftbus.model.domain import Key, Value
from siftbus.model.schema import EventType, Schema
from siftbus.model.shapes import extended_json_dict, extended_keys
from siftbus.model.textio import TEXT_LIMITS, TextLimits, parse_json_line, read_lines


@dataclass(frozen=True, slots=True)
class Event:
    """An immutable event: its type and one domain key per attribute, in schema order."""

    etype: EventType
    keys: tuple[Key, ...]

    @classmethod
    def of(cls, etype: EventType, values: Mapping[str, object]) -> Event:
        """Validate ``values`` (every attribute exactly once, within its domain)."""
        if etype.extended:  # optional, nested, array or open kinds: model.shapes
            return cls(etype, extended_keys(etype, values))
        missing = [a.name for a in etype.attributes if a.name not in values]
        extra = [k for k in values if k not in etype]
        if missing:
            msg = f"{etype.name} event lacks attribute(s) {', '.join(missing)}"
            if extra:
                msg += f" and has unknown attribute(s) {_names(extra)}"
            raise EventError(msg, field=str(extra[0]) if extra else None)
        if extra:
            raise EventError(f"{etype.name} has no attribute(s) {_names(extra)}",
                             field=str(extra[0]))
        keys: list[Key] = []
        for attr in etype.attributes:
            try:
                keys.append(attr.domain.key(values[attr.name]))
            except DomainError as exc:
                raise DomainError(f"{etype.name}.{attr.name}: {exc.message}",
                                  field=attr.name) from None
        return cls(etype, tuple(keys))

    @property
    def type_name(self) -> str:
        return self.etype.name

    def key(self, attr: str) -> Key:
        """The domain key of an attribute (int for ordered domains, str for strings)."""
        return self.keys[self.etype.attribute(attr).position]

    def __getitem__(self, attr: str) -> Value:
        a = self.etype.attribute(attr)
        return a.domain.value(self.keys[a.position])

    def values(self) -> dict[str, Value]:
        return {a.name: a.domain.value(k) for a, k in zip(self.etype.attributes, self.keys,
                                                          strict=True)}

    def to_json_dict(self) -> dict[str, Any]:
        """The JSON object of the event-file format (decimals as numbers)."""
        if self.etype.extended:
            return extended_json_dict(self.etype, self.keys)
        out: dict[str, Any] = {"type": self.etype.name}
        for name, value in self.values().items():
            out[name] = float(value) if isinstance(value, Decimal) else value
        return out

    def to_json(self) -> str:
        """One event-file line. Decimals are written with exactly their domain's places."""
        if self.etype.extended:
            return json.dumps(self.to_json_dict(), ensure_ascii=False)
        parts = [f'"type": {json.dumps(self.etype.name)}']
        for attr, key in zip(self.etype.attributes, self.keys, strict=True):
            value = attr.domain.value(key)
            text = attr.domain.literal(key) if isinstance(value, Decimal) else json.dumps(value)
            parts.append(f"{json.dumps(attr.name)}: {text}")
        return "{" + ", ".join(parts) + "}"


def _names(keys: list[Any]) -> str:
    """Attribute names for a message: a few, each shortened (an event may carry many)."""
    shown = ", ".join(excerpt(str(k), 40) for k in keys[:5])
    return shown + (f" and {len(keys) - 5} more" if len(keys) > 5 else "")


def _column_of(line: str, name: str, occurrence: int = 1) -> int | None:
    i = -1
    for _ in range(occurrence):
        i = line.find(json.dumps(name), i + 1)
        if i < 0:
            return None
    return i + 1


def event_from_dict(data: Mapping[str, Any], schema: Schema) -> Event:
    """Build an event from the event-file object ``{"type": T, attr: value, ...}``."""
    tname = data.get("type")
    if not isinstance(tname, str):
        raise EventError('event has no "type" string', field="type")
    etype = schema.get(tname)
    if etype is None:
        known = ", ".join(schema.names[:10]) + (", ..." if len(schema) > 10 else "")
        raise EventError(f"unknown event type {excerpt(repr(tname))} (schema has {known})",
                         field="type")
    return Event.of(etype, {k: v for k, v in data.items() if k != "type"})


def parse_event(line: str, schema: Schema, *, source: str | None = None,
                lineno: int | None = None, limits: TextLimits = TEXT_LIMITS) -> Event:
    """Parse one event-file line; errors carry source, line and column.

    The JSON is read by :func:`~siftbus.model.textio.parse_json_line` (depth and digit
    limits, no NaN, no repeated key); numbers with a fraction are exact decimals.
    """
    line = line.rstrip("\r\n")
    data = parse_json_line(line, source=source, line=lineno, kind=EventError, limits=limits,
                           decimals=True, unique_keys=True)
    if not isinstance(data, dict):
        raise EventError("an event must be a JSON object", source=source, line=lineno, column=1)
    try:
        return event_from_dict(data, schema)
    except SiftbusError as exc:
        column = (_column_of(line, exc.field) if exc.field else None) or 1
        raise exc.located(source=source, line=lineno, column=column) from None


def iter_event_lines(lines: Iterable[str], schema: Schema, *, source: str | None = None
                     ) -> Iterator[Event | SiftbusError]:
    """Each event of already split lines in order, or the error of each bad line.

    Blank lines are skipped (they are not events); line numbers count every line. Files
    and streams are read with :func:`read_events`, which splits lines by the one rule.
    """
    return _events(enumerate(lines, start=1), schema, source, TEXT_LIMITS)


def _events(numbered: Iterable[tuple[int, str]], schema: Schema, source: str | None,
            limits: TextLimits) -> Iterator[Event | SiftbusError]:
    for n, line in numbered:
        if not line.strip():
            continue
        try:
            yield parse_event(line, schema, source=source, lineno=n, limits=limits)
        except SiftbusError as exc:
            yield exc


def read_events(file: str | os.PathLike[str] | IO[bytes], schema: Schema, *,
                source: str | None = None, limits: TextLimits = TEXT_LIMITS,
                on_error: Callable[[SiftbusError], object] | None = None) -> Iterator[Event]:
    """Stream the events of a JSON-lines file or binary stream (``sys.stdin.buffer``).

    Lines are read by :func:`~siftbus.model.textio.read_lines` (strict UTF-8, a leading
    BOM skipped, ``\n``, ``\r\n`` and ``\r`` end lines). The first bad line raises an
    :class:`~siftbus.errors.EventError`, or, with ``on_error``, every bad line is passed
    there and reading goes on.
    """
    if source is None and isinstance(file, str | os.PathLike):
        source = os.fspath(file)
    lines = read_lines(file, source=source, kind=EventError, limits=limits, on_error=on_error)
    for item in _events(lines, schema, source, limits):
        if isinstance(item, SiftbusError):
            if on_error is None:
                raise item
            on_error(item)
            continue
        yield item
