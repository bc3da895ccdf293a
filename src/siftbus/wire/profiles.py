"""Profiles on the wire (codec only, no I/O).

A profile travels as ``[id, subscriber, type, [[position, constraint], ...]]`` where a
constraint is ``[0, lo1, hi1, lo2, hi2, ...]`` (ordered domains; a bound beyond int64,
as an ``ip`` or ``timestamp`` key may be, as signed big-endian bytes) or ``[1, allowed | None,
prefix, excluded]`` (strings), so a broker never parses profile language on the hot path.
The ``texts`` form (profile lines) is accepted too, within tighter limits
(:func:`decode_profile_texts`).

Every profile that enters from the wire is checked against the receiver's
:class:`~siftbus.wire.limits.Limits` (conditions, string length) and refused when one of
its strings cannot be stored as UTF-8 (a lone surrogate such as ``"\\ud800"``, which a
profile line's escapes can produce): what a broker accepts, its store can keep.
"""

from __future__ import annotations

import re
from typing import Any

from siftbus.errors import SiftbusError, WireError
from siftbus.lang.profile import format_profile, parse_profile
from siftbus.model import (
    EventType,
    IntervalSet,
    Profile,
    Schema,
    StringConstraint,
    StringDomain,
)
from siftbus.model.constraint import Constraint

from .extended import int_of, wide_int
from .limits import DEFAULT_LIMITS, Limits

_SURROGATE = re.compile("[\ud800-\udfff]")


def _encode_constraint(c: Constraint) -> list[Any]:
    if isinstance(c, IntervalSet):
        flat: list[Any] = [0]
        for lo, hi in c.intervals:
            flat += (wide_int(lo), wide_int(hi))  # ip and timestamp keys pass int64
        return flat
    return [1, sorted(c.allowed) if c.allowed is not None else None, c.prefix,
            sorted(c.excluded)]


def encode_profile(p: Profile) -> list[Any]:
    """The wire form; a profile with checks (``Profile.extra``: ``or``, string tests,
    ``not exists``) also carries its profile text, from which the receiver rebuilds it."""
    out: list[Any] = [p.id, p.subscriber, p.etype.name,
                      [[c.position, _encode_constraint(c.constraint)] for c in p.conditions]]
    if p.extra is not None:
        out.append(format_profile(p, with_id=False))
    return out


def check_string(s: str, what: str, limits: Limits = DEFAULT_LIMITS) -> str:
    """``s`` if it is within ``limits.max_string`` and encodable as UTF-8, else
    :class:`WireError` (the value is not repeated: it may be huge or unprintable)."""
    if len(s) > limits.max_string:
        raise WireError(f"{what}: a string of {len(s)} characters exceeds the limit of "
                        f"{limits.max_string}", field="max_string")
    if not s.isascii():
        m = _SURROGATE.search(s)
        if m is not None:
            raise WireError(f"{what}: the string holds the lone surrogate "
                            f"U+{ord(m.group()):04X} at character {m.start() + 1}, "
                            "which is not valid Unicode text", field="string")
    return s


def _terms(c: Constraint) -> int:
    if isinstance(c, IntervalSet):
        return len(c.intervals)
    return (len(c.allowed) if c.allowed is not None else 0) + len(c.excluded) + bool(c.prefix)


def check_profile(p: Profile, limits: Limits = DEFAULT_LIMITS) -> Profile:
    """``p`` if it keeps ``limits`` (conditions, strings), else :class:`WireError`."""
    terms = sum(_terms(c.constraint) for c in p.conditions)
    if terms > limits.max_conditions:
        raise WireError(f"profile {p.id[:100]!r} has {terms} conditions, over the limit of "
                        f"{limits.max_conditions}", field="max_conditions")
    what = f"profile {p.id[:100]!r}"
    check_string(p.id, what, limits)
    check_string(p.subscriber, what, limits)
    for c in p.conditions:
        sc = c.constraint
        if isinstance(sc, StringConstraint):
            for v in (*(sc.allowed or ()), sc.prefix, *sc.excluded):
                check_string(v, f"{what}, {c.attr}", limits)
    return p


