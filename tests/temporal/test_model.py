"""Persistent notifications, validities, collections and the JSON-lines format."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from siftbus.errors import InputError, ProfileError
from siftbus.model import IntervalSet, Profile
from siftbus.temporal import (
    Change,
    ChangeKind,
    Collection,
    PersistentNotification,
    Reason,
    Validity,
)
from siftbus.temporal.text import (
    MAX_LINE,
    format_notification,
    iter_notification_lines,
    load_notifications,
    parse_notification,
)
from temporal_strategies import SCHEMA, T, boxes, validities


def iter_unique(text: str) -> list[PersistentNotification]:
    import pathlib
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        p = pathlib.Path(d, "docs.jsonl")
        p.write_text(text)
        return load_notifications(p, SCHEMA)


def test_validity_is_half_open() -> None:
    v = Validity(1.0, 3.0)
    assert not v.active(0.5) and v.pending(0.5)
    assert v.active(1.0) and v.active(2.999)
    assert not v.active(3.0) and v.expired(3.0)
    assert Validity().active(-1e300) and not Validity().expired(1e300)
    assert Validity.of(5.0) == Validity(5.0, math.inf)
    assert Validity.of(5.0, start=1.0, end=2.0) == Validity(1.0, 2.0)
    for bad in (lambda: Validity(2.0, 1.0), lambda: Validity(math.nan, 1.0),
                lambda: Validity(math.inf, math.inf), lambda: Validity.of(0, ttl=math.inf)):
        with pytest.raises(InputError):
            bad()


def test_notification_takes_its_id_and_drops_a_subscriber() -> None:
    box = Profile.from_constraints("other", T, {"a": IntervalSet.range(1, 2)}, "someone")
    n = PersistentNotification("n1", box, "pub")
    assert n.subspace.id == "n1" and n.subspace.subscriber == ""
    assert n.type_name == "T" and n.etype is T
    assert n.replace(version=3).version == 3 and n.replace(version=3).same_content(n)
    with pytest.raises(InputError):
        PersistentNotification("n1", box, version=-1)


def test_collection_applies_changes_strictly() -> None:
    box = Profile.from_constraints("x", T, {})
    n = PersistentNotification("n", box, "p")
    c = Collection("f")
    c.apply(Change(ChangeKind.ADD, "f", n, Reason.PUBLISHED))
    assert c.ids() == ["n"] and "n" in c and len(c) == 1
    with pytest.raises(InputError, match="added twice"):
        c.apply(Change(ChangeKind.ADD, "f", n, Reason.PUBLISHED))
    c.apply(Change(ChangeKind.UPDATE, "f", n.replace(version=1), Reason.UPDATED))
    assert next(iter(c)).version == 1
    c.apply(Change(ChangeKind.REMOVE, "f", n, Reason.WITHDRAWN))
    with pytest.raises(InputError, match="does not hold"):
        c.apply(Change(ChangeKind.REMOVE, "f", n, Reason.WITHDRAWN))
    with pytest.raises(InputError, match="does not hold"):
        c.apply(Change(ChangeKind.UPDATE, "f", n, Reason.UPDATED))


@settings(max_examples=200, deadline=None)
@given(box=boxes("n", strings=True), validity=validities(),
       publisher=st.sampled_from(["", "canteen", "B1/pub"]), version=st.integers(0, 5))
def test_json_lines_round_trip(box: Profile, validity: Validity, publisher: str,
                               version: int) -> None:
    if validity.start == -math.inf:
        validity = Validity(0.0, validity.end)
    n = PersistentNotification("n-1", box, publisher, validity, version)
    back = parse_notification(format_notification(n), SCHEMA)
    assert back == n


def test_defaults_and_ttl() -> None:
    n = parse_notification('{"id": "a", "subspace": "T(a = 3)", "ttl": 10}', SCHEMA, now=100)
    assert n.validity == Validity(100, 110) and n.publisher == ""
    n = parse_notification('{"id": "a", "subspace": "T()", "start": 5, "end": null}',
                           SCHEMA, now=100)
    assert n.validity == Validity(5, math.inf)
    text = '# documents\n\n{"id": "a", "subspace": "U(x = 1)"}\n'
    assert [m.id for m in iter_notification_lines(text, SCHEMA)] == ["a"]


BAD = [
    ('{"id": "a", "subspace": "T(a = 3)"', "invalid JSON", 35),
    ('{"id": "a", "id": "b", "subspace": "T()"}', "given twice", 13),
    ('{"id": "a", "subspace": "T()", "start": NaN}', "not a JSON value", 41),
    ('{"id": "a", "subspace": "T()", "x": ' + "[" * 100 + "]" * 100 + "}",
     "nested deeper than", 100),
    ('[1, 2]', "JSON object", 1),
    ('{"id": "a"}', "'subspace' must be a string", 1),
    ('{"id": 3, "subspace": "T()"}', "'id' must be a string", 8),
    ('{"id": "a", "subspace": "T()", "colour": 1}', "unknown field 'colour'", 32),
    ('{"id": "a", "subspace": "T()", "ttl": -1}', "ttl must be a positive", 39),
    ('{"id": "a", "subspace": "T()", "start": true}', "finite number", 41),
    ('{"id": "a", "subspace": "T()", "start": 3, "end": 2}', "must end after", 51),
    ('{"id": "a", "subspace": "T()", "end": 2, "ttl": 2}', "not both", 49),
    ('{"id": "a", "subspace": "T()", "version": -2}', "non-negative", 43),
    ('{"id": "a", "subspace": "T()", "publisher": 5}', "'publisher' must be", 45),
    ('{"id": "a", "subspace": "T()", "end": "soon"}', "finite number", 39),
    ('{"id": "a", "subspace": "x: T()"}', "must not carry an id", 25),
    ('{"id": "a", "subspace": "T(zz = 1)"}', "no attribute 'zz'", 28),
    ('{"id": "a", "subspace": "Nope(a = 1)"}', "unknown event type", 26),
    ('{"id": "a b", "subspace": "T()"}', "must be letters", 8),
    ('{"id": "a", "subspace": "T(a = 9)"}', "outside the domain", 28),
]


@pytest.mark.parametrize(("line", "message", "column"), BAD)
def test_bad_lines_are_refused_with_their_place(line: str, message: str, column: int) -> None:
    with pytest.raises((InputError, ProfileError)) as info:
        parse_notification(line, SCHEMA, source="docs.jsonl", line=4)
    err = info.value
    assert message in str(err) and err.line == 4 and err.source == "docs.jsonl"
    assert err.column == column


def test_a_duplicate_id_names_both_lines() -> None:
    text = '{"id": "a", "subspace": "T()"}\n\n{"id": "b", "subspace": "T()"}\n' \
           '{"id": "a", "subspace": "U()"}\n'
    with pytest.raises(InputError, match="'a' appears twice \\(first on line 1\\)") as info:
        list(iter_unique(text))
    assert (info.value.line, info.value.column) == (4, 8)


def test_overlong_line_is_refused_before_parsing() -> None:
    line = '{"id": "a", "subspace": "T(a in {' + ", ".join(["1"] * MAX_LINE) + '})"}'
    with pytest.raises(InputError, match="exceeds the limit"):
        parse_notification(line, SCHEMA)
