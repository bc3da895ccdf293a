"""Propose a schema from sample events (``siftbus schema infer``).

Every JSON object with a ``"type"`` string is a sample of that type; every leaf field
(nested objects become dotted paths) gets the narrowest kind that holds all its samples:

* ``bool`` for ``true``/``false``; ``int[lo,hi]`` for integers (the observed range), ``float``
  once a fraction appears; ``timestamp`` and ``ip`` for strings that all parse as such;
* ``enum[...]`` for a string field with at most :data:`MAX_ENUM` distinct identifier
  values, ``string`` otherwise;
* ``array<...>`` when a sample holds a list (of the kind of its elements);
* ``optional`` when some sample of the type lacks the field (or holds ``null`` or ``[]``,
  which events read as absent).

The proposal is a starting point, to be read and edited: an observed range is not a domain.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from siftbus.errors import DomainError, EventError
from siftbus.model.domain import is_identifier
from siftbus.model.kinds import IpDomain, TimestampDomain
from siftbus.model.schema import MAX_PATH_DEPTH

MAX_ENUM = 12
"""Most distinct values of a string field proposed as an enum."""


@dataclass
class _Field:
    seen: int = 0
    array: bool = False
    values: list[Any] = field(default_factory=list)


def _leaves(obj: Mapping[str, Any], prefix: str = "", depth: int = 1
            ) -> Iterable[tuple[str, Any]]:
    for k, v in obj.items():
        if not is_identifier(k):
            continue  # not addressable as an attribute: left out of the proposal
        path = f"{prefix}{k}"
        if isinstance(v, Mapping) and depth < MAX_PATH_DEPTH:
            yield from _leaves(v, path + ".", depth + 1)
        elif not isinstance(v, Mapping):
            yield path, v


def _parses(domain: Any, values: list[Any]) -> bool:
    try:
        for v in values:
            domain.key(v)
    except DomainError:
        return False
    return True


def _kind(values: list[Any]) -> str:
    if not values:
        return "string"
    if all(isinstance(v, bool) for v in values):
        return "bool"
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return f"int[{min(values)},{max(values)}]"
    if all(isinstance(v, int | float | Decimal) and not isinstance(v, bool) for v in values):
        return "float"
    if all(isinstance(v, str) for v in values):
        if _parses(TimestampDomain(), values):
            return "timestamp"
        if _parses(IpDomain(), values):
            return "ip"
        distinct = sorted(set(values))
        if len(distinct) <= MAX_ENUM and all(is_identifier(v) and v not in ("MIN", "MAX")
                                             for v in distinct):
            return f"enum[{','.join(distinct)}]"
        return "string"
    raise EventError(f"mixed value kinds: {sorted({type(v).__name__ for v in values})}")


def infer_schema(samples: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    """``{type: {path: spec}}`` proposed from ``samples`` (see the module text)."""
    types: dict[str, tuple[list[int], dict[str, _Field]]] = {}
    for obj in samples:
        tname = obj.get("type")
        if not isinstance(tname, str) or not is_identifier(tname):
            raise EventError('every sample needs a "type" that is an identifier')
        count, fields = types.setdefault(tname, ([0], {}))
        count[0] += 1
        for path, v in _leaves({k: x for k, x in obj.items() if k != "type"}):
            if v is None or v == []:  # both read as absent (model.shapes)
                continue
            f = fields.setdefault(path, _Field())
            f.seen += 1
            if isinstance(v, list):
                f.array = True
                f.values.extend(x for x in v if x is not None and not isinstance(x, dict | list))
            else:
                f.values.append(v)
    out: dict[str, dict[str, str]] = {}
    for tname, (count, fields) in types.items():
        table: dict[str, str] = {}
        for path, f in fields.items():
            try:
                kind = _kind(f.values)
            except EventError as exc:
                raise EventError(f"{tname}.{path}: {exc.message}", field=path) from None
            spec = f"array<{kind}>" if f.array else kind
            table[path] = f"optional {spec}" if f.seen < count[0] else spec
        out[tname] = table
    return out


def schema_toml(proposal: Mapping[str, Mapping[str, str]]) -> str:
    """The proposal as a schema file (dotted paths as quoted keys)."""
    lines: list[str] = []
    for tname, table in proposal.items():
        lines.append(f"[{tname}]")
        lines.extend(f'{f"{chr(34)}{p}{chr(34)}" if "." in p else p} = "{spec}"'
                     for p, spec in table.items())
        lines.append("")
    return "\n".join(lines)
