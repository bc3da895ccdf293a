"""Events: one value for every attribute of their type, each within its domain."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from operator import itemgetter
from typing import IO, Any

from siftbus.errors import DomainError, EventError, SiftbusError, excerpt
from siftbus.model.domain import DecimalDomain, EnumDomain, IntDomain, Key, Value
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
        entry = _KEYERS.get(id(etype))
        if entry is None or entry[0] is not etype:
            entry = _keyer_entry(etype)
        keys = entry[1](values)
        if keys is None:
            return cls._checked(etype, values)
        if cls is not Event:
            return cls(etype, keys)
        # the fields set through their slots: the frozen dataclass's __init__ sets each
        # through object.__setattr__, twice the time of the rest of a plain event's check
        event = _new(Event)
        _set_etype(event, etype)
        _set_keys(event, keys)
        return event

    @classmethod
    def _checked(cls, etype: EventType, values: Mapping[str, object]) -> Event:
        """:meth:`of` one attribute at a time: every error, and every value the fast
        check leaves (bools, floats, decimals, subclasses), is decided here."""
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


_new = object.__new__
_set_etype = vars(Event)["etype"].__set__  # the slots' descriptors
_set_keys = vars(Event)["keys"].__set__

Keyer = Callable[[Mapping[str, object]], "tuple[Key, ...] | None"]
"""The keys of a plain, valid values mapping of one event type, else ``None``."""

_KEYERS: dict[int, tuple[EventType, Keyer]] = {}
"""Per event type (by identity; the type is held, so its id is not reused): its keyer."""
_KEYERS_MAX = 4096


def _keyer_entry(etype: EventType) -> tuple[EventType, Keyer]:
    if len(_KEYERS) >= _KEYERS_MAX:
        _KEYERS.clear()
    entry = _KEYERS[id(etype)] = (etype, _keyer(etype))
    return entry


def _keyer(etype: EventType) -> Keyer:
    """A fast check of one event type's values, all in C-level calls where it can: the
    values taken at once (``itemgetter``), their exact types compared with the expected
    ones as one tuple (``int`` for integers, ``str`` for enums and strings), one
    ``min``/``max`` per integer domain, an ordinal lookup per enum.
    Anything else (a missing or extra name, another type, a value out of its domain, a
    decimal attribute) gives ``None``, and :meth:`Event._checked` decides, with its
    errors."""
    attrs = etype.attributes
    n = len(attrs)
    if n == 0 or any(isinstance(a.domain, DecimalDomain) for a in attrs):
        return lambda values: None
    names = [a.name for a in attrs]
    take = itemgetter(*names) if n > 1 else (lambda values: (values[names[0]],))
    int_groups: dict[tuple[int, int], list[int]] = {}
    enums: list[tuple[int, Mapping[str, int]]] = []
    for a in attrs:
        d = a.domain
        if isinstance(d, IntDomain):
            int_groups.setdefault((d.lo, d.hi), []).append(a.position)
        elif isinstance(d, EnumDomain):
            enums.append((a.position, dict(d.ordinals)))
    groups = [(lo, hi, _picker(pos)) for (lo, hi), pos in int_groups.items()]
    all_ints = [p for pos in int_groups.values() for p in pos]
    ints = _picker(all_ints) if all_ints else None
    one_group = len(groups) == 1  # usually: one domain for all integer attributes
    lo0, hi0 = groups[0][:2] if groups else (0, 0)
    # every value's exact type at once (one C-level tuple comparison): int for integer
    # domains, str for enum labels and strings
    types = tuple(int if isinstance(a.domain, IntDomain) else str for a in attrs)

    def keys(values: Mapping[str, object]) -> tuple[Key, ...] | None:
        if len(values) != n:
            return None
        try:
            vals = take(values)
        except (KeyError, TypeError):
            return None
        if tuple(map(type, vals)) != types:
            return None
        if ints is not None:
            got = ints(vals)
            if one_group:
                if min(got) < lo0 or max(got) > hi0:
                    return None
            else:
                for lo, hi, pick in groups:
                    got = pick(vals)
                    if min(got) < lo or max(got) > hi:
                        return None
        if not enums:
            return vals
        out = list(vals)
        for pos, ordinal in enums:
            k = ordinal.get(vals[pos])
            if k is None:
                return None
            out[pos] = k
        return tuple(out)

    return keys


def _picker(positions: list[int]) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    """The items at ``positions`` of a tuple, as a tuple (one C-level call)."""
    if len(positions) == 1:
        p = positions[0]
        return lambda t: (t[p],)
    return itemgetter(*positions)


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


def parse_event(line: str | Mapping[str, Any], schema: Schema, *, source: str | None = None,
                lineno: int | None = None, limits: TextLimits = TEXT_LIMITS) -> Event:
    """Parse one event-file line, or an event given as a dict; errors carry source, line
    and column.

    The JSON is read by :func:`~siftbus.model.textio.parse_json_line` (depth and digit
    limits, no NaN, no repeated key); numbers with a fraction are exact decimals (a
    dict's floats are taken as written: ``21.5`` is ``Decimal("21.5")``).
    """
    if isinstance(line, Mapping):
        data = {k: Decimal(repr(v)) if isinstance(v, float) else v for k, v in line.items()}
        try:
            return event_from_dict(data, schema)
        except SiftbusError as exc:
            raise exc.located(source=source, line=lineno) from None
    if not isinstance(line, str):
        raise EventError(f"an event is a JSON line or a dict, not {type(line).__name__}",
                         source=source, line=lineno)
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
