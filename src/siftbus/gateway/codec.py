"""JSON in and out of the gateway, per batch rather than per event.

Out: :func:`block_events` turns a columnar event block (what a NOTIFY frame carries) into
the event-file JSON objects with one list operation per attribute, not one Python call
per value; :func:`dumps` encodes with orjson (several times faster than ``json`` on the
gateway's messages, ``bench/gateway.py``).

In: :func:`fast_event_object` reads one event with orjson when the text is plainly an
event -- a flat object of integers and strings, no escapes -- and proves it holds no
repeated key; anything else (fractions, escapes, nesting, errors) returns ``None`` and
the caller reads it with the exact reader (:func:`siftbus.model.textio.parse_json_line`),
which stays the reference: ``tests/gateway/test_codec.py`` checks with hypothesis that
both give the same events and refuse the same lines.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import numpy as np
import orjson

from siftbus.model import (
    DecimalDomain,
    EnumDomain,
    Event,
    IntDomain,
    Schema,
    StringDomain,
)
from siftbus.wire.events import Block

_EXACT_FLOAT = 2**53
"""Keys below this are exact in a float64, so ``key / 10**places`` rounds once, like
``float(Decimal(key).scaleb(-places))``."""


def dumps_bytes(msg: Any) -> bytes:
    """One JSON text as UTF-8 (orjson; what it cannot encode -- an integer over 64 bits
    -- goes through ``json``, so any message ``json.dumps`` takes is encoded)."""
    try:
        return orjson.dumps(msg, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:
        return json.dumps(msg).encode()


def dumps(msg: Any) -> str:
    """:func:`dumps_bytes` as text."""
    return dumps_bytes(msg).decode()


def _column(block: Block, position: int, domain: Any) -> list[Any]:
    """The JSON values of one attribute for every row (as ``Event.to_json_dict``)."""
    col = block.keys[:, position]
    if isinstance(domain, IntDomain):
        return col.astype(np.int64, copy=False).tolist()
    if isinstance(domain, StringDomain):
        return col.tolist()
    if isinstance(domain, EnumDomain):
        labels = domain.labels
        return [labels[k] for k in col.tolist()]
    if isinstance(domain, DecimalDomain):
        ints = col.astype(np.int64, copy=False)
        if len(ints) and int(np.abs(ints).max()) >= _EXACT_FLOAT:
            return [float(Decimal(k).scaleb(-domain.places)) for k in ints.tolist()]
        return (ints / domain.scale).tolist()
    out = []
    for k in col.tolist():  # a domain kind without a column rule: value by value
        v = domain.value(k)
        out.append(float(v) if isinstance(v, Decimal) else v)
    return out


def block_events(block: Block) -> list[dict[str, Any]]:
    """The event-file JSON object of every row of ``block`` (equal to
    ``[e.to_json_dict() for e in block.events()]``)."""
    et = block.etype
    if et.extended:  # absent values, arrays, nested paths: the model writes them
        return [e.to_json_dict() for e in block.events()]
    names = ("type", *(a.name for a in et.attributes))
    cols = [_column(block, a.position, a.domain) for a in et.attributes]
    return [dict(zip(names, row, strict=True))
            for row in zip([et.name] * len(block), *cols, strict=True)]


def _quotes(obj: dict[str, Any]) -> int | None:
    """The quotes a flat object of integers and strings is written with (when its text
    has no escapes: two per key and per string value), ``None`` for any other object
    (fractions need exact decimals; bools, null and nesting the exact reader)."""
    strings = 0
    for v in obj.values():
        t = type(v)
        if t is str:
            strings += 1
        elif t is not int:
            return None
    return 2 * (len(obj) + strings)


def _loads_unescaped(text: str) -> Any:
    """``orjson.loads(text)`` when the text has no escapes (quotes inside strings,
    surrogates) and is valid JSON, else ``None`` (the exact reader decides)."""
    if "\\" in text:
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return None


def fast_event_object(line: str) -> dict[str, Any] | None:
    """The JSON object of an event line when it is plainly one (see the module
    docstring), else ``None`` (then read it with the exact reader)."""
    data = _loads_unescaped(line)
    if type(data) is not dict:
        return None
    # without escapes every '"' delimits a key or a string value: a repeated key
    # (which orjson would silently merge) leaves more quotes than the object has
    if _quotes(data) != line.count('"'):
        return None
    return data


def fast_event_array(text: str) -> list[dict[str, Any]] | None:
    """The objects of a JSON array of events (or of one event) when every item is
    plainly one, else ``None`` (then read the body with the exact reader)."""
    data = _loads_unescaped(text)
    if type(data) is dict:
        data = [data]
    if type(data) is not list:
        return None
    quotes = 0
    for item in data:
        q = _quotes(item) if type(item) is dict else None
        if q is None:
            return None
        quotes += q
    if text.count('"') != quotes:
        return None
    return data


def _keys(values: list[Any], domain: Any) -> list[Any] | None:
    """The keys of one attribute's values, ``None`` where a value is not plainly valid
    (the domain's own check then says why); ``None`` for a domain without a rule."""
    if isinstance(domain, IntDomain):
        lo, hi = domain.lo, domain.hi
        return [v if type(v) is int and lo <= v <= hi else None for v in values]
    if isinstance(domain, EnumDomain):
        ordinal = domain.ordinals
        return [ordinal.get(v) if type(v) is str else None for v in values]
    if isinstance(domain, StringDomain):
        return [v if type(v) is str else None for v in values]
    return None  # decimals: the exact reader


def plain_events(objs: list[dict[str, Any]], schema: Schema) -> list[Event | None]:
    """The event of each object (as ``event_from_dict`` builds it), checked a type and
    an attribute at a time; ``None`` where an object is not plainly a valid event (ask
    ``event_from_dict`` for the reason)."""
    out: list[Event | None] = [None] * len(objs)
    groups: dict[str, list[int]] = {}
    for i, d in enumerate(objs):
        t = d.get("type")
        if type(t) is str:
            groups.setdefault(t, []).append(i)
    for tname, idx in groups.items():
        et = schema.get(tname)
        if et is None:
            continue
        want = {"type", *(a.name for a in et.attributes)}
        idx = [i for i in idx if objs[i].keys() == want]  # every attribute, once
        cols = []
        for a in et.attributes:
            keys = _keys([objs[i][a.name] for i in idx], a.domain)
            if keys is None:
                break
            cols.append(keys)
        else:
            for i, row in zip(idx, zip(*cols, strict=True), strict=True):
                if None not in row:
                    out[i] = Event(et, row)
    return out


__all__ = ["block_events", "dumps", "dumps_bytes", "fast_event_array",
           "fast_event_object", "plain_events"]
