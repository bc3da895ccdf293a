"""CORBA Any values on the channel, and their JSON (and msgpack) form.

An any is ``None``, a bool, int, float, str, bytes, a list (sequence), a dict (an
anonymous struct), a :class:`Struct` (a named struct) or a :class:`Union` (the classes
are the ETCL value model, :mod:`siftbus.lang.etcl.anys`, re-exported here). On the wire
a named struct and a union travel in tagged form; everything else is itself::

    {"@struct": {"type_id": "Point", "repos_id": "IDL:Point:1.0", "members": {"x": 1}}}
    {"@union": {"d": 1, "value": "one", "member": "first", "default": false,
                "type_id": "U", "repos_id": "IDL:U:1.0"}}

Decoding is bounded: a value nests at most :data:`MAX_VALUE_DEPTH` containers deep
(deeper input is an :class:`~siftbus.errors.EventError`, never a RecursionError), and a
malformed tagged form is an EventError too. JSON text is read by
:func:`siftbus.model.textio.parse_json_line`, the one loader of outside JSON.
"""

from __future__ import annotations

from typing import Any

from siftbus.errors import EventError
from siftbus.lang.etcl import Struct, Union

MAX_VALUE_DEPTH = 100
"""Containers (lists, objects, tagged forms) an any may nest."""

_SCALARS = frozenset({int, float, str, bool, type(None), bytes})
_UNION_KEYS = frozenset({"d", "value", "member", "default", "type_id", "repos_id"})
_STRUCT_KEYS = frozenset({"type_id", "repos_id", "members"})


def from_json_value(value: Any, *, max_depth: int = MAX_VALUE_DEPTH) -> Any:
    """Decode an any from its JSON/msgpack form; raises :class:`EventError` on a
    malformed tagged form or a value nested deeper than ``max_depth``."""
    t = type(value)
    if t in _SCALARS:
        return value
    if t is list and all(type(v) in _SCALARS for v in value):
        return value  # the common payload: a flat array, shared rather than copied
    return _decode(value, max_depth, max_depth)


def _decode(value: Any, budget: int, limit: int) -> Any:
    if type(value) in _SCALARS:
        return value
    if not isinstance(value, dict | list | tuple):
        return value
    if budget <= 0:
        raise EventError(f"value nests deeper than {limit} levels")
    inner = budget - 1
    if isinstance(value, dict):
        if len(value) == 1 and "@union" in value and isinstance(value["@union"], dict):
            return _union(value["@union"], inner, limit)
        if len(value) == 1 and "@struct" in value and isinstance(value["@struct"], dict):
            return _struct(value["@struct"], inner, limit)
        return {k: _decode(v, inner, limit) for k, v in value.items()}
    return [_decode(v, inner, limit) for v in value]


def _union(u: dict[Any, Any], budget: int, limit: int) -> Union:
    unknown = u.keys() - _UNION_KEYS
    if unknown:
        raise EventError(f"@union has unknown field(s) {_names(unknown)}", field="@union")
    member, type_id, repos_id = u.get("member"), u.get("type_id"), u.get("repos_id")
    for name, v in (("member", member), ("type_id", type_id), ("repos_id", repos_id)):
        if v is not None and not isinstance(v, str):
            raise EventError(f"@union {name} must be a string", field="@union")
    default = u.get("default", False)
    if not isinstance(default, bool):
        raise EventError("@union default must be true or false", field="@union")
    return Union(_decode(u.get("d"), budget - 1, limit), _decode(u.get("value"), budget - 1,
                                                                 limit),
                 member, default, type_id, repos_id)


def _struct(s: dict[Any, Any], budget: int, limit: int) -> Struct:
    unknown = s.keys() - _STRUCT_KEYS
    if unknown:
        raise EventError(f"@struct has unknown field(s) {_names(unknown)}", field="@struct")
    type_id, repos_id = s.get("type_id", ""), s.get("repos_id", "")
    if not isinstance(type_id, str) or not isinstance(repos_id, str):
        raise EventError("@struct type_id and repos_id must be strings", field="@struct")
    members = s.get("members")
    if members is None:
        members = {}
    if not isinstance(members, dict) or not all(isinstance(k, str) for k in members):
        raise EventError("@struct members must be an object", field="@struct")
    return Struct(type_id, repos_id, tuple(members),
                  tuple(_decode(v, budget - 1, limit) for v in members.values()))


def _names(keys: Any) -> str:
    return ", ".join(sorted(repr(k)[:40] for k in keys)[:5])


def to_json_value(value: Any) -> Any:
    """The JSON/msgpack form of an any (inverse of :func:`from_json_value`)."""
    t = type(value)
    if t in _SCALARS:
        return value
    if t is list and all(type(v) in _SCALARS for v in value):
        return value
    if isinstance(value, Union):
        u: dict[str, Any] = {"d": to_json_value(value.discriminator),
                             "value": to_json_value(value.value)}
        if value.member is not None:
            u["member"] = value.member
        if value.is_default:
            u["default"] = True
        if value.type_id is not None:
            u["type_id"] = value.type_id
        if value.repos_id is not None:
            u["repos_id"] = value.repos_id
        return {"@union": u}
    if isinstance(value, Struct):
        return {"@struct": {"type_id": value.type_id, "repos_id": value.repos_id,
                            "members": {n: to_json_value(v)
                                        for n, v in zip(value.names, value.values,
                                                        strict=True)}}}
    if isinstance(value, dict):
        return {k: to_json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_json_value(v) for v in value]
    return value


__all__ = ["MAX_VALUE_DEPTH", "Struct", "Union", "from_json_value", "to_json_value"]
