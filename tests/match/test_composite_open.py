"""Composite profiles whose components use the extended language (issue 31): dotted
paths, optional and array attributes, open kinds, the string operators, ``not exists``
and ``or`` inside a component. The automaton (components matched by the index engine
with its residual side list) equals the reference evaluator on random streams; ``same``
on an optional or array attribute is refused with the reason and position."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from siftbus.errors import ProfileError
from siftbus.lang.composite import parse_composite
from siftbus.match.composite import CompositeEngine, EngineLimits, StampedEvent, reference_matches
from siftbus.model import event_from_dict, parse_schema

S = 1_000_000
SCHEMA = parse_schema("""
[Door]
room = "int"
who = "optional string"
tags = "array<string>"
[Door.loc]
floor = "int[0,3]"
[Alarm]
room = "int"
level = "float"
src = "optional ip"
""")

LINES = [
    'c: a=Door(who suffix "x" or tags = "vip") -> b=Alarm(level > 2.5) within 60 s',
    'c: a=Door(loc.floor >= 1, who not exists) -> b=Alarm() within 30 s same room',
    'c: a=Door(tags like "v*") -> not Door(who matches "[ab]+") -> '
    'b=Alarm(src cidr "10.0.0.0/8" or level < 0) within 40 s same room select first',
    'c: (a=Door(who = "AX" ignorecase) or b=Alarm(src not exists)) -> '
    'd=Door(tags not in {"vip"}) within 50 s consume',
]


@st.composite
def stream(draw: st.DrawFn) -> list[StampedEvent]:
    out = []
    t = 0
    for i in range(draw(st.integers(1, 14))):
        t += draw(st.integers(0, 15))
        room = draw(st.integers(1, 2))
        if draw(st.booleans()):
            d: dict[str, object] = {"type": "Door", "room": room,
                                    "tags": draw(st.lists(st.sampled_from(["vip", "v1", "a"]),
                                                          min_size=1, max_size=2)),
                                    "loc": {"floor": draw(st.integers(0, 3))}}
            if draw(st.booleans()):
                d["who"] = draw(st.sampled_from(["ax", "AX", "bx", "ab", "c"]))
        else:
            d = {"type": "Alarm", "room": room,
                 "level": draw(st.sampled_from([-1.5, 0.0, 2.5, 3.0]))}
            if draw(st.booleans()):
                d["src"] = draw(st.sampled_from(["10.1.1.1", "::1"]))
        out.append(StampedEvent(event_from_dict(d, SCHEMA), t * S, (i,)))
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(LINES), stream())
def test_automaton_equals_reference_with_extended_components(line: str,
                                                             events: list[StampedEvent]
                                                             ) -> None:
    profile = parse_composite(line, SCHEMA)
    engine = CompositeEngine(limits=EngineLimits(), matcher="index")
    engine.add(profile)
    got = [m for e in events for m in engine.offer(e)] + engine.flush()
    assert [m.key() for m in got] == [m.key() for m in reference_matches(profile, events)]


@pytest.mark.parametrize(("line", "message"), [
    ("c: a=Door() -> b=Door() within 5 s same who", "same who: 'a' (Door) has it optional"),
    ("c: a=Door() -> b=Door() within 5 s same tags", "has it as an array"),
])
def test_same_on_optional_or_array_attributes_is_refused(line: str, message: str) -> None:
    with pytest.raises(ProfileError, match=re.escape(message)) as info:
        parse_composite(line, SCHEMA)
    assert info.value.column == line.index("same") + 6


def test_a_worked_example() -> None:
    p = parse_composite(LINES[0], SCHEMA)
    door = event_from_dict({"type": "Door", "room": 1, "tags": ["vip"],
                            "loc": {"floor": 0}}, SCHEMA)
    alarm = event_from_dict({"type": "Alarm", "room": 2, "level": 3.0}, SCHEMA)
    events = [StampedEvent(door, 0, (0,)), StampedEvent(alarm, 10 * S, (1,))]
    assert [[lab for lab, _ in m.bindings] for m in reference_matches(p, events)] == \
        [["a", "b"]]


def test_a_broker_network_pushes_composite_matches_of_extended_events() -> None:
    """Through two brokers with every frame encoded: component events with absent
    values, arrays and keys beyond int64 come back in the pushed matches as published."""
    from siftbus.broker.composite import CompositeSettings
    from siftbus.broker.simulator import Simulator
    from siftbus.client.composite import decode_matches

    sim = Simulator(SCHEMA, ["B0", "B1"], [("B0", "B1")], roundtrip=True,
                    composite=CompositeSettings(EngineLimits(lateness=10**12), clock=False))
    sub = sim.add_client("s", "B1")
    sim.add_client("p", "B0")
    sim.run()
    sim.call("s", "composite", "subscribe", texts=[LINES[0], LINES[2].replace("c:", "d:")])
    sim.run()
    assert not sub.errors, sub.errors
    evs = [event_from_dict(d, SCHEMA) for d in [
        {"type": "Door", "room": 1, "tags": ["vip"], "loc": {"floor": 0}},
        {"type": "Door", "room": 2, "who": "ax", "tags": ["v2"], "loc": {"floor": 1}},
        {"type": "Alarm", "room": 2, "level": 3.0, "src": "10.9.9.9"},
        {"type": "Alarm", "room": 1, "level": -2.0, "src": "ffff::1"}]]
    idents = sim.publish("p", evs)
    sim.run()
    for node in sim.nodes.values():
        node.composites.flush()
    sim.run()
    stamped = [StampedEvent(e, 0, ident) for e, ident in zip(evs, idents, strict=True)]
    got: dict[str, list[object]] = {}
    for body in sub.replies:
        if body.get("service") == "composite":
            for m in decode_matches(body["event"], SCHEMA, "s"):
                got.setdefault(m.profile, []).append(m.key())
    want = {p.id: [m.key() for m in reference_matches(p, stamped)]
            for p in (parse_composite(LINES[0], SCHEMA),
                      parse_composite(LINES[2].replace("c:", "d:"), SCHEMA))}
    assert got == want and len(want["c"]) == 2 and len(want["d"]) == 2
