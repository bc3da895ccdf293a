"""Profiles on the wire (codec only, no I/O).

A profile travels as ``[id, subscriber, type, [[position, constraint], ...]]`` where a
constraint is ``[0, lo1, hi1, lo2, hi2, ...]`` (ordered domains) or ``[1, allowed | None,
prefix, excluded]`` (strings), so a broker never parses profile language on the hot path.
"""

from __future__ import annotations

from typing import Any

from siftbus.errors import SiftbusError, WireError
from siftbus.model import (
    EventType,
    IntervalSet,
    Profile,
    Schema,
    StringConstraint,
    StringDomain,
)
from siftbus.model.constraint import Constraint


def _encode_constraint(c: Constraint) -> list[Any]:
    if isinstance(c, IntervalSet):
        flat: list[Any] = [0]
        for lo, hi in c.intervals:
            flat += (lo, hi)
        return flat
    return [1, sorted(c.allowed) if c.allowed is not None else None, c.prefix,
            sorted(c.excluded)]


def encode_profile(p: Profile) -> list[Any]:
    return [p.id, p.subscriber, p.etype.name,
            [[c.position, _encode_constraint(c.constraint)] for c in p.conditions]]


def _decode_constraint(data: Any, etype: EventType, pos: int) -> Constraint:
    attr = etype.attributes[pos]
    dom = attr.domain
    if not isinstance(data, list) or not data or data[0] not in (0, 1):
        raise WireError(f"constraint on {attr.name} must be [0, ...] or [1, ...]",
                        field=attr.name)
    if data[0] == 0:
        if isinstance(dom, StringDomain):
            raise WireError(f"{attr.name} is a string attribute", field=attr.name)
        nums = data[1:]
        if len(nums) % 2 or not all(isinstance(v, int) and not isinstance(v, bool)
                                    for v in nums):
            raise WireError(f"constraint on {attr.name} needs integer lo/hi pairs",
                            field=attr.name)
        ivs = [(nums[i], nums[i + 1]) for i in range(0, len(nums), 2)]
        if any(lo > hi or lo < dom.min_key or hi > dom.max_key for lo, hi in ivs):
            raise WireError(f"constraint on {attr.name} leaves {dom.spec}", field=attr.name)
        return IntervalSet.of(ivs)
    if not isinstance(dom, StringDomain):
        raise WireError(f"{attr.name} is not a string attribute", field=attr.name)
    if len(data) != 4:
        raise WireError(f"string constraint on {attr.name} needs 4 items", field=attr.name)
    _, allowed, prefix, excluded = data
    if allowed is not None and not (isinstance(allowed, list)
                                    and all(isinstance(s, str) for s in allowed)):
        raise WireError(f"allowed strings of {attr.name} must be a list", field=attr.name)
    if not isinstance(prefix, str) or not isinstance(excluded, list) or not all(
            isinstance(s, str) for s in excluded):
        raise WireError(f"prefix/excluded of {attr.name} are malformed", field=attr.name)
    return StringConstraint.make(frozenset(allowed) if allowed is not None else None, prefix,
                                 frozenset(excluded))


def decode_profile(data: Any, schema: Schema) -> Profile:
    """Check and build a profile from its wire form (the id is checked by ``Profile``)."""
    if not isinstance(data, list | tuple) or len(data) != 4:
        raise WireError("a profile must be [id, subscriber, type, conditions]")
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
        if (not isinstance(item, list) or len(item) != 2 or not isinstance(item[0], int)
                or not 0 <= item[0] < len(etype.attributes)):
            raise WireError("a condition must be [position, constraint]")
        name = etype.attributes[item[0]].name
        if name in constraints:
            raise WireError(f"attribute {name} is constrained twice", field=name)
        constraints[name] = _decode_constraint(item[1], etype, item[0])
    try:
        return Profile.from_constraints(pid, etype, constraints, subscriber)
    except SiftbusError as exc:
        raise WireError(f"profile {pid!r}: {exc.message}", field=exc.field) from None
