"""The oracle: literal semantics, ordering of ids, add/remove contract."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from siftbus.errors import DuplicateProfileError, UnknownProfileError
from siftbus.lang import parse_profile
from siftbus.match import Matcher, ReferenceMatcher
from siftbus.model import Event, parse_schema
from strategies import event_types, events, profiles

SCHEMA = parse_schema('[T]\na = "int[0,9]"\n[U]\na = "int[0,9]"\n')


def test_ids_are_sorted_by_code_point() -> None:
    m = ReferenceMatcher()
    for pid in ["p9", "p10", "B", "a", "Z1", "é"]:
        m.add(parse_profile(f"{pid}: T()", SCHEMA))
    assert m.match(Event.of(SCHEMA["T"], {"a": 1})) == ["B", "Z1", "a", "p10", "p9", "é"]


def test_type_must_match() -> None:
    m = ReferenceMatcher()
    m.add(parse_profile("t: T(a = 1)", SCHEMA))
    m.add(parse_profile("u: U(a = 1)", SCHEMA))
    assert m.match(Event.of(SCHEMA["U"], {"a": 1})) == ["u"]


def test_add_remove_contract() -> None:
    m = ReferenceMatcher()
    assert isinstance(m, Matcher)
    p = parse_profile("p: T(a > 4)", SCHEMA)
    m.add(p)
    with pytest.raises(DuplicateProfileError):
        m.add(p)
    assert "p" in m and len(m) == 1 and m.get("p") is p
    assert m.remove("p") is p
    with pytest.raises(UnknownProfileError, match="no profile with id 'p'"):
        m.remove("p")
    with pytest.raises(KeyError):  # the error also is what a dict user expects
        m.get("p")
    assert m.match(Event.of(SCHEMA["T"], {"a": 7})) == []
    assert list(m.profiles()) == []


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_interleaved_add_remove_matches_the_live_set(data: st.DataObject) -> None:
    etype = data.draw(event_types(max_attrs=3))
    m = ReferenceMatcher()
    live: dict[str, object] = {}
    for step in range(data.draw(st.integers(1, 25))):
        if live and data.draw(st.booleans()):
            pid = data.draw(st.sampled_from(sorted(live)))
            assert m.remove(pid) is live.pop(pid)
        else:
            p = data.draw(profiles(etype, pid=f"p{step}"))
            m.add(p)
            live[p.id] = p
        evs = [data.draw(events(etype)) for _ in range(3)]
        expected = [sorted(pid for pid, p in live.items() if p.matches(e))  # type: ignore[attr-defined]
                    for e in evs]
        assert m.match_batch(evs) == expected
        assert [m.match(e) for e in evs] == expected
