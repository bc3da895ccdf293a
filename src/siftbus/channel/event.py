"""Structured events (CosNotification::StructuredEvent) as an immutable Python value.

::

    StructuredEvent
      header.fixed_header.event_type.domain_name / type_name, header.fixed_header.event_name
      header.variable_header     (name, value) pairs: per-event QoS (Priority, Timeout, ...)
      filterable_data            (name, value) pairs: what filters look at
      remainder_of_body          any value (the payload)

Values are "anys" as :mod:`siftbus.channel.values` defines them. The JSON (and msgpack) form is
the IDL shape::

    {"header": {"fixed_header": {"event_type": {"domain_name": "Telecom", "type_name": "Alarm"},
                                 "event_name": "link-down"},
                "variable_header": [{"name": "Priority", "value": 3}]},
     "filterable_data": [{"name": "severity", "value": 4}],
     "remainder_of_body": {"port": 7}}

A flat form is accepted as input too: ``{"domain_name": ..., "type_name": ...,
"event_name": ..., "variable_header": {...}, "filterable_data": {...},
"remainder_of_body": ...}`` (objects or name/value lists).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import msgpack

from siftbus.channel.values import from_json_value, to_json_value
from siftbus.errors import EventError, SiftbusError, excerpt
from siftbus.model.textio import parse_json_line

Properties = tuple[tuple[str, Any], ...]

ANY_TYPE = "%ANY"


@dataclass(frozen=True, slots=True)
class StructuredEvent:
    """An immutable structured event; a minimal one has only the fixed header."""

    __etcl_structured__: ClassVar[bool] = True

    domain_name: str = ""
    type_name: str = ""
    event_name: str = ""
    variable_header: Properties = ()
    filterable_data: Properties = ()
    remainder_of_body: Any = field(default=None, compare=True)

    @classmethod
    def of(cls, domain_name: str, type_name: str, event_name: str = "", *,
           variable_header: Mapping[str, Any] | Properties | None = None,
           filterable_data: Mapping[str, Any] | Properties | None = None,
           remainder_of_body: Any = None) -> StructuredEvent:
        """Build an event; headers and filterable data as mappings or (name, value) pairs."""
        return cls(domain_name, type_name, event_name, _props(variable_header, "variable_header"),
                   _props(filterable_data, "filterable_data"), remainder_of_body)

    @classmethod
    def from_any(cls, value: Any) -> StructuredEvent:
        """The spec's Any -> Structured translation: ``("", "%ANY", "")``, the any as body."""
        return cls("", ANY_TYPE, "", (), (), value)

    def header_value(self, name: str, default: Any = None) -> Any:
        """The first variable-header property called ``name``."""
        for n, v in self.variable_header:
            if n == name:
                return v
        return default

    def with_header(self, name: str, value: Any) -> StructuredEvent:
        """A copy with variable-header property ``name`` set (replaced or appended)."""
        vh = [(n, v) for n, v in self.variable_header if n != name]
        vh.append((name, value))
        return StructuredEvent(self.domain_name, self.type_name, self.event_name, tuple(vh),
                               self.filterable_data, self.remainder_of_body)

    def to_dict(self) -> dict[str, Any]:
        """The IDL-shaped JSON/msgpack object."""
        return {
            "header": {
                "fixed_header": {
                    "event_type": {"domain_name": self.domain_name, "type_name": self.type_name},
                    "event_name": self.event_name,
                },
                "variable_header": [{"name": n, "value": to_json_value(v)}
                                    for n, v in self.variable_header],
            },
            "filterable_data": [{"name": n, "value": to_json_value(v)}
                                for n, v in self.filterable_data],
            "remainder_of_body": to_json_value(self.remainder_of_body),
        }

    @classmethod
    def from_dict(cls, data: Any) -> StructuredEvent:
        """Parse the IDL-shaped or flat object; raises :class:`EventError` naming the
        field that is wrong (``header.fixed_header.event_type.type_name``, say)."""
        try:
            fixed = _idl_fixed_header(data)
            if fixed is not None:  # the common, well-formed IDL shape: checked cheaply
                return cls(*fixed,
                           _props(data["header"].get("variable_header"), "variable_header",
                                  decode=True),
                           _props(data.get("filterable_data"), "filterable_data", decode=True),
                           _value(data.get("remainder_of_body"), "remainder_of_body"))
        except RecursionError:
            raise EventError("structured event nested too deeply") from None
        if not isinstance(data, Mapping):
            raise EventError(f"a structured event must be an object, not {_kind(data)}")
        unknown = data.keys() - _FIELDS
        if unknown:
            names = sorted(str(k) for k in unknown)
            raise EventError(f"unknown structured-event field(s) {excerpt(', '.join(names))}",
                             field=names[0])
        try:
            if "header" in data:
                flat = sorted(data.keys() & _FLAT)
                if flat:
                    raise EventError(f"give either header or the flat fields, not both "
                                     f"(header and {flat[0]})", field=flat[0])
                d, t, e, vh = _header(data["header"])
            else:
                d = _string(data, "domain_name", "domain_name", required=False)
                t = _string(data, "type_name", "type_name", required=False)
                e = _string(data, "event_name", "event_name", required=False)
                vh = data.get("variable_header")
            return cls(d, t, e, _props(vh, "variable_header", decode=True),
                       _props(data.get("filterable_data"), "filterable_data", decode=True),
                       _value(data.get("remainder_of_body"), "remainder_of_body"))
        except RecursionError:
            raise EventError("structured event nested too deeply") from None

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> StructuredEvent:
        return cls.from_dict(parse_json_line(text, kind=EventError))

    def to_msgpack(self) -> bytes:
        return msgpack.packb(self.to_dict(), use_bin_type=True)

    @classmethod
    def from_msgpack(cls, data: bytes) -> StructuredEvent:
        return cls.from_dict(unpack(data))


