"""Events: one value for every attribute of their type, each within its domain."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from siftbus.errors import DomainError, EventError, SiftbusError
from siftbus.model.domain import Key, Value
from siftbus.model.schema import EventType, Schema


@dataclass(frozen=True, slots=True)
class Event:
    """An immutable event: its type and one domain key per attribute, in schema order."""

    etype: EventType
    keys: tuple[Key, ...]

    @classmethod
    def of(cls, etype: EventType, values: Mapping[str, object]) -> Event:
        """Validate ``values`` (every attribute exactly once, within its domain)."""
        missing = [a.name for a in etype.attributes if a.name not in values]
        extra = [k for k in values if k not in etype]
        if missing:
            msg = f"{etype.name} event lacks attribute(s) {', '.join(missing)}"
            if extra:
                msg += f" and has unknown attribute(s) {', '.join(map(str, extra))}"
            raise EventError(msg, field=str(extra[0]) if extra else None)
        if extra:
            raise EventError(f"{etype.name} has no attribute(s) {', '.join(map(str, extra))}",
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
        out: dict[str, Any] = {"type": self.etype.name}
        for name, value in self.values().items():
            out[name] = float(value) if isinstance(value, Decimal) else value
        return out

    def to_json(self) -> str:
        """One event-file line. Decimals are written with exactly their domain's places."""
        parts = [f'"type": {json.dumps(self.etype.name)}']
        for attr, key in zip(self.etype.attributes, self.keys, strict=True):
            value = attr.domain.value(key)
            text = attr.domain.literal(key) if isinstance(value, Decimal) else json.dumps(value)
            parts.append(f"{json.dumps(attr.name)}: {text}")
        return "{" + ", ".join(parts) + "}"


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _DuplicateKey(k)
        out[k] = v
    return out


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


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
        raise EventError(f"unknown event type {tname!r} (schema has {', '.join(schema.names)})",
                         field="type")
    return Event.of(etype, {k: v for k, v in data.items() if k != "type"})


def parse_event(line: str, schema: Schema, *, source: str | None = None,
                lineno: int | None = None) -> Event:
    """Parse one event-file line; errors carry source, line and column."""
    line = line.rstrip("\r\n")
    try:
        data = json.loads(line, parse_float=Decimal, object_pairs_hook=_no_duplicates)
    except _DuplicateKey as dup:
        raise EventError(f"attribute {dup.key!r} is given twice", source=source, line=lineno,
                         column=_column_of(line, dup.key, 2), field=dup.key) from None
    except json.JSONDecodeError as exc:
        raise EventError(f"invalid JSON: {exc.msg}", source=source, line=lineno,
                         column=exc.colno) from None
    if not isinstance(data, dict):
        raise EventError("an event must be a JSON object", source=source, line=lineno, column=1)
    try:
        return event_from_dict(data, schema)
    except SiftbusError as exc:
        column = (_column_of(line, exc.field) if exc.field else None) or 1
        raise exc.located(source=source, line=lineno, column=column) from None


def iter_event_lines(lines: Iterable[str], schema: Schema, *, source: str | None = None
                     ) -> Iterator[Event | SiftbusError]:
    """Each event of an event file in order, or the error of each bad line.

    Blank lines are skipped (they are not events); line numbers count every line.
    """
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield parse_event(line, schema, source=source, lineno=n)
        except SiftbusError as exc:
            yield exc


def read_events(path: str | Path, schema: Schema) -> Iterator[Event]:
    """Stream the events of a JSON-lines file; the first bad line raises."""
    p = Path(path)
    try:
        fh = p.open(encoding="utf-8")
    except OSError as exc:
        raise EventError(f"cannot read events: {exc.strerror}", source=str(p)) from None
    with fh:
        try:
            for item in iter_event_lines(fh, schema, source=str(p)):
                if isinstance(item, SiftbusError):
                    raise item
                yield item
        except UnicodeDecodeError as exc:
            raise EventError(f"event file is not UTF-8: {exc.reason}", source=str(p)) from None
