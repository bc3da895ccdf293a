"""``Event.of`` takes a fast path for plain values (a compiled check per event type);
what a user sees is the attribute-by-attribute check's: the same event, or the same
error (kind, message, field) for every mapping, good or bad."""

from __future__ import annotations

import enum
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from siftbus.errors import SiftbusError
from siftbus.model import Event, EventType, IntDomain, StringDomain
from siftbus.model.schema import Attribute
from strategies import domain_values, event_types


class Label(str):
    pass


class Level(enum.IntEnum):
    LOW = 1


ODD_VALUES: list[Any] = [True, False, None, 1.0, 2.5, float("nan"), Decimal("3"),
                         Decimal("2.50"), -(10**20), 10**20, 0, -1, "", "L0", "x",
                         Label("L1"), Label("abc"), Level.LOW, [], {}, (1,), b"L0"]


def _outcome(fn: Any) -> object:
    try:
        e = fn()
    except SiftbusError as exc:
        return ("error", type(exc).__name__, exc.message, exc.field)
    return ("ok", e.etype.name, e.keys, tuple(type(k) for k in e.keys))


@settings(max_examples=300, deadline=None)
@given(data=st.data(), etype=event_types())
def test_event_of_equals_the_attribute_by_attribute_check(data: st.DataObject,
                                                          etype: EventType) -> None:
    values: dict[Any, Any] = {a.name: data.draw(domain_values(a.domain))
                              for a in etype.attributes}
    for _ in range(data.draw(st.integers(0, 3))):
        change = data.draw(st.integers(0, 4))
        name = data.draw(st.sampled_from(etype.names))
        if change == 0:
            values.pop(name, None)
        elif change == 1:
            values[data.draw(st.sampled_from(["zz", "type", 7, name + "x"]))] = 1
        elif change == 2:
            values[name] = data.draw(st.sampled_from(ODD_VALUES))
        else:  # just outside (or on) an integer domain's bounds
            d = etype.attribute(name).domain
            if isinstance(d, IntDomain):
                values[name] = data.draw(st.sampled_from([d.lo - 1, d.hi + 1, d.lo, d.hi]))
    want = _outcome(lambda: Event._checked(etype, values))
    assert _outcome(lambda: Event.of(etype, values)) == want
    assert _outcome(lambda: Event.of(etype, values)) == want  # the keyer cached
    good = {a.name: data.draw(domain_values(a.domain)) for a in etype.attributes}
    for a in etype.attributes:  # on and just outside each integer domain's bounds
        if isinstance(a.domain, IntDomain):
            for v in (a.domain.lo - 1, a.domain.lo, a.domain.hi, a.domain.hi + 1):
                one = {**good, a.name: v}
                assert _outcome(lambda o=one: Event.of(etype, o)) == _outcome(
                    lambda o=one: Event._checked(etype, o))


def test_event_of_refuses_what_it_refused() -> None:
    """A few user-visible errors, word for word."""
    t = EventType("T", (Attribute("a", IntDomain(0, 9), 0), Attribute("s", StringDomain(), 1)))
    with pytest.raises(SiftbusError, match=r"^T\.a: 10 is outside the domain int\[0,9\]$"):
        Event.of(t, {"a": 10, "s": "x"})
    with pytest.raises(SiftbusError, match=r"^T\.a: True is not an integer"):
        Event.of(t, {"a": True, "s": "x"})
    with pytest.raises(SiftbusError, match=r"^T\.s: 3 is not a string$"):
        Event.of(t, {"a": 3, "s": 3})
    with pytest.raises(SiftbusError, match=r"^T event lacks attribute\(s\) s$"):
        Event.of(t, {"a": 3})
    with pytest.raises(SiftbusError, match=r"^T has no attribute\(s\) b$"):
        Event.of(t, {"a": 3, "s": "x", "b": 1})
    assert Event.of(t, {"a": 9.0, "s": Label("y")}).keys == (9, "y")
    assert Event.of(t, {"s": "y", "a": 0}) == Event(t, (0, "y"))


def test_the_fast_path_makes_the_same_immutable_event() -> None:
    """The fast path sets a plain event's fields through their slots: the event is equal
    to, hashes like, pickles like and is as frozen as one made by the constructor; a
    subclass's ``of`` still goes through its constructor."""
    import dataclasses
    import pickle

    t = EventType.of("T", a="int[0,9]", s="enum[x,y]")
    e = Event.of(t, {"a": 3, "s": "y"})
    made = Event(t, (3, 1))
    assert type(e) is Event and e == made and hash(e) == hash(made)
    assert e.keys == (3, 1) and e.etype is t and e.values() == {"a": 3, "s": "y"}
    assert pickle.loads(pickle.dumps(e)) == made
    with pytest.raises(dataclasses.FrozenInstanceError):
        e.keys = (4, 1)  # type: ignore[misc]

    @dataclasses.dataclass(frozen=True, slots=True)
    class Tagged(Event):
        def __post_init__(self) -> None:
            assert self.keys  # the constructor ran

    sub = Tagged.of(t, {"a": 3, "s": "y"})
    assert type(sub) is Tagged and sub.keys == (3, 1)
