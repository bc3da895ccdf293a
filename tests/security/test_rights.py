"""Content-based rights against brute force: every event of small finite domains."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from siftbus.errors import AccessDenied, ConfigError
from siftbus.model import Event, EventType, IntDomain, Schema, StringDomain
from siftbus.model.schema import Attribute
from siftbus.security.rights import Rights, RightSet, covered_by_union, intersection
from strategies import enum_domains, profiles

from .events import every_event


@st.composite
def small_types(draw: st.DrawFn, strings: bool) -> EventType:
    n = draw(st.integers(1, 3))
    attrs = []
    for i in range(n):
        kinds = ["int", "enum", "str"] if strings else ["int", "enum"]
        kind = draw(st.sampled_from(kinds))
        if kind == "int":
            lo = draw(st.integers(-3, 3))
            dom = IntDomain(lo, lo + draw(st.integers(0, 8)))
        elif kind == "enum":
            dom = draw(enum_domains())
        else:
            dom = StringDomain()
        attrs.append(Attribute(f"a{i}", dom, i))
    return EventType("T", tuple(attrs))


@st.composite
def cases(draw: st.DrawFn, strings: bool) -> tuple[EventType, object, list[object]]:
    etype = draw(small_types(strings))
    q = draw(profiles(etype, "q", max_conditions=3))
    rights = draw(st.lists(profiles(etype, "r", max_conditions=3), min_size=0, max_size=4))
    return etype, q, rights


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(strings=True))
def test_union_covering_never_accepts_an_event_outside_the_right(case) -> None:  # type: ignore[no-untyped-def]
    etype, q, rights = case
    if covered_by_union(q, rights):
        for e in every_event(etype):
            if q.matches(e):
                assert any(r.matches(e) for r in rights), e


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(strings=False))
def test_union_covering_is_exact_on_ordered_domains(case) -> None:  # type: ignore[no-untyped-def]
    etype, q, rights = case
    inside = all(any(r.matches(e) for r in rights) for e in every_event(etype) if q.matches(e))
    assert covered_by_union(q, rights) == inside


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(strings=True))
def test_narrowing_selects_exactly_the_events_of_both_each_once(case) -> None:  # type: ignore[no-untyped-def]
    """Narrowed pieces are disjoint (an event is notified once) and select exactly
    q's events inside the right; ``None`` only where strings make the cut inexpressible."""
    etype, q, rights = case
    pieces = RightSet(tuple(rights)).narrow(q)
    if pieces is None:
        assert any(isinstance(a.domain, StringDomain) for a in etype.attributes)
        return
    assert all(p.id == q.id and p.subscriber == q.subscriber for p in pieces)
    for e in every_event(etype):
        want = q.matches(e) and any(r.matches(e) for r in rights)
        assert sum(p.matches(e) for p in pieces) == int(want), e


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(strings=False))
def test_narrowing_is_always_expressible_on_ordered_domains(case) -> None:  # type: ignore[no-untyped-def]
    _, q, rights = case
    assert RightSet(tuple(rights)).narrow(q) is not None


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(strings=True))
def test_the_block_publish_check_agrees_with_the_event_check(case) -> None:  # type: ignore[no-untyped-def]
    """``admitted_rows`` (numpy, over a block's key matrix) says of each event what
    ``admits`` says of it alone."""
    import numpy as np

    etype, _, rights = case
    right = RightSet(tuple(rights))
    evs = every_event(etype)
    ordered = not any(isinstance(a.domain, StringDomain) for a in etype.attributes)
    keys = (np.array([e.keys for e in evs], np.int64) if ordered
            else np.array([list(e.keys) for e in evs], object))
    rows = right.admitted_rows(etype, keys.reshape(len(evs), len(etype.attributes)))
    want = [right.admits(e) for e in evs]
    assert (rows.tolist() if rows is not None else [True] * len(evs)) == want


@settings(max_examples=200, deadline=None)
@given(cases(strings=True))
def test_intersection_is_the_conjunction(case) -> None:  # type: ignore[no-untyped-def]
    etype, q, rights = case
    for r in rights:
        x = intersection(r, q)
        for e in every_event(etype):
            both = r.matches(e) and q.matches(e)
            assert (x is not None and x.matches(e)) == both


SCHEMA = Schema.from_dict({"Temperature": {"building": "int[1,9]", "room": "int[1,50]",
                                           "value": "decimal[-40,60,1]"}})


def tenant(narrow: bool = False) -> Rights:
    right = ["Temperature(building = 3)"]
    return Rights("b3", RightSet.parse(right, SCHEMA), RightSet.parse(right, SCHEMA),
                  RightSet.parse(right, SCHEMA), ("broker.stats",), narrow)


def test_a_tenant_subscribes_only_within_its_building() -> None:
    from siftbus.lang.profile import parse_profile

    r = tenant()
    inside = parse_profile("p1: Temperature(building = 3, value > 20)", SCHEMA)
    assert r.check_subscribe(inside) == (inside,)
    everything = parse_profile("p2: Temperature(value > 20)", SCHEMA)
    with pytest.raises(AccessDenied) as info:
        r.check_subscribe(everything)
    assert info.value.principal == "b3" and info.value.action == "subscribe"
    narrowed = tenant(narrow=True).check_subscribe(everything)
    assert [p.id for p in narrowed] == ["p2"]
    assert narrowed[0].constraint("building") == inside.constraint("building")


def test_publish_right_is_checked_on_the_event_and_services_by_pattern() -> None:
    r = tenant()
    r.check_publish(Event.of(SCHEMA["Temperature"], {"building": 3, "room": 1, "value": 20}))
    with pytest.raises(AccessDenied):
        r.check_publish(Event.of(SCHEMA["Temperature"], {"building": 4, "room": 1, "value": 2}))
    assert r.may_call("broker", "stats") and not r.may_call("broker", "profiles")
    r.check_call("broker", "stats")
    with pytest.raises(AccessDenied):
        r.check_call("channel", "destroy")


def test_bad_rights_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="Nope"):
        RightSet.parse(["Nope(x = 1)"], SCHEMA)
    with pytest.raises(ConfigError):
        RightSet.parse([3], SCHEMA)  # type: ignore[list-item]
    assert RightSet.parse(["*"], SCHEMA).everything
    whole = RightSet.parse(["Temperature"], SCHEMA)
    assert whole.admits(Event.of(SCHEMA["Temperature"], {"building": 9, "room": 2,
                                                        "value": -3}))
