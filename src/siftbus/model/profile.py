"""Profiles: a conjunction of conditions on one event type, with an id and a subscriber."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from siftbus.errors import ProfileError, SiftbusError, UnsatisfiableProfileError
from siftbus.model.constraint import Constraint, IntervalSet, StringConstraint
from siftbus.model.domain import AnyDomain, StringDomain, Value, is_identifier
from siftbus.model.event import Event
from siftbus.model.predicate import Op, Predicate
from siftbus.model.schema import EventType


@dataclass(frozen=True, slots=True)
class Condition:
    """The normalised constraint of a profile on one attribute."""

    attr: str
    position: int
    constraint: Constraint

    def accepts(self, event: Event) -> bool:
        return event.keys[self.position] in self.constraint


def _valid_id(text: str) -> bool:
    return bool(text) and all(c.isalnum() or c in "_-./" for c in text)


@dataclass(frozen=True, slots=True)
class Profile:
    """A subscription filter: every condition must hold (conjunction).

    ``conditions`` hold one normalised constraint per constrained attribute, in schema
    order; attributes a profile leaves free do not appear. Build profiles with
    :meth:`build` (or the profile language), which normalises and validates.
    """

    id: str
    etype: EventType
    conditions: tuple[Condition, ...]
    subscriber: str = ""

    @property
    def type_name(self) -> str:
        return self.etype.name

    @property
    def owner(self) -> str:
        """The subscriber, or the profile id when none was given."""
        return self.subscriber or self.id

    @classmethod
    def build(cls, id: str, etype: EventType, predicates: Iterable[Predicate],
              subscriber: str = "") -> Profile:
        """Normalise ``predicates`` into a profile.

        Several conditions on one attribute collapse to their intersection; conditions
        that accept the whole domain disappear; values are checked against their domain.
        Raises :class:`ProfileError` (with ``field`` naming the attribute) on misuse and
        :class:`UnsatisfiableProfileError` when the conditions exclude every event.
        """
        if not _valid_id(id):
            raise ProfileError(f"profile id {id!r} must be letters, digits, '_', '-', '.', '/'")
        if subscriber and not _valid_id(subscriber):
            raise ProfileError(f"subscriber {subscriber!r} must be letters, digits, "
                               "'_', '-', '.', '/'")
        merged: dict[str, Constraint] = {}
        for pred in predicates:
            if pred.attr not in etype:
                raise ProfileError(f"{etype.name} has no attribute {pred.attr!r} "
                                   f"(it has {', '.join(etype.names)})", field=pred.attr)
            domain = etype.attribute(pred.attr).domain
            try:
                c = pred.constraint(domain)
            except SiftbusError as exc:
                exc.field = exc.field or pred.attr
                raise
            prev = merged.get(pred.attr)
            merged[pred.attr] = c if prev is None else _intersect(prev, c)
        conditions = []
        for attr in etype.attributes:
            got = merged.get(attr.name)
            if got is None:
                continue
            if got.empty:
                raise UnsatisfiableProfileError(
                    f"profile {id}: the conditions on {attr.name} exclude every value",
                    field=attr.name)
            if _is_full(attr.domain, got):
                continue
            conditions.append(Condition(attr.name, attr.position, got))
        return cls(id, etype, tuple(conditions), subscriber)

    @classmethod
    def from_constraints(cls, id: str, etype: EventType, constraints: Mapping[str, Constraint],
                         subscriber: str = "") -> Profile:
        """A profile from per-attribute constraints (used by covering and merging)."""
        conditions = []
        for attr in etype.attributes:
            c = constraints.get(attr.name)
            if c is None or _is_full(attr.domain, c):
                continue
            if c.empty:
                raise UnsatisfiableProfileError(f"profile {id}: {attr.name} accepts nothing",
                                                field=attr.name)
            conditions.append(Condition(attr.name, attr.position, c))
        return cls(id, etype, tuple(conditions), subscriber)

    def with_id(self, id: str, subscriber: str | None = None) -> Profile:
        """The same filter under another id (and optionally another subscriber)."""
        return Profile(id, self.etype, self.conditions,
                       self.subscriber if subscriber is None else subscriber)

    def constraint(self, attr: str) -> Constraint | None:
        """The constraint on ``attr``, or ``None`` when the profile leaves it free."""
        for c in self.conditions:
            if c.attr == attr:
                return c.constraint
        return None

    @property
    def filter_key(self) -> tuple[str, tuple[Condition, ...]]:
        """What the profile accepts, without id and subscriber: equal keys, equal filters."""
        return (self.etype.name, self.conditions)

    def matches(self, event: Event) -> bool:
        """The defining semantics: same type and every condition holds."""
        if event.etype.name != self.etype.name:
            return False
        keys = event.keys
        return all(keys[c.position] in c.constraint for c in self.conditions)

    def predicates(self) -> list[Predicate]:
        """Canonical conditions that express this profile (what the printer writes)."""
        out: list[Predicate] = []
        for c in self.conditions:
            out.extend(canonical_predicates(c.attr, self.etype.attribute(c.attr).domain,
                                            c.constraint))
        return out


def _intersect(a: Constraint, b: Constraint) -> Constraint:
    if isinstance(a, IntervalSet) and isinstance(b, IntervalSet):
        return a.intersect(b)
    assert isinstance(a, StringConstraint) and isinstance(b, StringConstraint)
    return a.intersect(b)


def _is_full(domain: AnyDomain, c: Constraint) -> bool:
    if isinstance(c, StringConstraint):
        return c.unconstrained
    assert not isinstance(domain, StringDomain)
    return c.is_full(domain.min_key, domain.max_key)


def canonical_predicates(attr: str, domain: AnyDomain, c: Constraint) -> list[Predicate]:
    """The shortest plain conditions whose conjunction is exactly ``c``."""
    if isinstance(c, StringConstraint):
        if c.allowed is not None:
            vals = sorted(c.allowed)
            return [Predicate(attr, Op.EQ, (vals[0],)) if len(vals) == 1
                    else Predicate(attr, Op.IN, tuple(vals))]
        out = [Predicate(attr, Op.PREFIX, (c.prefix,))] if c.prefix else []
        out.extend(Predicate(attr, Op.NE, (s,)) for s in sorted(c.excluded))
        return out or [Predicate(attr, Op.EXISTS)]
    assert not isinstance(domain, StringDomain)
    lo_dom, hi_dom = domain.min_key, domain.max_key

    def val(k: int) -> Value:
        return domain.value(k)

    def single(lo: int, hi: int) -> list[Predicate]:
        if lo == hi:
            return [Predicate(attr, Op.EQ, (val(lo),))]
        if lo == lo_dom and hi == hi_dom:
            return []
        if lo == lo_dom:
            return [Predicate(attr, Op.LT, (val(hi + 1),))] if hi + 1 <= hi_dom else []
        if hi == hi_dom:
            return [Predicate(attr, Op.GT, (val(lo - 1),))]
        return [Predicate(attr, Op.RANGE, (val(lo), val(hi)))]

    if len(c.intervals) == 1:
        return single(c.lo, c.hi) or [Predicate(attr, Op.EXISTS)]
    gaps = c.complement(c.lo, c.hi)
    if all(a == b for a, b in gaps.intervals) and gaps.size <= c.size:
        # A range with a few holes reads best as the range plus != per hole.
        out = single(c.lo, c.hi)
        out.extend(Predicate(attr, Op.NE, (val(a),)) for a, _ in gaps.intervals)
        return out
    return [Predicate(attr, Op.IN, tuple(val(k) for k in c))]


__all__ = ["Condition", "Profile", "canonical_predicates", "is_identifier"]
