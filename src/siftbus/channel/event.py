"""Structured events (CosNotification::StructuredEvent) as an immutable Python value.

::

    StructuredEvent
      header.fixed_header.event_type.domain_name / type_name, header.fixed_header.event_name
      header.variable_header     (name, value) pairs: per-event QoS (Priority, Timeout, ...)
      filterable_data            (name, value) pairs: what filters look at
      remainder_of_body          any value (the payload)

Values are "anys" as :mod:`siftbus.lang.etcl` defines them. The JSON (and msgpack) form is
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
from siftbus.errors import EventError
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
        """Parse the IDL-shaped or flat object; raises :class:`EventError`."""
        if type(data) is not dict and not isinstance(data, Mapping):
            raise EventError("a structured event must be an object")
        try:
            if "header" in data:
                header = data["header"]
                fixed = header["fixed_header"]
                etype = fixed["event_type"]
                d, t, e = etype["domain_name"], etype["type_name"], fixed.get("event_name", "")
                vh = header.get("variable_header", ())
            else:
                d, t = data.get("domain_name", ""), data.get("type_name", "")
                e = data.get("event_name", "")
                vh = data.get("variable_header", ())
        except (KeyError, TypeError) as exc:
            raise EventError(f"structured event lacks {exc}", field="header") from None
        if type(d) is not str or type(t) is not str or type(e) is not str:
            for name, v in (("domain_name", d), ("type_name", t), ("event_name", e)):
                if not isinstance(v, str):
                    raise EventError(f"{name} must be a string", field=name)
        unknown = data.keys() - _FIELDS
        if unknown:
            raise EventError(f"unknown structured-event field(s) {', '.join(sorted(unknown))}",
                             field=sorted(unknown)[0])
        return cls(d, t, e, _props(vh, "variable_header", decode=True),
                   _props(data.get("filterable_data", ()), "filterable_data", decode=True),
                   from_json_value(data.get("remainder_of_body")))

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> StructuredEvent:
        return cls.from_dict(parse_json_line(text, kind=EventError))

    def to_msgpack(self) -> bytes:
        return msgpack.packb(self.to_dict(), use_bin_type=True)

    @classmethod
    def from_msgpack(cls, data: bytes) -> StructuredEvent:
        try:
            obj = msgpack.unpackb(data, raw=False, strict_map_key=False)
        except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
            raise EventError(f"invalid msgpack: {exc}") from None
        return cls.from_dict(obj)


_FIELDS = frozenset({"header", "filterable_data", "remainder_of_body", "domain_name",
                     "type_name", "event_name", "variable_header"})


def _props(value: Any, what: str, *, decode: bool = False) -> Properties:
    if value is None:
        return ()
    if type(value) is list and decode:
        # The wire form: [{"name": n, "value": v}, ...] (checked without ABC isinstance).
        fast = []
        for item in value:
            if type(item) is not dict or type(item.get("name")) is not str:
                break
            fast.append((item["name"], from_json_value(item.get("value"))))
        else:
            return tuple(fast)
    conv = from_json_value if decode else (lambda v: v)
    if isinstance(value, Mapping):
        return tuple((str(k), conv(v)) for k, v in value.items())
    if isinstance(value, list | tuple):
        out = []
        for item in value:
            if isinstance(item, Mapping) and "name" in item:
                name, v = item["name"], item.get("value")
            elif isinstance(item, list | tuple) and len(item) == 2:
                name, v = item
            else:
                raise EventError(f"{what}: each property needs a name and a value", field=what)
            if not isinstance(name, str):
                raise EventError(f"{what}: property names must be strings", field=what)
            out.append((name, conv(v)))
        return tuple(out)
    raise EventError(f"{what} must be an object or a list of name/value pairs", field=what)


__all__ = ["ANY_TYPE", "Properties", "StructuredEvent"]
