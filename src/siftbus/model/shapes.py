"""Event shapes beyond "every attribute once": optional, nested and array attributes.

An event of an *extended* type (see :attr:`EventType.extended`) keeps one key per
attribute like every event, with two more shapes of key:

* ``None``: the attribute is absent (allowed only when it is ``optional``; JSON ``null``
  counts as absent);
* a ``tuple`` of keys: the elements of an ``array`` attribute (a single value is read as a
  one-element array; an empty array is treated as absent, as event-ruler does).

Nested attributes are dotted paths (``order.customer.tier``) looked up through nested JSON
objects; on the way, an array of objects contributes the field of every element (so
``items.sku`` of ``{"items": [{"sku": "a"}, {"sku": "b"}]}`` is ``("a", "b")``, for an
attribute declared ``array<string>``). Fields the schema does not declare are ignored: web
documents carry more than any one filter needs.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from siftbus.errors import DomainError, EventError
from siftbus.model.domain import Key
from siftbus.model.schema import Attribute, EventType

_ABSENT = object()


def _lookup(values: Mapping[str, object], path: str) -> object:
    """The value at a dotted path; a list on the way maps over its elements."""
    current: list[object] = [values]
    found_list = False
    for part in path.split("."):
        nxt: list[object] = []
        for node in current:
            if isinstance(node, list):
                found_list = True
                nxt.extend(e[part] for e in node if isinstance(e, Mapping) and part in e)
            elif isinstance(node, Mapping) and part in node:
                nxt.append(node[part])
        current = nxt
        if not current:
            return _ABSENT
    if found_list:
        flat: list[object] = []
        for v in current:
            flat.extend(v if isinstance(v, list) else [v])
        return flat
    return current[0]


def attribute_key(etype: EventType, attr: Attribute, raw: object) -> Key | tuple[Key, ...] | None:
    """The key of one attribute of an event (``None`` when absent)."""
    where = f"{etype.name}.{attr.name}"
    if raw is _ABSENT or raw is None or (attr.array and raw == []):
        if attr.optional:
            return None
        raise EventError(f"{etype.name} event lacks attribute {attr.name}", field=attr.name)
    try:
        if attr.array:
            items = raw if isinstance(raw, list) else [raw]
            return tuple(attr.domain.key(v) for v in items)
        if isinstance(raw, list):
            raise DomainError(f"{attr.name} holds one value, not an array (declare it "
                              "array<...>)")
        return attr.domain.key(raw)
    except DomainError as exc:
        raise DomainError(f"{where}: {exc.message}", field=attr.name.split(".")[0]) from None


def extended_keys(etype: EventType, values: Mapping[str, object]) -> tuple[Any, ...]:
    """The keys of an event of an extended type, in schema order."""
    return tuple(attribute_key(etype, a, _lookup(values, a.name)) for a in etype.attributes)


def _json_value(attr: Attribute, key: Any) -> object:
    def one(k: Key) -> object:
        v = attr.domain.value(k)
        return float(v) if isinstance(v, Decimal) else v

    return [one(k) for k in key] if attr.array else one(key)


def extended_json_dict(etype: EventType, keys: tuple[Any, ...]) -> dict[str, Any]:
    """The JSON object of an extended event (nested paths as nested objects)."""
    out: dict[str, Any] = {"type": etype.name}
    for attr, key in zip(etype.attributes, keys, strict=True):
        if key is None:
            continue
        node = out
        *parents, leaf = attr.name.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = _json_value(attr, key)
    return out
