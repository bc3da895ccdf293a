"""EventBridge / event-ruler JSON patterns, read as profiles and printed from them.

A pattern file holds one ``{"id": ..., "pattern": {...}}`` object per line. A pattern is
turned into a profile *line* of the profile language and read by the grammar, so every
check and refusal of the language applies, with the same semantics:

==========================================  ===========================================
pattern                                     profile condition
==========================================  ===========================================
``"f": ["a", 5, true]``                     ``(f = "a" or f = 5 or f = true)``
``{"prefix": "x"}``, ``{"suffix": "x"}``    ``f prefix "x"``, ``f suffix "x"``
``{"prefix": {"equals-ignore-case": "x"}}`` ``f prefix "x" ignorecase`` (suffix alike)
``{"equals-ignore-case": "x"}``             ``f = "x" ignorecase``
``{"wildcard": "a*b"}``                     ``f like "a*b"``
``{"anything-but": ["a", "b"]}``            ``f not in {"a", "b"}`` (also one value)
``{"anything-but": {"prefix": "x"}}``       ``f not prefix "x"`` (suffix, wildcard alike)
``{"numeric": [">", 0, "<=", 5]}``          ``(f > 0, f <= 5)``
``{"exists": true}`` / ``false``            ``f exists`` / ``f not exists``
``{"cidr": "10.0.0.0/8"}``                  ``f cidr "10.0.0.0/8"``
``null``                                    ``f not exists`` (null is absent here)
``{"a": {"b": [...]}}``                     the path ``a.b``
``"$or": [{...}, {...}]``                   ``(...) or (...)``
==========================================  ===========================================

The event type is the pattern's ``"type": ["T"]`` (one name) or the one given by the
caller. ``anything-but`` with ``equals-ignore-case`` has no profile form and is refused.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from siftbus.errors import ProfileError, SiftbusError
from siftbus.lang.profile import parse_profile
from siftbus.model import Profile, Schema, StringConstraint
from siftbus.model.checks import Check
from siftbus.model.constraint import IntervalSet
from siftbus.model.domain import AnyDomain, StringDomain
from siftbus.model.kinds import FloatDomain, Int64Domain, IpDomain, cidr_interval
from siftbus.model.textio import parse_json_line

_NUMERIC_OPS = {"=", "<", "<=", ">", ">="}


def _lit(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, int):
        return repr(v)
    if isinstance(v, float):
        text = repr(v)
        return text if "e" not in text else format(Decimal(text), "f")
    return str(v)  # a Decimal from the JSON reader


def _refuse(path: str, what: str) -> ProfileError:
    return ProfileError(f"pattern field {path!r}: {what}")


def _matcher(path: str, m: object) -> str:
    """One element of a field's list: a condition (maybe parenthesized) of the language."""
    if m is None:
        return f"{path} not exists"
    if not isinstance(m, dict):
        return f"{path} = {_lit(m)}"
    if len(m) != 1:
        raise _refuse(path, f"a matcher object has exactly one key, not {sorted(m)}")
    (key, arg), = m.items()
    if key in ("prefix", "suffix"):
        if isinstance(arg, dict) and set(arg) == {"equals-ignore-case"}:
            return f"{path} {key} {_lit(arg['equals-ignore-case'])} ignorecase"
        return f"{path} {key} {_lit(arg)}"
    if key == "equals-ignore-case":
        return f"{path} = {_lit(arg)} ignorecase"
    if key == "wildcard":
        return f"{path} like {_lit(arg)}"
    if key == "exists":
        return f"{path} exists" if arg is True else f"{path} not exists"
    if key == "cidr":
        return f"{path} cidr {_lit(arg)}"
    if key == "numeric":
        if not isinstance(arg, list) or len(arg) not in (2, 4):
            raise _refuse(path, "numeric takes [op, value] or [op, value, op, value]")
        conds = []
        for op, v in zip(arg[::2], arg[1::2], strict=True):
            if op not in _NUMERIC_OPS or isinstance(v, bool | str):
                raise _refuse(path, f"numeric {op!r} {v!r} is not a comparison")
            conds.append(f"{path} {op} {_lit(v)}")
        return "(" + ", ".join(conds) + ")" if len(conds) > 1 else conds[0]
    if key == "anything-but":
        if isinstance(arg, dict):
            if len(arg) != 1:
                raise _refuse(path, "anything-but takes one matcher")
            (k2, a2), = arg.items()
            forms = {"prefix": "prefix", "suffix": "suffix", "wildcard": "like"}
            if k2 not in forms:
                raise _refuse(path, f"anything-but {k2!r} has no profile form")
            return f"{path} not {forms[k2]} {_lit(a2)}"
        values = arg if isinstance(arg, list) else [arg]
        return f"{path} not in {{{', '.join(_lit(v) for v in values)}}}"
    raise _refuse(path, f"unknown matcher {key!r}")


