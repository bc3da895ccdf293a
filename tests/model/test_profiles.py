"""Profiles: every operator at its domain boundaries, normalisation, unsatisfiable profiles,
and an independent check of normalisation against the plain meaning of each condition."""

from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from siftbus.errors import DomainError, ProfileError, UnsatisfiableProfileError
from siftbus.lang import parse_profile
from siftbus.model import (
    Event,
    EventType,
    Extreme,
    IntervalSet,
    Op,
    Predicate,
    Profile,
    StringDomain,
    parse_schema,
)
from strategies import domain_values, event_types, predicates

SCHEMA = parse_schema("""
[T]
i = "int[-40,60]"
d = "decimal[-40,60,1]"
e = "enum[OK,DEGRADED,FAILED]"
s = "string"
""")
T = SCHEMA["T"]
BASE = {"i": 0, "d": Decimal(0), "e": "OK", "s": "x"}


def ev(**kw: object) -> Event:
    return Event.of(T, {**BASE, **kw})


def accepts(text: str, **kw: object) -> bool:
    return parse_profile(f"p: T({text})", SCHEMA).matches(ev(**kw))


@pytest.mark.parametrize(
    ("cond", "yes", "no"),
    [
        ("i = 5", [5], [4, 6]),
        ("i != 5", [4, 6, -40, 60], [5]),
        ("i < 5", [4, -40], [5, 60]),
        ("i <= 5", [5, -40], [6]),
        ("i > 5", [6, 60], [5, -40]),
        ("i >= 5", [5, 60], [4]),
        ("i in [-3, 7]", [-3, 0, 7], [-4, 8]),
        ("i in {1, 3, 60}", [1, 3, 60], [2, 59]),
        ("i > MIN", [-39, 60], [-40]),
        ("i >= MIN", [-40, 60], []),
        ("i < MAX", [59], [60]),
        ("i = MAX", [60], [59]),
        ("i in [MIN, 0]", [-40, 0], [1]),
        ("i exists", [-40, 60], []),
    ],
)
def test_int_operators_at_boundaries(cond: str, yes: list[int], no: list[int]) -> None:
    for v in yes:
        assert accepts(cond, i=v), (cond, v)
    for v in no:
        assert not accepts(cond, i=v), (cond, v)


@pytest.mark.parametrize(
    ("cond", "yes", "no"),
    [
        ("d > 20", ["20.1", "60"], ["20.0", "20.04"]),  # 20.04 rounds to 20.0
        ("d > 20", ["20.05"], []),  # 20.05 rounds half up to 20.1
        ("d >= 20.0", ["20", "19.95"], ["19.94"]),
        ("d < -39.9", ["-40"], ["-39.9"]),
        ("d in [21.5, 22.5]", ["21.5", "22.5", "22.0"], ["21.4", "22.6"]),
        ("d = 21.55", ["21.6"], ["21.5"]),  # literals round to the domain's places too
        ("d in {1, 2.5}", ["1.0", "2.5"], ["2.4"]),
    ],
)
def test_decimal_operators_and_rounding(cond: str, yes: list[str], no: list[str]) -> None:
    for v in yes:
        assert accepts(cond, d=Decimal(v)), (cond, v)
    for v in no:
        assert not accepts(cond, d=Decimal(v)), (cond, v)


def test_enum_compares_in_declared_order() -> None:
    assert [accepts("e >= DEGRADED", e=x) for x in ("OK", "DEGRADED", "FAILED")] == [
        False, True, True]
    assert [accepts("e < FAILED", e=x) for x in ("OK", "DEGRADED", "FAILED")] == [
        True, True, False]
    assert accepts('e = "FAILED"', e="FAILED")  # a quoted label is accepted too
    assert accepts("e in [OK, DEGRADED]", e="DEGRADED")


def test_string_operators() -> None:
    assert accepts('s = "hall"', s="hall") and not accepts('s = "hall"', s="hall2")
    assert accepts('s != "hall"', s="hall2") and not accepts('s != "hall"', s="hall")
    assert accepts('s prefix "ha"', s="hall") and not accepts('s prefix "ha"', s="h")
    assert accepts('s in {"a", "b"}', s="b") and not accepts('s in {"a", "b"}', s="c")
    assert accepts('s prefix ""', s="anything")


def test_several_conditions_on_one_attribute_collapse() -> None:
    p = parse_profile("p: T(i > 0, i < 10, i != 5, i >= 2)", SCHEMA)
    assert len(p.conditions) == 1
    assert p.constraint("i") == IntervalSet(((2, 4), (6, 9)))
    q = parse_profile('q: T(s prefix "no", s prefix "nor", s != "nor")', SCHEMA)
    assert len(q.conditions) == 1
    assert q.matches(ev(s="north")) and not q.matches(ev(s="nor"))


