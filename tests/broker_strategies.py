"""The small schema and hypothesis strategies of the broker network tests (issue 6, item 7),
shared by the broker, client, temporal, security and gateway tests: two event types, a
few words for string constraints, random profiles and events, and the oracle of
deliveries (the reference matcher applied to every active profile)."""

from __future__ import annotations

from collections import Counter

from hypothesis import strategies as st

from siftbus.broker.simulator import Delivery
from siftbus.model import Event, IntervalSet, Profile, StringConstraint, parse_schema
from siftbus.model.constraint import Constraint

SCHEMA = parse_schema("""
[T]
a = "int[0,7]"
b = "enum[LO,MID,HI]"
s = "string"

[U]
x = "int[0,3]"
""")
T, U = SCHEMA["T"], SCHEMA["U"]
WORDS = ["ab", "abc", "b", "ba"]


@st.composite
def interval_sets(draw: st.DrawFn, lo: int, hi: int) -> IntervalSet:
    kind = draw(st.sampled_from(["eq", "range", "set", "ne"]))
    if kind == "eq":
        return IntervalSet.points([draw(st.integers(lo, hi))])
    if kind == "range":
        a, b = sorted(draw(st.lists(st.integers(lo, hi), min_size=2, max_size=2)))
        return IntervalSet.range(a, b)
    if kind == "set":
        return IntervalSet.points(draw(st.sets(st.integers(lo, hi), min_size=1, max_size=3)))
    return IntervalSet.range(lo, hi).intersect(
        IntervalSet.points([draw(st.integers(lo, hi))]).complement(lo, hi))


@st.composite
def string_constraints(draw: st.DrawFn) -> StringConstraint:
    if draw(st.booleans()):
        return StringConstraint.make(frozenset(draw(st.sets(st.sampled_from(WORDS),
                                                            min_size=1, max_size=2))))
    return StringConstraint.make(None, draw(st.sampled_from(["", "a", "ab", "b"])),
                                 frozenset(draw(st.sets(st.sampled_from(WORDS), max_size=1))))


@st.composite
def profiles(draw: st.DrawFn, pid: str) -> Profile:
    if draw(st.integers(0, 3)) == 0:
        cons: dict[str, Constraint] = {}
        if draw(st.booleans()):
            cons["x"] = draw(interval_sets(0, 3))
        return Profile.from_constraints(pid, U, cons)
    cons = {}
    if draw(st.booleans()):
        cons["a"] = draw(interval_sets(0, 7))
    if draw(st.booleans()):
        cons["b"] = draw(interval_sets(0, 2))
    if draw(st.integers(0, 3)) == 0:
        c = draw(string_constraints())
        if not c.empty:
            cons["s"] = c
    return Profile.from_constraints(pid, T, cons)


@st.composite
def events(draw: st.DrawFn) -> Event:
    if draw(st.integers(0, 3)) == 0:
        return Event(U, (draw(st.integers(0, 3)),))
    return Event(T, (draw(st.integers(0, 7)), draw(st.integers(0, 2)),
                     draw(st.sampled_from([*WORDS, "c", ""]))))


def oracle(active: dict[tuple[str, str], Profile],
           published: list[tuple[tuple[str, int], Event]]) -> Counter[Delivery]:
    out: Counter[Delivery] = Counter()
    for ident, ev in published:
        for (client, pid), p in active.items():
            if p.matches(ev):
                out[Delivery(client, pid, ident)] += 1
    return out