def _conditions(pattern: dict[str, Any], prefix: str) -> list[str]:
    out: list[str] = []
    for key, value in pattern.items():
        if key == "$or":
            if not isinstance(value, list) or len(value) < 2:
                raise _refuse(prefix or "$or", "$or takes a list of at least two patterns")
            alts = [", ".join(_conditions(v, prefix)) if isinstance(v, dict) else "" for v in value]
            out.append(" or ".join(f"({a})" for a in alts))
            continue
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            out.extend(_conditions(value, path + "."))
        elif isinstance(value, list) and value:
            if len(value) > 1 and all(isinstance(m, str | int | float) for m in value):
                out.append(f"{path} in {{{', '.join(_lit(m) for m in value)}}}")
                continue
            parts = [_matcher(path, m) for m in value]
            out.append(parts[0] if len(parts) == 1 else "(" + " or ".join(parts) + ")")
        else:
            raise _refuse(path, "a field holds a non-empty list of matchers or an object")
    return out


def pattern_to_text(pid: str, pattern: object, type_name: str | None = None) -> str:
    """The profile line that means ``pattern`` (type from ``"type"`` or ``type_name``)."""
    if not isinstance(pattern, dict):
        raise ProfileError("a pattern is a JSON object")
    body = dict(pattern)
    found = body.pop("type", None)
    if found is not None:
        if not (isinstance(found, list) and len(found) == 1 and isinstance(found[0], str)):
            raise ProfileError('"type" must be a list of one event type name')
        type_name = found[0]
    if type_name is None:
        raise ProfileError('the pattern names no event type: add "type": ["T"] or --type T')
    return f"{pid}: {type_name}({', '.join(_conditions(body, ''))})"


def parse_pattern(pid: str, pattern: object, schema: Schema, type_name: str | None = None,
                  *, source: str | None = None, line: int = 1) -> Profile:
    """The profile of one pattern (errors name the pattern's line)."""
    try:
        text = pattern_to_text(pid, pattern, type_name)
        return parse_profile(text, schema, source=source, line=line)
    except SiftbusError as exc:
        raise ProfileError(f"pattern {pid}: {exc.message}", source=source, line=line) from None


def read_pattern_lines(text: str, schema: Schema, type_name: str | None = None, *,
                       source: str | None = None) -> Iterator[Profile]:
    """The profiles of a pattern file's text (``{"id": ..., "pattern": {...}}`` lines)."""
    for n, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        obj = parse_json_line(raw, source=source, line=n, kind=ProfileError)
        if not isinstance(obj, dict) or not isinstance(obj.get("id"), str) \
                or "pattern" not in obj:
            raise ProfileError('a pattern line is {"id": "...", "pattern": {...}}',
                               source=source, line=n, column=1)
        yield parse_pattern(obj["id"], obj["pattern"], schema, type_name, source=source,
                            line=n)


# -- printing ---------------------------------------------------------------------------


def _number(domain: AnyDomain, key: int) -> object:
    v = domain.value(key)
    return v if isinstance(v, int | float) else float(v)


def _constraint_matchers(path: str, domain: AnyDomain, c: object) -> list[object]:
    if isinstance(c, StringConstraint):
        if c.allowed is not None:
            return list(sorted(c.allowed))
        if c.prefix and c.excluded:
            raise _refuse(path, "prefix with exclusions has no single pattern")
        if c.prefix:
            return [{"prefix": c.prefix}]
        if c.excluded:
            return [{"anything-but": sorted(c.excluded)}]
        return [{"exists": True}]
    assert isinstance(c, IntervalSet) and not isinstance(domain, StringDomain)
    out: list[object] = []
    for lo, hi in c.intervals:
        if isinstance(domain, IpDomain):
            out.append({"cidr": _cidr_of(path, domain, lo, hi)})
        elif lo == hi:
            out.append(domain.value(lo))
        elif isinstance(domain, FloatDomain | Int64Domain) or domain.spec.startswith(
                ("int[", "decimal[")):
            rng: list[object] = []
            if lo != domain.min_key:  # the shorter of >= lo and > (lo - 1)
                rng += _shorter(domain, [">=", lo], [">", lo - 1])
            if hi != domain.max_key:
                rng += _shorter(domain, ["<=", hi], ["<", hi + 1])
            out.append({"numeric": rng} if rng else {"exists": True})
        else:
            out.extend(domain.value(k) for k in range(lo, hi + 1))
    return out