def test_whole_domain_conditions_disappear() -> None:
    p = parse_profile('p: T(i >= MIN, d <= MAX, e exists, s exists, s prefix "")', SCHEMA)
    assert p.conditions == ()
    assert p.filter_key == parse_profile("q: T()", SCHEMA).filter_key


def test_finite_domains_make_equivalent_profiles_equal() -> None:
    # Bittner's example 2.2: a > 58 is a in {59, 60} on [-40, 60].
    a = parse_profile("a: T(i > 58)", SCHEMA)
    b = parse_profile("b: T(i in {59, 60})", SCHEMA)
    assert a.filter_key == b.filter_key


@pytest.mark.parametrize(
    "text",
    ["i > 5, i < 5", "i < MIN", "i > MAX", "i = 3, i = 4", 's = "a", s = "b"',
     's prefix "a", s prefix "b"', "e > FAILED"],
)
def test_unsatisfiable_profiles_are_reported(text: str) -> None:
    with pytest.raises(UnsatisfiableProfileError) as info:
        parse_profile(f"p: T({text})", SCHEMA)
    assert info.value.column is not None


@pytest.mark.parametrize(
    ("text", "error", "fragment"),
    [
        ("i = 61", DomainError, "outside"),
        ("i = 1.5", DomainError, "not an integer"),
        ("i in [5, 1]", ProfileError, "lower bound is above upper bound"),
        ('i = "3"', DomainError, "not an integer"),
        ('s > "a"', ProfileError, "needs an ordered attribute"),
        ("s = MIN", ProfileError, "needs an ordered attribute"),
        ('i prefix "1"', ProfileError, "only to string"),
        ("e = BROKEN", DomainError, "not one of"),
        ("x = 1", ProfileError, "no attribute 'x'"),
        ("s = abc", ProfileError, "must be quoted"),
    ],
)
def test_bad_conditions(text: str, error: type[Exception], fragment: str) -> None:
    with pytest.raises(error) as info:
        parse_profile(f"p: T({text})", SCHEMA)
    assert fragment in str(info.value)
    assert getattr(info.value, "column", None) == 6


def test_bad_ids() -> None:
    with pytest.raises(ProfileError, match="profile id"):
        Profile.build("a b", T, [])


def plain_meaning(pred: Predicate, etype: EventType, event: Event) -> bool:
    """What a condition means, computed on values (not keys) with Python's operators."""
    d = etype.attribute(pred.attr).domain
    value = event[pred.attr]
    if pred.op is Op.EXISTS:
        return True
    if isinstance(d, StringDomain):
        s = str(value)
        ops = {Op.EQ: lambda: s == pred.operands[0], Op.NE: lambda: s != pred.operands[0],
               Op.IN: lambda: s in pred.operands,
               Op.PREFIX: lambda: s.startswith(str(pred.operands[0]))}
        return ops[pred.op]()

    def rank(v: object) -> object:
        if v is Extreme.MIN:
            return d.value(d.min_key)  # type: ignore[union-attr]
        if v is Extreme.MAX:
            return d.value(d.max_key)  # type: ignore[union-attr]
        return v

    def order(v: object) -> object:  # enum labels compare by declared position
        v = rank(v)
        return d.labels.index(v) if hasattr(d, "labels") else v

    x, ops_ = order(value), [order(v) for v in pred.operands]
    table = {Op.EQ: lambda: x == ops_[0], Op.NE: lambda: x != ops_[0],
             Op.LT: lambda: x < ops_[0], Op.LE: lambda: x <= ops_[0],
             Op.GT: lambda: x > ops_[0], Op.GE: lambda: x >= ops_[0],
             Op.RANGE: lambda: ops_[0] <= x <= ops_[1], Op.IN: lambda: x in ops_}
    return bool(table[pred.op]())


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_normalised_profile_means_the_conjunction_of_its_conditions(data: st.DataObject) -> None:
    etype = data.draw(event_types(max_attrs=3))
    preds = [data.draw(predicates(data.draw(st.sampled_from(etype.attributes))))
             for _ in range(data.draw(st.integers(0, 4)))]
    try:
        profile = Profile.build("p", etype, preds)
    except UnsatisfiableProfileError:
        profile = None
    for _ in range(5):
        event = Event.of(etype, {a.name: data.draw(domain_values(a.domain))
                                 for a in etype.attributes})
        expected = all(plain_meaning(p, etype, event) for p in preds)
        if profile is None:
            assert not expected
        else:
            assert profile.matches(event) == expected
