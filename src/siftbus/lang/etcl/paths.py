"""Path lookup: what a component (``$``, ``$name``, ``$.a.b[2](key)``) denotes in an event.

A *structured event* is any object whose class has ``__etcl_structured__ = True`` and the
fields ``domain_name``, ``type_name``, ``event_name``, ``variable_header``,
``filterable_data`` (tuples of ``(name, value)``) and ``remainder_of_body``
(``siftbus.channel.StructuredEvent`` is one); ``$`` then is the IDL ``StructuredEvent``
struct. Any other value is an "any" event and ``$`` is the value itself. Lookups that
do not resolve raise :class:`~siftbus.lang.etcl.anys.EvalError`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from siftbus.lang.etcl.anys import EvalError, Struct, Union, kind, timet_from_unix_ns, utc_t
from siftbus.lang.etcl.syntax import Path, Step

MISSING: Any = object()
"""What :func:`prop` answers for a property that is not there."""

_EV_REPO = "IDL:omg.org/CosNotification/"
FD = Step("name", "filterable_data")


def is_structured(ev: Any) -> bool:
    """Whether ``ev`` is a structured event (rather than an "any" event)."""
    return getattr(ev, "__etcl_structured__", False) is True


def prop(props: Sequence[tuple[str, Any]], name: str) -> Any:
    """The first property called ``name``, or :data:`MISSING`."""
    for n, v in props:
        if n == name:
            return v
    return MISSING


def _props_struct(props: Sequence[tuple[str, Any]]) -> list[Struct]:
    return [Struct("Property", _EV_REPO + "Property:1.0", ("name", "value"), (n, v))
            for n, v in props]


def structured_view(ev: Any) -> Struct:
    """The IDL ``StructuredEvent`` struct of a structured event (what ``$`` denotes)."""
    etype = Struct("EventType", _EV_REPO + "EventType:1.0", ("domain_name", "type_name"),
                   (ev.domain_name, ev.type_name))
    fixed = Struct("FixedEventHeader", _EV_REPO + "FixedEventHeader:1.0",
                   ("event_type", "event_name"), (etype, ev.event_name))
    header = Struct("EventHeader", _EV_REPO + "EventHeader:1.0",
                    ("fixed_header", "variable_header"),
                    (fixed, _props_struct(ev.variable_header)))
    return Struct("StructuredEvent", _EV_REPO + "StructuredEvent:1.0",
                  ("header", "filterable_data", "remainder_of_body"),
                  (header, _props_struct(ev.filterable_data), ev.remainder_of_body))


def curtime() -> Struct:
    """``$curtime``: the current time as a ``TimeBase::UtcT`` struct."""
    return utc_t(timet_from_unix_ns(time.time_ns()))


def runtime_variable(ev: Any, name: str) -> Any:
    """``$name`` on an event; raises :class:`EvalError` if it does not resolve."""
    if name == "curtime":
        return curtime()
    if not is_structured(ev):
        raise EvalError(f"${name}: run-time variables need a structured event")
    if name == "domain_name":
        return ev.domain_name
    if name == "type_name":
        return ev.type_name
    if name == "event_name":
        return ev.event_name
    v = prop(ev.variable_header, name)
    if v is MISSING:
        v = prop(ev.filterable_data, name)
        if v is MISSING:
            raise EvalError(f"${name} is in neither the variable header nor the filterable data")
    return v


def step(value: Any, s: Step) -> Any:
    """One path step from ``value``; raises :class:`EvalError`."""
    k = s.kind
    if k == "name":
        if isinstance(value, Struct):
            return value.member(s.arg)
        if isinstance(value, dict):
            if s.arg in value:
                return value[s.arg]
            raise EvalError(f"no member {s.arg!r}")
        if isinstance(value, Union):
            if value.member == s.arg:
                return value.value
            raise EvalError(f"union member {s.arg!r} is not active")
        raise EvalError(f".{s.arg} on a non-struct")
    if k == "pos":
        if isinstance(value, Struct):
            vals: Sequence[Any] = value.values
        elif isinstance(value, dict):
            vals = list(value.values())
        else:
            raise EvalError(f".{s.arg} on a non-struct")
        if s.arg < len(vals):
            return vals[s.arg]
        raise EvalError(f"struct has no member at position {s.arg}")
    if k == "index":
        if isinstance(value, list | tuple) and s.arg < len(value):
            return value[s.arg]
        raise EvalError(f"[{s.arg}] out of range or not a sequence")
    if k == "assoc":
        if isinstance(value, list | tuple):
            for item in value:
                if isinstance(item, Struct) and item.names == ("name", "value"):
                    if item.values[0] == s.arg:
                        return item.values[1]
                elif isinstance(item, dict) and item.get("name") == s.arg and "value" in item:
                    return item["value"]
        raise EvalError(f"({s.arg}) not found")
    if k == "union":
        if not isinstance(value, Union):
            raise EvalError("union access on a non-union")
        if s.arg is None:
            if value.is_default:
                return value.value
            raise EvalError("union is not on its default member")
        want_kind, want = s.arg
        if kind(value.discriminator) == want_kind and value.discriminator == want:
            return value.value
        raise EvalError("union discriminator does not select this member")
    if k == "length":
        if isinstance(value, list | tuple):
            return len(value)
        raise EvalError("._length on a non-sequence")
    if k == "d":
        if isinstance(value, Union):
            return value.discriminator
        raise EvalError("._d on a non-union")
    if k in ("type_id", "repos_id"):
        tid = getattr(value, k, None)
        if isinstance(tid, str):
            return tid
        raise EvalError(f"._{k} unknown for this value")
    raise AssertionError(k)


def resolve(path: Path, ev: Any) -> Any:
    """The value a component path denotes in ``ev``; raises :class:`EvalError`."""
    steps = path.steps
    if path.var is not None:
        value = runtime_variable(ev, path.var)
    elif is_structured(ev):
        # Fast path for the common structured-event field, without building the view.
        if len(steps) == 2 and steps[0] == FD and steps[1].kind == "assoc":
            v = prop(ev.filterable_data, steps[1].arg)
            if v is MISSING:
                raise EvalError(f"filterable_data({steps[1].arg}) not found")
            return v
        value = structured_view(ev)
    else:
        value = ev
    for s in steps:
        value = step(value, s)
    return value


__all__ = ["FD", "MISSING", "curtime", "is_structured", "prop", "resolve", "runtime_variable",
           "step", "structured_view"]
