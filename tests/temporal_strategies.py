"""Random subspaces, notifications, filters and times for the temporal tests.

Import with ``from temporal_strategies import ...`` (pytest puts ``tests/`` on
``sys.path``). The schema is small, so random boxes often nest, overlap and coincide:
covering chains, equal boxes and disjoint ones all occur.
"""

from __future__ import annotations

import random

from hypothesis import strategies as st

from broker_strategies import WORDS, interval_sets, string_constraints
from siftbus.model import IntervalSet, Profile, StringConstraint, parse_schema
from siftbus.model.constraint import Constraint
from siftbus.temporal import PersistentNotification, Semantics, TemporalFilter, Validity

SCHEMA = parse_schema("""
[T]
a = "int[0,7]"
b = "enum[LO,MID,HI]"
c = "int[0,40]"
s = "string"

[U]
x = "int[0,3]"
""")
T, U = SCHEMA["T"], SCHEMA["U"]
TIMES = [0.0, 1.0, 2.0, 3.0, 5.0, 8.0]


@st.composite
def boxes(draw: st.DrawFn, pid: str = "p", strings: bool = True) -> Profile:
    """A random subspace: mostly of type T, some of U; any attribute may be free."""
    if draw(st.integers(0, 4)) == 0:
        cons: dict[str, Constraint] = {}
        if draw(st.booleans()):
            cons["x"] = draw(interval_sets(0, 3))
        return Profile.from_constraints(pid, U, cons)
    cons = {}
    if draw(st.integers(0, 3)):
        cons["a"] = draw(interval_sets(0, 7))
    if draw(st.booleans()):
        cons["b"] = draw(interval_sets(0, 2))
    if draw(st.booleans()):
        cons["c"] = draw(interval_sets(0, 40))
    if strings and draw(st.integers(0, 3)) == 0:
        c = draw(string_constraints())
        if not c.empty:
            cons["s"] = c
    return Profile.from_constraints(pid, T, cons)


@st.composite
def plain_boxes(draw: st.DrawFn, pid: str = "p") -> Profile:
    """A random subspace with one interval per constrained attribute (no holes, no
    strings): the shape whose hull relations are exact."""
    cons: dict[str, Constraint] = {}
    for name, hi in (("a", 7), ("b", 2), ("c", 40)):
        if draw(st.booleans()):
            lo = draw(st.integers(0, hi))
            cons[name] = IntervalSet.range(lo, draw(st.integers(lo, hi)))
    return Profile.from_constraints(pid, T, cons)


@st.composite
def validities(draw: st.DrawFn) -> Validity:
    start = draw(st.sampled_from([-1.0, *TIMES]))
    end = draw(st.sampled_from([t for t in [*TIMES, 13.0, float("inf")] if t > start]))
    return Validity(start, end)


@st.composite
def notifications(draw: st.DrawFn, nid: str, publisher: str = "pub") -> PersistentNotification:
    return PersistentNotification(nid, draw(boxes(nid)), publisher, draw(validities()))


@st.composite
def filters(draw: st.DrawFn, fid: str) -> TemporalFilter:
    return TemporalFilter(draw(boxes(fid)), draw(st.sampled_from(list(Semantics))))


def random_box(rng: random.Random, pid: str, strings: bool = True,
               holes: bool = True) -> Profile:
    """A random subspace from a seeded generator (for long sequences); without
    ``holes`` every constraint is one interval."""
    if rng.random() < 0.15:
        cons: dict[str, Constraint] = {}
        if rng.random() < 0.5:
            cons["x"] = _random_set(rng, 0, 3)
        return Profile.from_constraints(pid, U, cons)
    cons = {}
    if rng.random() < 0.7:
        cons["a"] = _random_set(rng, 0, 7, holes)
    if rng.random() < 0.5:
        cons["b"] = _random_set(rng, 0, 2, holes)
    if rng.random() < 0.5:
        cons["c"] = _random_set(rng, 0, 40, holes)
    if strings and rng.random() < 0.2:
        c = StringConstraint.make(frozenset(rng.sample(WORDS, rng.randint(1, 2))))
        cons["s"] = c
    return Profile.from_constraints(pid, T, cons)


def _random_set(rng: random.Random, lo: int, hi: int, holes: bool = True) -> IntervalSet:
    r = rng.random() if holes else rng.random() * 0.8
    if r < 0.3:
        return IntervalSet.points([rng.randint(lo, hi)])
    if r < 0.8:
        a = rng.randint(lo, hi)
        return IntervalSet.range(a, rng.randint(a, hi))
    return IntervalSet.points(rng.sample(range(lo, hi + 1), min(3, hi - lo + 1)))