def _decode_constraint(data: Any, etype: EventType, pos: int, limits: Limits | None
                       ) -> Constraint:
    attr = etype.attributes[pos]
    dom = attr.domain
    if not isinstance(data, list) or not data or data[0] not in (0, 1):
        raise WireError(f"constraint on {attr.name} must be [0, ...] or [1, ...]",
                        field=attr.name)
    if data[0] == 0:
        if isinstance(dom, StringDomain):
            raise WireError(f"{attr.name} is a string attribute", field=attr.name)
        nums = data[1:]
        if limits is not None and len(nums) > 2 * limits.max_conditions:
            raise WireError(f"constraint on {attr.name} has {len(nums) // 2} intervals, over "
                            f"the limit of {limits.max_conditions}", field="max_conditions")
        nums = [int_of(v) for v in nums]
        if len(nums) % 2 or any(v is None for v in nums):
            raise WireError(f"constraint on {attr.name} needs integer lo/hi pairs",
                            field=attr.name)
        ivs: list[tuple[int, int]] = [(nums[i], nums[i + 1])
                                      for i in range(0, len(nums), 2)]
        for lo, hi in ivs:
            if lo > hi:
                raise WireError(f"constraint on {attr.name} has the inverted interval "
                                f"[{lo}, {hi}] (lo > hi)", field=attr.name)
        if any(lo < dom.min_key or hi > dom.max_key for lo, hi in ivs):
            raise WireError(f"constraint on {attr.name} leaves {dom.spec}", field=attr.name)
        return IntervalSet.of(ivs)
    if not isinstance(dom, StringDomain):
        raise WireError(f"{attr.name} is not a string attribute", field=attr.name)
    if len(data) != 4:
        raise WireError(f"string constraint on {attr.name} needs 4 items", field=attr.name)
    _, allowed, prefix, excluded = data
    n = (len(allowed) if isinstance(allowed, list) else 0) + (
        len(excluded) if isinstance(excluded, list) else 0)
    if limits is not None and n > limits.max_conditions:
        raise WireError(f"constraint on {attr.name} lists {n} strings, over the limit of "
                        f"{limits.max_conditions}", field="max_conditions")
    if allowed is not None and not (isinstance(allowed, list)
                                    and all(isinstance(s, str) for s in allowed)):
        raise WireError(f"allowed strings of {attr.name} must be a list", field=attr.name)
    if not isinstance(prefix, str) or not isinstance(excluded, list) or not all(
            isinstance(s, str) for s in excluded):
        raise WireError(f"prefix/excluded of {attr.name} are malformed", field=attr.name)
    return StringConstraint.make(frozenset(allowed) if allowed is not None else None, prefix,
                                 frozenset(excluded))