def _shorter(domain: AnyDomain, a: list[object], b: list[object]) -> list[object]:
    """``[op, number]`` of the shorter of two bounds given as ``[op, key]``, only one whose
    number reads back as its key (a double's key -1 is ``-0.0``, which reads as ``0.0``)."""
    def number(bound: list[object]) -> list[object]:
        assert isinstance(bound[1], int)
        return [bound[0], _number(domain, bound[1])]

    na, nb = number(a), number(b)
    if domain.key(na[1]) != a[1]:
        return nb
    if domain.key(nb[1]) != b[1]:
        return na
    return na if len(repr(na[1])) <= len(repr(nb[1])) else nb


def _cidr_of(path: str, domain: IpDomain, lo: int, hi: int) -> str:
    size = hi - lo + 1
    bits = size.bit_length() - 1
    if size & (size - 1) == 0 and lo % size == 0:
        v4 = lo >> 32 == 0xFFFF and bits <= 32
        base = domain.value(lo)
        text = f"{base}/{(32 if v4 else 128) - bits}"
        if cidr_interval(text) == (lo, hi):
            return text
    raise _refuse(path, "an address range that is not one CIDR block")


def _check_matcher(path: str, domain: AnyDomain, ch: Check) -> list[object]:
    if ch.op == "absent":
        return [{"exists": False}]
    if ch.op == "in":
        return _constraint_matchers(path, domain, ch.operand)
    simple = {"prefix": "prefix", "suffix": "suffix", "like": "wildcard"}
    if ch.negated:
        if ch.op in simple:
            return [{"anything-but": {simple[ch.op]: ch.operand}}]
        raise _refuse(path, f"'not {ch.op}' has no pattern form")
    if ch.op in simple:
        return [{simple[ch.op]: ch.operand}]
    if ch.op == "eqi":
        return [{"equals-ignore-case": ch.operand}]
    if ch.op in ("prefixi", "suffixi"):
        return [{ch.op[:-1]: {"equals-ignore-case": ch.operand}}]
    raise _refuse(path, f"{ch.op} has no pattern form")


def _put(out: dict[str, Any], path: str, matchers: list[object]) -> None:
    node = out
    *parents, leaf = path.split(".")
    for p in parents:
        node = node.setdefault(p, {})
    if leaf in node:
        raise _refuse(path, "two conditions on one field have no pattern form")
    node[leaf] = matchers


def profile_to_pattern(profile: Profile) -> dict[str, Any]:
    """The event-ruler pattern of ``profile`` (with ``"type"``); :class:`ProfileError`
    when it has no such form (two conditions on one field, ``contains``, ``matches``)."""
    etype = profile.etype
    out: dict[str, Any] = {"type": [etype.name]}
    for c in profile.conditions:
        _put(out, c.attr, _constraint_matchers(c.attr, etype.attribute(c.attr).domain,
                                               c.constraint))

    def conj(checks: tuple[Check, ...]) -> dict[str, Any]:
        part: dict[str, Any] = {}
        for ch in checks:
            _put(part, ch.attr, _check_matcher(ch.attr, etype.attribute(ch.attr).domain, ch))
        return part

    extra = profile.extra or ()
    if len(extra) == 1:
        for k, v in conj(extra[0]).items():
            if k in out:
                raise _refuse(k, "two conditions on one field have no pattern form")
            out[k] = v
    elif extra:
        out["$or"] = [conj(c) for c in extra]
    return out


def format_pattern_line(profile: Profile) -> str:
    """One ``{"id": ..., "pattern": ...}`` line."""
    return json.dumps({"id": profile.id, "pattern": profile_to_pattern(profile)},
                      ensure_ascii=False)
