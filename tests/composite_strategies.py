"""Hypothesis strategies for composite profiles and timed event streams.

A small schema keeps the reference evaluator (every assignment of events to components)
fast while still giving every operator, policy and correlation something to do: three
types ``A``, ``B``, ``C`` with a correlation attribute ``k`` (two values) and a value ``v``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from hypothesis import strategies as st

from siftbus.lang.composite import (
    Component,
    CompositeProfile,
    Conjunction,
    Consumption,
    Disjunction,
    FollowedBy,
    Negation,
    Pattern,
    Select,
    Windowed,
    component_id,
)
from siftbus.match.composite import StampedEvent
from siftbus.model import Event, Op, Predicate, Profile, parse_schema

SCHEMA = parse_schema("""
[A]
k = "int[0,1]"
v = "int[0,2]"
[B]
k = "int[0,1]"
v = "int[0,2]"
[C]
k = "int[0,1]"
v = "int[0,2]"
""")
TYPES = ("A", "B", "C")

# The same types with a declared event time (whole seconds), and a heartbeat type Z.
TIMED = parse_schema("""
[A]
k = "int[0,1]"
v = "int[0,2]"
t = "int[0,100000000]"
"@time" = "t"
[B]
k = "int[0,1]"
v = "int[0,2]"
t = "int[0,100000000]"
"@time" = "t"
[C]
k = "int[0,1]"
v = "int[0,2]"
t = "int[0,100000000]"
"@time" = "t"
[Z]
t = "int[0,100000000]"
"@time" = "t"
""")

# The building of the worked examples (docs/composite.md), with the types they name.
BUILDING = parse_schema("""
[GlassBreak]
room = "int[1,300]"
level = "int[0,10]"
[Motion]
room = "int[1,300]"
present = "int[0,1]"
[Heater]
room = "int[1,300]"
on = "int[0,1]"
[Temperature]
room = "int[1,300]"
value = "decimal[-40,60,1]"
[WindowContact]
room = "int[1,300]"
open = "int[0,1]"
[Door]
room = "int[1,300]"
forced = "int[0,1]"
[Badge]
room = "int[1,300]"
[LampStatus]
room = "int[1,300]"
state = "enum[OK,DEGRADED,FAILED]"
[Button]
room = "int[1,300]"
action = "enum[PRESS,HOLD,RELEASE]"
[Sensor]
room = "int[0,300]"
""")
S = 1_000_000  # microseconds per second
POLICIES = [(s, c) for s in Select for c in Consumption]


@dataclass
class _Budget:
    positive: int
    negated: int
    labels: list[str] = field(default_factory=list)


@st.composite
def component_profiles(draw: st.DrawFn, cid: str, label: str, subscriber: str = "") -> Profile:
    etype = SCHEMA[draw(st.sampled_from(("A", "B", "A", "B", "C")))]
    kind = draw(st.sampled_from(["any", "ge", "any", "eq"]))
    preds = []
    if kind == "eq":
        preds.append(Predicate("v", Op.EQ, (draw(st.integers(0, 2)),)))
    elif kind == "ge":
        preds.append(Predicate("v", Op.GE, (draw(st.integers(1, 2)),)))
    return Profile.build(component_id(cid, label), etype, preds, subscriber)


def _component(draw: st.DrawFn, budget: _Budget, cid: str, subscriber: str) -> Component:
    label = f"c{len(budget.labels)}"
    budget.labels.append(label)
    profile = draw(component_profiles(cid, label, subscriber))
    if draw(st.booleans()):  # the type name as label, when it is still free
        name = profile.etype.name
        if name not in budget.labels:
            budget.labels[-1] = name
            label = name
            profile = profile.with_id(component_id(cid, label), subscriber)
    return Component(label, profile)


def _pattern(draw: st.DrawFn, budget: _Budget, depth: int, window: int, cid: str,
             subscriber: str, top: bool = False) -> Pattern:
    kinds = [] if top and budget.positive >= 2 and depth > 0 else ["component"]
    if depth > 0 and budget.positive >= 2:
        kinds += ["followed_by", "followed_by", "and", "or", "window"]
    kind = draw(st.sampled_from(kinds))
    if kind == "component":
        budget.positive -= 1
        return _component(draw, budget, cid, subscriber)
    if kind == "window":
        inner_window = draw(st.sampled_from([w for w in (2 * S, S, 4 * S, 0) if w <= window]))
        inner = _pattern(draw, budget, depth - 1, inner_window, cid, subscriber, top=True)
        return Windowed(inner, inner_window)
    n = draw(st.integers(2, 3))
    parts: list[Pattern | Negation] = []
    for i in range(n):
        if budget.positive < 1:
            break
        if (kind == "followed_by" and i > 0 and budget.negated > 0
                and draw(st.booleans())):
            budget.negated -= 1
            parts.append(Negation(_component(draw, budget, cid, subscriber)))
            if draw(st.booleans()):
                continue  # a trailing or doubled negation is fine too
        if budget.positive < 1:
            break
        parts.append(_pattern(draw, budget, depth - 1, window, cid, subscriber))
    positive = [p for p in parts if not isinstance(p, Negation)]
    if kind == "followed_by":
        if len(parts) < 2:
            return positive[0]
        return FollowedBy(tuple(parts))
    if len(positive) < 2:
        return positive[0]
    ops = tuple(p for p in positive)
    return Conjunction(ops) if kind == "and" else Disjunction(ops)


@st.composite
def composites(draw: st.DrawFn, cid: str = "x", max_positive: int = 4, max_negated: int = 2,
               subscriber: str = "") -> CompositeProfile:
    """A random composite profile over :data:`SCHEMA` (policies: first, reuse)."""
    window = draw(st.sampled_from([4 * S, 2 * S, 8 * S, S, 0]))
    budget = _Budget(draw(st.integers(1, max_positive) | st.integers(2, max_positive)),
                     draw(st.integers(0, max_negated)))
    pattern = _pattern(draw, budget, 3, window, cid, subscriber, top=True)
    same = draw(st.sampled_from([(), ("k",)]))
    return CompositeProfile(cid, pattern, window, same, subscriber=subscriber)


@st.composite
def streams(draw: st.DrawFn, max_events: int = 12, max_time: int = 6) -> list[StampedEvent]:
    """Events in position order: times in whole seconds (ties allowed), order = index."""
    n = draw(st.integers(max_events // 2, max_events) | st.integers(0, max_events))
    times = sorted(draw(st.lists(st.integers(0, max_time), min_size=n, max_size=n)))
    out = []
    for i, t in enumerate(times):
        etype = SCHEMA[draw(st.sampled_from(("A", "B", "A", "B", "C")))]
        ev = Event.of(etype, {"k": draw(st.integers(0, 1)), "v": draw(st.integers(0, 2))})
        out.append(StampedEvent(ev, t * S, (i,)))
    return out


def timed(e: StampedEvent) -> Event:
    """The event of ``e`` in :data:`TIMED`, its time (whole seconds) as attribute ``t``."""
    return Event.of(TIMED[e.event.etype.name], {**e.event.values(), "t": e.time // S})


def shuffle_within(events: list[StampedEvent], lateness: int, seed: int
                   ) -> list[StampedEvent]:
    """An arrival order in which no event comes after one more than ``lateness`` newer:
    each event is delayed by up to ``lateness``, arrivals sorted by delayed time."""
    rnd = random.Random(seed)
    keyed = [(e.time + rnd.randint(0, lateness), rnd.random(), e) for e in events]
    keyed.sort(key=lambda t: (t[0], t[1]))
    return [e for _, _, e in keyed]