def decode_profile(data: Any, schema: Schema, limits: Limits | None = DEFAULT_LIMITS
                   ) -> Profile:
    """Check and build a profile from its wire form (the id is checked by ``Profile``,
    conditions and strings by :func:`check_profile` unless ``limits`` is ``None``: a
    neighbour broker's profiles were checked where they entered, and merging may give
    one more intervals than a client may send)."""
    if not isinstance(data, list | tuple) or len(data) not in (4, 5):
        raise WireError("a profile must be [id, subscriber, type, conditions(, text)]")
    if len(data) == 5:
        return _decode_text_form(data, schema, limits)
    pid, subscriber, tname, conds = data
    if not isinstance(pid, str) or not isinstance(subscriber, str) or not isinstance(tname, str):
        raise WireError("profile id, subscriber and type must be strings")
    etype = schema.get(tname)
    if etype is None:
        raise WireError(f"unknown event type {tname!r}", field="type")
    if not isinstance(conds, list):
        raise WireError("profile conditions must be a list")
    constraints: dict[str, Constraint] = {}
    for item in conds:
        if not isinstance(item, list) or len(item) != 2:
            raise WireError("a condition must be [position, constraint]", field="conditions")
        pos = item[0]
        if isinstance(pos, bool) or not isinstance(pos, int) \
                or not 0 <= pos < len(etype.attributes):
            raise WireError(f"condition position {str(pos)[:20]} is no attribute of "
                            f"{tname} (0-{len(etype.attributes) - 1})", field="conditions")
        name = etype.attributes[item[0]].name
        if name in constraints:
            raise WireError(f"attribute {name} is constrained twice", field=name)
        constraints[name] = _decode_constraint(item[1], etype, item[0], limits)
    try:
        p = Profile.from_constraints(pid, etype, constraints, subscriber)
    except SiftbusError as exc:
        raise WireError(f"profile {pid[:100]!r}: {exc.message}", field=exc.field) from None
    return p if limits is None else check_profile(p, limits)


def _decode_text_form(data: Any, schema: Schema, limits: Limits | None) -> Profile:
    """A profile with checks: rebuilt from its text by the grammar (the conditions sent
    beside it are what an older reader would use; the text is the profile)."""
    pid, subscriber, tname, _, text = data
    if not all(isinstance(v, str) for v in (pid, subscriber, tname, text)):
        raise WireError("profile id, subscriber, type and text must be strings")
    cap = (limits or DEFAULT_LIMITS).max_profile_text
    if len(text) > cap:
        raise WireError(f"profile text of {len(text)} characters, over the limit of {cap}",
                        field="max_profile_text")
    try:
        # the id is checked as in the structured form: a broker's gid or a composite
        # component's id ("composite:c/a") is no profile-line id, and need not be
        p = parse_profile(text, schema, id="_").with_id(pid, subscriber)
    except SiftbusError as exc:
        raise WireError(f"profile {pid[:100]!r}: {exc.message}", field=exc.field) from None
    if p.type_name != tname:
        raise WireError(f"profile {pid[:100]!r}: its text is for {p.type_name}, not {tname}",
                        field="type")
    return p if limits is None else check_profile(p, limits)


def decode_profiles(data: Any, schema: Schema, limits: Limits = DEFAULT_LIMITS,
                    *, what: str = "profiles") -> list[Profile]:
    """A list of wire profiles (at most ``limits.max_profiles``)."""
    check_count(data, what, limits)
    return [decode_profile(item, schema, limits) for item in data]


def check_count(items: Any, what: str, limits: Limits = DEFAULT_LIMITS) -> list[Any]:
    """``items`` if it is a list of at most ``limits.max_profiles`` entries."""
    if not isinstance(items, list):
        raise WireError(f"{what} must be a list", field=what)
    if len(items) > limits.max_profiles:
        raise WireError(f"{len(items)} {what} in one request, over the limit of "
                        f"{limits.max_profiles}", field="max_profiles")
    return items


def decode_profile_texts(texts: Any, schema: Schema, limits: Limits = DEFAULT_LIMITS
                         ) -> list[Profile]:
    """Profiles from profile lines (the ``texts`` form of SUB/ADV), parsed with the
    profile grammar; errors name the text (``profile 2``) and its column."""
    check_count(texts, "texts", limits)
    if not all(isinstance(t, str) for t in texts):
        raise WireError("profile texts must be strings", field="texts")
    size = sum(len(t) for t in texts)
    if size > limits.max_profile_text:
        raise WireError(f"{size} characters of profile text in one request, over the "
                        f"limit of {limits.max_profile_text} (send structured profiles)",
                        field="max_profile_text")
    out = []
    for i, text in enumerate(texts):
        try:
            out.append(check_profile(parse_profile(text, schema), limits))
        except SiftbusError as exc:
            raise exc.located(source=f"profile {i + 1}") from None
    return out
