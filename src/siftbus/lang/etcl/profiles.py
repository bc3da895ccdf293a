"""Compilation of conjunctive ETCL constraints to siftbus profiles.

A constraint that is a conjunction of atoms ``F op literal`` / ``literal op F`` /
``exist F`` / ``not exist F`` / ``F`` (boolean) / ``not (F op literal)``, where F is
``$name``, a bare identifier, ``$.filterable_data(n)``, ``$.header.variable_header(n)``
or a fixed-header path, with event-type patterns that are exact, ``*`` or ``prefix*``,
compiles to :class:`~siftbus.model.Profile`\\ s over a *derived* :class:`EventType`: the
three fixed header strings and, per field, a kind, a number key, a string key and a
boolean key. Each atom is then exactly an interval or string set on one attribute, so a
matcher over the derived events answers exactly what the evaluator answers (the
channel's ``ConstraintIndex`` is that matcher; tested differentially).

Numbers become order-preserving integer keys: the IEEE-754 double bits, sign-folded so
that key order is number order (-0.0 and 0.0 share key 0). Ints up to 2**53 and every
finite float map exactly; anything else (NaN, huge ints) takes the evaluator path.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from siftbus.lang.etcl.constraint import Constraint
from siftbus.lang.etcl.event_types import WILDCARDS
from siftbus.lang.etcl.paths import FD, MISSING, prop
from siftbus.lang.etcl.syntax import BoolOp, Comp, Compare, Exist, Ident, Lit, Node, Not, Step
from siftbus.model import Event, EventType, IntervalSet, Profile, StringConstraint
from siftbus.model.domain import IntDomain, StringDomain
from siftbus.model.schema import Attribute


@dataclass(frozen=True, slots=True)
class FieldRef:
    """A filterable field: ``fixed`` (domain_name, type_name, event_name), ``var``
    (``$name``: variable header then filterable data), ``fd`` (``$.filterable_data(n)``
    or a bare identifier) or ``vh`` (``$.header.variable_header(n)``)."""

    kind: str
    name: str


@dataclass(frozen=True, slots=True)
class Atom:
    """One compiled conjunct: ``field op value``; op is a comparison, ``exist``,
    ``absent`` (``not exist``) or ``true`` (a bare boolean component)."""

    field: FieldRef
    op: str
    value: Any = None


EventTypePair = tuple[str, str]
Variant = tuple[EventTypePair, tuple[Atom, ...]]
"""One compiled (event type pattern, atoms) of a constraint."""

_FIXED_PATHS = {
    (Step("name", "header"), Step("name", "fixed_header"), Step("name", "event_type"),
     Step("name", "domain_name")): "domain_name",
    (Step("name", "header"), Step("name", "fixed_header"), Step("name", "event_type"),
     Step("name", "type_name")): "type_name",
    (Step("name", "header"), Step("name", "fixed_header"), Step("name", "event_name")):
        "event_name",
}
_FLIP = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_NEGATE = {"==": "!=", "!=": "==", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}
_EXACT_INT = 2**53


def _field_of(node: Node) -> FieldRef | None:
    if isinstance(node, Ident):
        return FieldRef("fd", node.name)
    if not isinstance(node, Comp):
        return None
    p = node.path
    if p.var is not None:
        if p.steps or p.var == "curtime":
            return None
        if p.var in ("domain_name", "type_name", "event_name"):
            return FieldRef("fixed", p.var)
        return FieldRef("var", p.var)
    if p.steps in _FIXED_PATHS:
        return FieldRef("fixed", _FIXED_PATHS[p.steps])
    if len(p.steps) == 2 and p.steps[0] == FD and p.steps[1].kind == "assoc":
        return FieldRef("fd", p.steps[1].arg)
    if (len(p.steps) == 3 and p.steps[0] == Step("name", "header")
            and p.steps[1] == Step("name", "variable_header") and p.steps[2].kind == "assoc"):
        return FieldRef("vh", p.steps[2].arg)
    return None


def _literal_ok(v: Any) -> bool:
    if isinstance(v, bool | str):
        return True
    if isinstance(v, int):
        return -_EXACT_INT <= v <= _EXACT_INT
    return isinstance(v, float) and math.isfinite(v)


def _atom(node: Node, negated: bool = False) -> Atom | None:
    if isinstance(node, Not):
        return None if negated else _atom(node.operand, True)
    if isinstance(node, Exist):
        f = _field_of(node.operand)
        if f is None:
            return None
        return Atom(f, "absent" if negated else "exist")
    if isinstance(node, Compare):
        op = node.op
        f, lit = _field_of(node.left), node.right
        if f is None:
            f, lit, op = _field_of(node.right), node.left, _FLIP[op]
        if f is None or not isinstance(lit, Lit) or not _literal_ok(lit.value):
            return None
        if isinstance(lit.value, str) and op not in ("==", "!="):
            return None  # string order is not in the index (string domains are unordered)
        if negated:
            op = _NEGATE[op]
        return Atom(f, op, lit.value)
    if not negated:
        f = _field_of(node)
        if f is not None:
            return Atom(f, "true")
    return None


def conjuncts(constraint: Constraint) -> tuple[Atom, ...] | None:
    """The atoms of a conjunctive constraint over filterable fields, or ``None`` when the
    constraint is not of that form (it then runs through the evaluator)."""
    if constraint.root is None:
        return ()
    out: list[Atom] = []
    stack: list[Node] = [constraint.root]
    while stack:
        node = stack.pop()
        if isinstance(node, BoolOp) and node.op == "and":
            stack.extend(reversed(node.operands))
            continue
        a = _atom(node)
        if a is None:
            return None
        out.append(a)
    return tuple(out)


def name_constraint(pattern: str) -> StringConstraint | None:
    """An event-type pattern as a string constraint; ``None`` if it needs a glob."""
    if pattern in WILDCARDS:
        return StringConstraint()
    if "*" not in pattern:
        return StringConstraint.make(frozenset({pattern}))
    if pattern.endswith("*") and "*" not in pattern[:-1]:
        return StringConstraint.make(None, pattern[:-1])
    return None


def compile_constraint(constraint: Constraint, event_types: Iterable[EventTypePair] = ()
                       ) -> tuple[Variant, ...] | None:
    """The (event type, atoms) variants of a compilable constraint, or ``None``."""
    atoms = conjuncts(constraint)
    if atoms is None:
        return None
    variants: list[Variant] = []
    for d, t in tuple(event_types) or (("*", "*"),):
        if name_constraint(d) is None or name_constraint(t) is None:
            return None
        variants.append(((d, t), atoms))
    return tuple(variants)


_MASK = (1 << 63) - 1
NUM_MAX = 0x7FF0000000000000  # key of +inf
NUM_MIN = -NUM_MAX
NUM_ABSENT = NUM_MIN - 1  # "not a number here" (missing, or another kind)


def num_key(v: float) -> int:
    """The order-preserving integer key of a non-NaN double."""
    b = struct.unpack("<q", struct.pack("<d", v))[0]
    return b if b >= 0 else -(b & _MASK)


UNREPRESENTABLE: Any = object()
"""The number key of a number with no exact key (NaN, an int beyond 2**53)."""


def field_keys(v: Any) -> tuple[int, Any, str, int]:
    """(kind, number key, string key, bool key) of a field value (or :data:`MISSING`)."""
    if v is MISSING:
        return 0, NUM_ABSENT, "", 0
    if isinstance(v, bool):
        return 3, NUM_ABSENT, "", 2 if v else 1
    if isinstance(v, int):
        if -_EXACT_INT <= v <= _EXACT_INT:
            return 1, num_key(float(v)), "", 0
        return 1, UNREPRESENTABLE, "", 0
    if isinstance(v, float):
        if math.isnan(v):
            return 1, UNREPRESENTABLE, "", 0
        return 1, num_key(v), "", 0
    if isinstance(v, str):
        return 2, NUM_ABSENT, "=" + v, 0
    return 4, NUM_ABSENT, "", 0


def field_value(ev: Any, f: FieldRef) -> Any:
    """The value of a (non-fixed) field in a structured event, or :data:`MISSING`."""
    if f.kind == "var":
        v = prop(ev.variable_header, f.name)
        return prop(ev.filterable_data, f.name) if v is MISSING else v
    if f.kind == "fd":
        return prop(ev.filterable_data, f.name)
    if f.kind == "vh":
        return prop(ev.variable_header, f.name)
    return getattr(ev, f.name)


def _num_interval(op: str, k: int) -> IntervalSet:
    if op == "==":
        return IntervalSet.range(k, k)
    if op == "!=":
        return IntervalSet.of([(NUM_MIN, k - 1), (k + 1, NUM_MAX)])
    if op == "<":
        return IntervalSet.range(NUM_MIN, k - 1)
    if op == "<=":
        return IntervalSet.range(NUM_MIN, k)
    if op == ">":
        return IntervalSet.range(k + 1, NUM_MAX)
    return IntervalSet.range(k, NUM_MAX)


AttrKey = tuple[Any, str]
"""An abstract attribute: ("fixed", name) or (field, aspect), aspect k (kind), n (number
key), s (string key) or b (boolean)."""

_FIXED_ATTRS = ("domain_name", "type_name", "event_name")
_ASPECT_DOMAINS: dict[str, IntDomain | StringDomain] = {
    "k": IntDomain(0, 4), "n": IntDomain(NUM_ABSENT, NUM_MAX),
    "s": StringDomain(), "b": IntDomain(0, 2)}


def _atom_constraints(a: Atom, put: Callable[[AttrKey, Any], None]) -> None:
    """One atom as a constraint on one abstract attribute."""
    f = a.field
    if f.kind == "fixed":
        if a.op == "exist":
            put(("fixed", f.name), StringConstraint())
        elif a.op == "==" and isinstance(a.value, str):
            put(("fixed", f.name), StringConstraint.make(frozenset({a.value})))
        elif a.op == "!=" and isinstance(a.value, str):
            put(("fixed", f.name), StringConstraint.make(None, "", frozenset({a.value})))
        else:
            # absent / wrong kind / bare string as a boolean: the evaluator never says
            # TRUE (headers are always strings).
            put(("fixed", f.name), StringConstraint(frozenset()))
        return
    if a.op == "exist":
        put((f, "k"), IntervalSet.range(1, 4))
    elif a.op == "absent":
        put((f, "k"), IntervalSet.range(0, 0))
    elif a.op == "true":
        put((f, "b"), IntervalSet.range(2, 2))
    elif isinstance(a.value, bool):
        k = 2 if a.value else 1
        put((f, "b"), _num_interval(a.op, k).intersect(IntervalSet.range(1, 2)))
    elif isinstance(a.value, str):
        if a.op == "==":
            put((f, "s"), StringConstraint.make(frozenset({"=" + a.value})))
        elif a.op == "!=":
            put((f, "s"), StringConstraint.make(None, "=", frozenset({"=" + a.value})))
        else:  # _atom never yields string ordering
            raise AssertionError(a)
    else:
        put((f, "n"), _num_interval(a.op, num_key(float(a.value))))


def variant_constraints(variant: Variant) -> dict[AttrKey, Any]:
    """The constraints of one variant by abstract attribute (unconstrained string
    attributes left out)."""
    cons: dict[AttrKey, Any] = {}

    def put(ak: AttrKey, c: Any) -> None:
        prev = cons.get(ak)
        cons[ak] = c if prev is None else prev.intersect(c)

    (d, t), atoms = variant
    dc, tc = name_constraint(d), name_constraint(t)
    assert dc is not None and tc is not None
    put(("fixed", "domain_name"), dc)
    put(("fixed", "type_name"), tc)
    for a in atoms:
        _atom_constraints(a, put)
    return {k: c for k, c in cons.items()
            if not (isinstance(c, StringConstraint) and c.unconstrained)}


class DerivedType:
    """The derived event type of a set of compiled constraints: only the attributes some
    registered variant uses. It grows as variants with new fields are registered (every
    profile made before then must be made again: :meth:`register` says so)."""

    def __init__(self) -> None:
        self._fields: dict[FieldRef, int] = {}
        self._attr_names: dict[AttrKey, str] = {}
        self._layout: list[AttrKey] = []
        self.etype: EventType = self._make_etype()

    def _make_etype(self) -> EventType:
        attrs: list[Attribute] = []
        layout: list[AttrKey] = []
        for name in _FIXED_ATTRS:
            if ("fixed", name) in self._attr_names:
                attrs.append(Attribute(name, StringDomain(), len(attrs)))
                layout.append(("fixed", name))
        for f, i in sorted(self._fields.items(), key=lambda kv: kv[1]):
            for aspect in "knsb":
                if (f, aspect) in self._attr_names:
                    attrs.append(Attribute(f"f{i}{aspect}", _ASPECT_DOMAINS[aspect], len(attrs)))
                    layout.append((f, aspect))
        self._layout = layout
        return EventType("ETCLEvent", tuple(attrs))

    def register(self, variants: Sequence[Variant]) -> bool:
        """Add the attributes the variants need; True if the type changed."""
        new_attr = False
        for variant in variants:
            for ak in variant_constraints(variant):
                if ak in self._attr_names:
                    continue
                f = ak[0]
                if f != "fixed" and f not in self._fields:
                    self._fields[f] = len(self._fields)
                self._attr_names[ak] = ak[1] if f == "fixed" else f"f{self._fields[f]}{ak[1]}"
                new_attr = True
        if new_attr:
            self.etype = self._make_etype()
        return new_attr

    def profiles(self, key: str, variants: Sequence[Variant]) -> list[Profile]:
        """The profiles of registered variants (ids ``key.N``); none when no event can
        satisfy them."""
        out: list[Profile] = []
        for n, variant in enumerate(variants):
            cons = variant_constraints(variant)
            if any(c.empty for c in cons.values()):
                continue
            named = {self._attr_names[ak]: c for ak, c in cons.items()}
            out.append(Profile.from_constraints(f"{key}.{n}", self.etype, named))
        return out

    def event(self, ev: Any) -> Event | None:
        """A structured event over the derived type, or ``None`` when a number it needs
        has no exact key (NaN, an int beyond 2**53): such events are evaluated instead."""
        keys: list[Any] = []
        last: Any = None
        kinds: tuple[int, Any, str, int] = (0, 0, "", 0)
        for f, aspect in self._layout:
            if f == "fixed":
                keys.append(getattr(ev, aspect))
                continue
            if f is not last:
                last = f
                kinds = field_keys(field_value(ev, f))
            if aspect == "k":
                keys.append(kinds[0])
            elif aspect == "n":
                if kinds[1] is UNREPRESENTABLE:
                    return None
                keys.append(kinds[1])
            elif aspect == "s":
                keys.append(kinds[2])
            else:
                keys.append(kinds[3])
        return Event(self.etype, tuple(keys))


__all__ = ["NUM_ABSENT", "NUM_MAX", "NUM_MIN", "UNREPRESENTABLE", "Atom", "AttrKey",
           "DerivedType", "EventTypePair", "FieldRef", "Variant", "compile_constraint",
           "conjuncts", "field_keys", "field_value", "name_constraint", "num_key",
           "variant_constraints"]
