"""Profiles: a conjunction of conditions on one event type, with an id and a subscriber."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from siftbus.errors import ProfileError, SiftbusError, UnsatisfiableProfileError
from siftbus.model.checks import (
    MAX_CHECK_COST,
    MAX_DISJUNCTS,
    Check,
    Disjunction,
    constraint_check,
    holds,
)
from siftbus.model.constraint import Constraint, IntervalSet, StringConstraint
from siftbus.model.domain import AnyDomain, StringDomain, Value, is_identifier
from siftbus.model.event import Event
from siftbus.model.kinds import FloatDomain
from siftbus.model.predicate import Op, Predicate
from siftbus.model.schema import Attribute, EventType


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
    extra: Disjunction | None = None
    """Checks beyond the conditions (``model.checks``), in disjunctive normal form: the
    profile accepts an event when every condition holds and some conjunction of ``extra``
    does. ``None`` for a plain conjunctive profile: then ``conditions`` are the filter."""

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
        _check_ids(id, subscriber)
        return cls._assemble(id, etype, [condition_part(pred, etype) for pred in predicates],
                             subscriber)

    @classmethod
    def from_parts(cls, id: str, etype: EventType, parts: Iterable[Part],
                   subscriber: str = "") -> Profile:
        """:meth:`build` from the :func:`condition_part` of each predicate, computed once
        for conditions many profiles share (the profile language's reader keeps them)."""
        _check_ids(id, subscriber)
        return cls._assemble(id, etype, parts, subscriber)

    @classmethod
    def _assemble(cls, id: str, etype: EventType, parts: Iterable[Part],
                  subscriber: str) -> Profile:
        merged: dict[str, Constraint] = {}
        checks: list[Check] = []
        for name, part in parts:
            if isinstance(part, Check):
                checks.append(part)
                continue
            prev = merged.get(name)
            merged[name] = part if prev is None else _intersect(prev, part)
        conditions = []
        for attr in etype.attributes:
            got = merged.get(attr.name)
            if got is None:
                continue
            if got.empty:
                raise UnsatisfiableProfileError(
                    f"profile {id}: the conditions on {attr.name} exclude every value",
                    field=attr.name)
            if _is_full(attr.domain, got) and not attr.optional:
                continue
            conditions.append(Condition(attr.name, attr.position, got))
        extra = (tuple(checks),) if checks else None
        return cls(id, etype, tuple(conditions), subscriber, extra)

    @classmethod
    def build_any(cls, id: str, etype: EventType,
                  alternatives: Sequence[Sequence[Predicate]], subscriber: str = "") -> Profile:
        """A profile that accepts an event when every condition of some alternative holds
        (the disjunctive normal form of ``or``; at most :data:`MAX_DISJUNCTS`)."""
        if len(alternatives) == 1:
            return cls.build(id, etype, alternatives[0], subscriber)
        if len(alternatives) > MAX_DISJUNCTS:
            raise ProfileError(f"profile {id}: 'or' expands to {len(alternatives)} "
                               f"alternatives; at most {MAX_DISJUNCTS} (checks.MAX_DISJUNCTS)")
        conjunctions: list[tuple[Check, ...]] = []
        for alt in alternatives:
            try:
                one = cls.build(id, etype, alt, subscriber)
            except UnsatisfiableProfileError:
                continue  # an alternative no event satisfies adds nothing
            conj = [constraint_check(c.attr, c.position, c.constraint) for c in one.conditions]
            conj.extend(one.extra[0] if one.extra else ())
            if not conj:  # an alternative without conditions accepts every event
                return cls(id, etype, (), subscriber, None)
            if tuple(conj) not in conjunctions:
                conjunctions.append(tuple(conj))
        if not conjunctions:
            raise UnsatisfiableProfileError(f"profile {id}: no alternative can hold")
        cost = sum(map(len, conjunctions))
        if cost > MAX_CHECK_COST:
            raise ProfileError(f"profile {id}: its alternatives hold {cost} checks; at most "
                               f"{MAX_CHECK_COST} (checks.MAX_CHECK_COST)")
        return cls(id, etype, (), subscriber, tuple(conjunctions))

    @classmethod
    def from_constraints(cls, id: str, etype: EventType, constraints: Mapping[str, Constraint],
                         subscriber: str = "") -> Profile:
        """A profile from per-attribute constraints (used by covering and merging)."""
        conditions = []
        for attr in etype.attributes:
            c = constraints.get(attr.name)
            if c is None or (_is_full(attr.domain, c) and not attr.optional):
                continue
            if c.empty:
                raise UnsatisfiableProfileError(f"profile {id}: {attr.name} accepts nothing",
                                                field=attr.name)
            conditions.append(Condition(attr.name, attr.position, c))
        return cls(id, etype, tuple(conditions), subscriber)

    def with_id(self, id: str, subscriber: str | None = None) -> Profile:
        """The same filter under another id (and optionally another subscriber)."""
        return Profile(id, self.etype, self.conditions,
                       self.subscriber if subscriber is None else subscriber, self.extra)

    def constraint(self, attr: str) -> Constraint | None:
        """The constraint on ``attr``, or ``None`` when the profile leaves it free."""
        for c in self.conditions:
            if c.attr == attr:
                return c.constraint
        return None

    @property
    def filter_key(self) -> tuple[object, ...]:
        """What the profile accepts, without id and subscriber: equal keys, equal filters."""
        if self.extra is None:
            return (self.etype.name, self.conditions)
        return (self.etype.name, self.conditions, self.extra)

    @property
    def extended(self) -> bool:
        """Whether it needs the reference semantics (checks, or a type with optional,
        nested, array or open attributes): the engines keep such profiles aside."""
        return self.extra is not None or self.etype.extended

    def matches(self, event: Event) -> bool:
        """The defining semantics: same type, every condition holds, and (with ``extra``)
        every check of some conjunction; absent attributes fail every condition, an array
        satisfies one when an element does (``model.checks``)."""
        if event.etype.name != self.etype.name:
            return False
        keys = event.keys
        if not self.extended:
            return all(keys[c.position] in c.constraint for c in self.conditions)
        return (all(_holds(c.constraint, keys[c.position]) for c in self.conditions)
                and (self.extra is None or holds(self.extra, keys)))

    def predicates(self) -> list[Predicate]:
        """Canonical conditions that express this profile (what the printer writes)."""
        out: list[Predicate] = []
        for c in self.conditions:
            out.extend(canonical_predicates(c.attr, self.etype.attribute(c.attr).domain,
                                            c.constraint))
        return out


Part = tuple[str, "Constraint | Check"]
"""What one condition contributes to a profile: its attribute and its constraint, or its
check (string tests, ``not exists``, array attributes)."""


def _check_ids(id: str, subscriber: str) -> None:
    if not _valid_id(id):
        raise ProfileError(f"profile id {id!r} must be letters, digits, '_', '-', '.', '/'")
    if subscriber and not _valid_id(subscriber):
        raise ProfileError(f"subscriber {subscriber!r} must be letters, digits, "
                           "'_', '-', '.', '/'")


def condition_part(pred: Predicate, etype: EventType) -> Part:
    """One condition's :data:`Part` of a profile of ``etype``; raises
    :class:`ProfileError` (``field`` naming the attribute) on misuse or a bad value."""
    if pred.attr not in etype:
        raise ProfileError(f"{etype.name} has no attribute {pred.attr!r} "
                           f"(it has {', '.join(etype.names)})", field=pred.attr)
    attribute = etype.attribute(pred.attr)
    try:
        if pred.is_check or attribute.array:
            return pred.attr, predicate_check(pred, attribute)
        return pred.attr, pred.constraint(attribute.domain)
    except SiftbusError as exc:
        exc.field = exc.field or pred.attr
        raise


def _holds(c: Constraint, key: object) -> bool:
    if isinstance(key, tuple):
        return any(k in c for k in key)
    return key in c


def predicate_check(pred: Predicate, attribute: Attribute) -> Check:
    """The check of one condition (string tests, ``not exists``, array attributes)."""
    name, pos, domain = attribute.name, attribute.position, attribute.domain
    if pred.op is Op.EXISTS and pred.negated:
        return Check(name, pos, "absent")
    if not pred.is_check:
        return constraint_check(name, pos, pred.constraint(domain))
    if not isinstance(domain, StringDomain):
        raise ProfileError(f"{name}: {pred.op.value} applies only to string attributes, "
                           f"not {domain.spec}")
    operand = pred.operands[0]
    if not isinstance(operand, str):
        raise ProfileError(f"{name}: {pred.op.value} takes a quoted string")
    op = pred.op.value + ("i" if pred.nocase else "")
    if op == "=i":
        op = "eqi"
    return Check(name, pos, op, operand, pred.negated)


def check_predicates(check: Check, domain: AnyDomain, array: bool = False) -> list[Predicate]:
    """Conditions that express one check (the printer's inverse of :func:`predicate_check`);
    on an ``array`` attribute exactly one (each condition holds on its own element)."""
    if check.op == "absent":
        return [Predicate(check.attr, Op.EXISTS, (), negated=True)]
    if check.op == "in":
        found = canonical_predicates(check.attr, domain, check.operand)
        return [single_predicate(check.attr, domain, check.operand)] if array and len(
            found) > 1 else found
    op = {"eqi": Op.EQ, "prefixi": Op.PREFIX, "suffixi": Op.SUFFIX}.get(check.op)
    if op is not None:
        return [Predicate(check.attr, op, (check.operand,), check.negated, nocase=True)]
    return [Predicate(check.attr, Op(check.op), (check.operand,), check.negated)]


def single_predicate(attr: str, domain: AnyDomain, c: Constraint) -> Predicate:
    """One condition that is exactly ``c`` (``c`` came from one condition, so one exists)."""
    if isinstance(c, StringConstraint):
        if c.prefix and c.excluded:
            raise ProfileError(f"{attr}: no single condition expresses {c}")
        return Predicate(attr, Op.IN, tuple(sorted(c.excluded)), negated=True)
    assert not isinstance(domain, StringDomain)
    gaps = c.complement(domain.min_key, domain.max_key)
    if len(gaps.intervals) == 1:
        lo, hi = gaps.intervals[0]
        return Predicate(attr, Op.RANGE, (domain.value(lo), domain.value(hi)), negated=True)
    return Predicate(attr, Op.IN, tuple(domain.value(k) for k in c))


def _shorter(a: Predicate, ka: int, b: Predicate, kb: int, domain: FloatDomain) -> Predicate:
    """The shorter of two bounds meaning the same, ``a`` naming key ``ka``, ``b`` ``kb``;
    only one whose operand reads back as its key: key -1 (``-0.0``) has no double of its
    own (``-0.0`` reads as ``0.0``'s key), so ``f < 0`` must not print as ``f <= 0.0``."""
    def size(p: Predicate) -> int:
        return len(domain.literal(domain.key(p.operands[0])))

    if domain.key(a.operands[0]) != ka:
        return b
    if domain.key(b.operands[0]) != kb:
        return a
    return a if size(a) <= size(b) else b


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
        if isinstance(domain, FloatDomain):  # doubles: the shortest bounds, not a range
            out = []
            if lo != lo_dom:
                out.append(_shorter(Predicate(attr, Op.GE, (val(lo),)), lo,
                                    Predicate(attr, Op.GT, (val(lo - 1),)), lo - 1, domain))
            if hi != hi_dom:
                out.append(_shorter(Predicate(attr, Op.LE, (val(hi),)), hi,
                                    Predicate(attr, Op.LT, (val(hi + 1),)), hi + 1, domain))
            return out
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
    if c.size == len(c.intervals):
        return [Predicate(attr, Op.IN, tuple(val(k) for k in c))]
    # wide intervals (open kinds): the hull minus each gap, never key by key
    out = single(c.lo, c.hi)
    out.extend(Predicate(attr, Op.NE, (val(a),)) if a == b
               else Predicate(attr, Op.RANGE, (val(a), val(b)), negated=True)
               for a, b in gaps.intervals)
    return out


__all__ = ["Condition", "Profile", "canonical_predicates", "check_predicates",
           "is_identifier", "predicate_check"]