_FLAT = frozenset({"domain_name", "type_name", "event_name", "variable_header"})
_FIELDS = frozenset({"header", "filterable_data", "remainder_of_body"}) | _FLAT
_HEADER = frozenset({"fixed_header", "variable_header"})
_FIXED = frozenset({"event_type", "event_name"})
_EVENT_TYPE = frozenset({"domain_name", "type_name"})


def _kind(value: Any) -> str:
    """What a JSON/msgpack value is, in the words of its format."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, bytes | bytearray):
        return "binary data"
    return type(value).__name__


def _object(value: Any, where: str, allowed: frozenset[str]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise EventError(f"{where} must be an object, not {_kind(value)}", field=where)
    unknown = value.keys() - allowed
    if unknown:
        name = sorted(str(k) for k in unknown)[0]
        raise EventError(f"{where} has an unknown field {excerpt(name)!r}", field=where)
    return value


def _string(obj: Mapping[str, Any], key: str, where: str, *, required: bool) -> str:
    if key not in obj:
        if required:
            parent = where.rpartition(".")[0] or "the event"
            raise EventError(f"{parent} lacks {key}", field=where)
        return ""
    v = obj[key]
    if not isinstance(v, str):
        raise EventError(f"{where} must be a string, not {_kind(v)}", field=where)
    return v


def _idl_fixed_header(data: Any) -> tuple[str, str, str] | None:
    """(domain, type, event name) when ``data`` is a well-formed IDL-shaped event with no
    unknown field (plain dict and length checks, no set operations); None otherwise (the
    careful checks then say what is wrong, or read the flat form)."""
    if type(data) is not dict:
        return None
    header = data.get("header")
    if type(header) is not dict or len(data) != 1 + ("filterable_data" in data) + \
            ("remainder_of_body" in data):
        return None
    fixed = header.get("fixed_header")
    if type(fixed) is not dict or len(header) != 1 + ("variable_header" in header):
        return None
    etype = fixed.get("event_type")
    if type(etype) is not dict or len(etype) != 2 or \
            len(fixed) != 1 + ("event_name" in fixed):
        return None
    d, t, e = etype.get("domain_name"), etype.get("type_name"), fixed.get("event_name", "")
    if type(d) is not str or type(t) is not str or type(e) is not str:
        return None
    return d, t, e


def _header(header: Any) -> tuple[str, str, str, Any]:
    """(domain, type, event name, variable header) of the IDL-shaped ``header``."""
    h = _object(header, "header", _HEADER)
    if "fixed_header" not in h:
        raise EventError("header lacks fixed_header", field="header.fixed_header")
    fixed = _object(h["fixed_header"], "header.fixed_header", _FIXED)
    if "event_type" not in fixed:
        raise EventError("header.fixed_header lacks event_type",
                         field="header.fixed_header.event_type")
    where = "header.fixed_header.event_type"
    etype = _object(fixed["event_type"], where, _EVENT_TYPE)
    return (_string(etype, "domain_name", f"{where}.domain_name", required=True),
            _string(etype, "type_name", f"{where}.type_name", required=True),
            _string(fixed, "event_name", "header.fixed_header.event_name", required=False),
            h.get("variable_header"))


def _value(value: Any, where: str, name: str | None = None) -> Any:
    """Decode an any; ``where`` (and a property ``name``) say where it is, on error."""
    try:
        return from_json_value(value)
    except SiftbusError as exc:
        if name is not None:
            where = f"{where}.{excerpt(name)}"
        raise EventError(f"{exc.message} (in {where})", field=where) from None


def _props(value: Any, what: str, *, decode: bool = False) -> Properties:
    if value is None:
        return ()
    if type(value) is list and decode:
        # The wire form: [{"name": n, "value": v}, ...] (checked without ABC isinstance;
        # a value that does not decode is looked at again below, to name it).
        fast = []
        try:
            for item in value:
                if type(item) is not dict or type(item.get("name")) is not str:
                    break
                fast.append((item["name"], from_json_value(item.get("value"))))
            else:
                return tuple(fast)
        except SiftbusError:
            pass

    def conv(name: str, v: Any) -> Any:
        return _value(v, what, name) if decode else v

    if isinstance(value, Mapping):
        return tuple((str(k), conv(str(k), v)) for k, v in value.items())
    if isinstance(value, list | tuple):
        out = []
        for i, item in enumerate(value):
            if isinstance(item, Mapping) and "name" in item:
                name, v = item["name"], item.get("value")
            elif isinstance(item, list | tuple) and len(item) == 2:
                name, v = item
            else:
                raise EventError(f"{what}[{i}] needs a name and a value ({{\"name\": ..., "
                                 f"\"value\": ...}} or [name, value]), not {_kind(item)}",
                                 field=what)
            if not isinstance(name, str):
                raise EventError(f"{what}[{i}]: the name must be a string, not {_kind(name)}",
                                 field=what)
            out.append((name, conv(name, v)))
        return tuple(out)
    raise EventError(f"{what} must be an object or a list of name/value pairs, not "
                     f"{_kind(value)}", field=what)


def unpack(data: bytes) -> Any:
    """One msgpack value, every failure an :class:`EventError`."""
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=False)
    except (ValueError, TypeError, msgpack.ExtraData, msgpack.FormatError,
            msgpack.StackError) as exc:
        raise EventError(f"invalid msgpack: {str(exc)[:200]}") from None


__all__ = ["ANY_TYPE", "Properties", "StructuredEvent", "unpack"]
