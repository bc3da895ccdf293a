"""Hypothesis strategies for random schemas, profiles and events (shared by all layers).

Import with ``from strategies import ...`` (pytest puts ``tests/`` on ``sys.path``).
"""

from __future__ import annotations

from decimal import Decimal

from hypothesis import strategies as st

from siftbus.errors import UnsatisfiableProfileError
from siftbus.model import (
    AnyDomain,
    DecimalDomain,
    EnumDomain,
    Event,
    EventType,
    Extreme,
    IntDomain,
    Op,
    Predicate,
    Profile,
    StringDomain,
)
from siftbus.model.schema import Attribute

STRINGS = ["", "a", "ab", "abc", "b", "ba", "north", "north-1", "south"]


@st.composite
def int_domains(draw: st.DrawFn) -> IntDomain:
    lo = draw(st.integers(-50, 50))
    width = draw(st.sampled_from([0, 1, 3, 10, 50, 1000, 100_000]))
    return IntDomain(lo, lo + width)


@st.composite
def decimal_domains(draw: st.DrawFn) -> DecimalDomain:
    places = draw(st.integers(0, 2))
    lo = draw(st.integers(-40, 10))
    hi = lo + draw(st.integers(0, 60))
    return DecimalDomain(Decimal(lo), Decimal(hi), places)


@st.composite
def enum_domains(draw: st.DrawFn) -> EnumDomain:
    n = draw(st.integers(1, 5))
    return EnumDomain(tuple(f"L{i}" for i in range(n)))


def domains(strings: bool = True) -> st.SearchStrategy[AnyDomain]:
    options: list[st.SearchStrategy[AnyDomain]] = [int_domains(), decimal_domains(),
                                                   enum_domains()]
    if strings:
        options.append(st.just(StringDomain()))
    return st.one_of(options)


@st.composite
def event_types(draw: st.DrawFn, min_attrs: int = 1, max_attrs: int = 10,
                strings: bool = True, name: str = "T") -> EventType:
    n = draw(st.integers(min_attrs, max_attrs))
    attrs = tuple(Attribute(f"a{i}", draw(domains(strings)), i) for i in range(n))
    return EventType(name, attrs)


def domain_values(domain: AnyDomain) -> st.SearchStrategy[object]:
    """Valid user values of a domain (including its extremes)."""
    if isinstance(domain, StringDomain):
        return st.sampled_from(STRINGS)
    lo, hi = domain.min_key, domain.max_key
    keys = st.one_of(st.integers(lo, hi), st.sampled_from([lo, hi]))
    return keys.map(domain.value)


@st.composite
def predicates(draw: st.DrawFn, attr: Attribute) -> Predicate:
    d = attr.domain
    if isinstance(d, StringDomain):
        op = draw(st.sampled_from([Op.EQ, Op.NE, Op.IN, Op.PREFIX, Op.EXISTS]))
        if op is Op.EXISTS:
            return Predicate(attr.name, op)
        if op is Op.IN:
            return Predicate(attr.name, op, tuple(draw(st.lists(
                st.sampled_from(STRINGS), min_size=1, max_size=4, unique=True))))
        return Predicate(attr.name, op, (draw(st.sampled_from(STRINGS)),))
    op = draw(st.sampled_from([Op.EQ, Op.NE, Op.LT, Op.LE, Op.GT, Op.GE, Op.RANGE, Op.IN,
                               Op.EXISTS]))
    value = domain_values(d)
    operand = st.one_of(value, value, st.sampled_from([Extreme.MIN, Extreme.MAX]))
    if op is Op.EXISTS:
        return Predicate(attr.name, op)
    if op is Op.RANGE:
        a, b = draw(st.integers(d.min_key, d.max_key)), draw(st.integers(d.min_key, d.max_key))
        a, b = min(a, b), max(a, b)
        return Predicate(attr.name, op, (d.value(a), d.value(b)))
    if op is Op.IN:
        return Predicate(attr.name, op, tuple(draw(st.lists(value, min_size=1, max_size=5))))
    return Predicate(attr.name, op, (draw(operand),))


@st.composite
def profiles(draw: st.DrawFn, etype: EventType, pid: str = "p", max_conditions: int = 4,
             subscriber: str = "") -> Profile:
    """A satisfiable profile with 0..max_conditions written conditions (attributes may repeat)."""
    n = draw(st.integers(0, max_conditions))
    preds = [draw(predicates(draw(st.sampled_from(etype.attributes)))) for _ in range(n)]
    kept: list[Predicate] = []
    for pred in preds:  # skip conditions that would leave no event (keeps rejections rare)
        try:
            Profile.build(pid, etype, [*kept, pred])
        except UnsatisfiableProfileError:
            continue
        kept.append(pred)
    return Profile.build(pid, etype, kept, subscriber)


@st.composite
def events(draw: st.DrawFn, etype: EventType) -> Event:
    return Event.of(etype, {a.name: draw(domain_values(a.domain)) for a in etype.attributes})
