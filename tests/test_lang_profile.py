"""The profile language: both surface forms, located errors, round trips, fuzzing."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from siftbus.errors import ProfileError, SiftbusError
from siftbus.lang import format_profile, parse_profile, parse_profiles
from siftbus.model import Schema, parse_schema
from strategies import event_types, profiles

SCHEMA = parse_schema("""
[T1]
a1 = "int[0,100]"
a2 = "int[0,100]"
[Lamp]
state = "enum[OK,DEGRADED,FAILED]"
name = "string"
""")


def test_bittner_form_equals_native_form() -> None:
    b = parse_profile("PROFILE(PRI(a1=5,a2>10,TYPE=T1))", SCHEMA, id="p")
    n = parse_profile("p: T1(a1 = 5, a2 > 10)", SCHEMA)
    assert b == n
    assert format_profile(n, form="bittner") == "p: PROFILE(PRI(a1=5,a2>10,TYPE=T1))"
    assert parse_profile("p: PROFILE(PRI(TYPE=T1, a1 in {1, 2}, a2 IN [3, 4]))", SCHEMA) == \
        parse_profile("p: T1(a1 in {1,2}, a2 in [3,4])", SCHEMA)


def test_bittner_min_max_are_virtual_elements() -> None:
    # In the thesis w_min/w_max lie outside the domain: a > MIN accepts every value.
    p = parse_profile("p: PROFILE(PRI(a1>MIN,a2<MAX,TYPE=T1))", SCHEMA)
    assert p.conditions == ()
    # In the native form MIN and MAX are the domain's own least and greatest values.
    q = parse_profile("q: T1(a1 > MIN, a2 < MAX)", SCHEMA)
    assert [c.constraint.intervals for c in q.conditions] == [((1, 100),), ((0, 99),)]


def test_id_and_subscriber() -> None:
    p = parse_profile("heater-1.a/b@building-3: T1(a1 = 1)", SCHEMA)
    assert (p.id, p.subscriber, p.owner) == ("heater-1.a/b", "building-3", "building-3")
    q = parse_profile("x: T1()", SCHEMA)
    assert (q.subscriber, q.owner) == ("", "x")
    with pytest.raises(ProfileError, match="no id"):
        parse_profile("T1(a1 = 1)", SCHEMA)


@pytest.mark.parametrize(
    ("text", "column", "fragment"),
    [
        ("p: T1(a1 = 5", 13, "unexpected end"),
        ("p: T1(a1 == 5)", 11, "unexpected"),
        ("p: T1(a1 = 5 a2 = 3)", 14, "unexpected 'a2'"),
        ("p: T1(a1 = 5,)", 14, "unexpected ')'"),
        ("p: T1(a1 ~ 5)", 10, "unexpected character '~'"),
        ("p: T1(a1 in [1, 2, 3])", 18, "unexpected ','"),
        ('p: Lamp(name = "open)', 16, "unexpected character"),
        ("p: PROFILE(PRI(a1=5))", 4, "needs TYPE="),
        ("p: PROFILE(PRI(TYPE=T1,TYPE=T1))", 29, "TYPE is given twice"),
        ("p: T9(a1 = 5)", 4, "unknown event type 'T9'"),
        ("p: T1(a1 = 5, a3 = 1)", 15, "no attribute 'a3'"),
        ("p: T1(a1 = 5, a1 = 6)", 15, "exclude every value"),
    ],
)
def test_errors_carry_line_and_column(text: str, column: int, fragment: str) -> None:
    with pytest.raises(ProfileError) as info:
        parse_profile(text, SCHEMA, source="p.txt", line=4)
    err = info.value
    assert (err.source, err.line, err.column) == ("p.txt", 4, column), str(err)
    assert fragment in str(err)
    assert str(err).startswith("p.txt, line 4, column ")


def test_profile_file_with_comments_blank_lines_and_duplicates() -> None:
    text = "# heating\n\np1: T1(a1 = 1)\n  \np2: T1(a2 = 2)\n"
    assert [p.id for p in parse_profiles(text, SCHEMA)] == ["p1", "p2"]
    with pytest.raises(ProfileError) as info:
        parse_profiles(text + "p1: T1()\n", SCHEMA, source="f")
    assert info.value.line == 6 and "already used on line 3" in str(info.value)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_printer_output_parses_back_to_an_equal_profile(data: st.DataObject) -> None:
    etype = data.draw(event_types(max_attrs=4))
    schema = Schema((etype,))
    sub = data.draw(st.sampled_from(["", "s1", "p"]))
    p = data.draw(profiles(etype, pid="p", subscriber=sub))
    for form in ("native", "bittner"):
        text = format_profile(p, form=form)
        assert parse_profile(text, schema) == p, text


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="T1Lamp(){}[],=<>!\" a12.-:@prefixinexistsPROFILEPRITYPEMINMAX",
               max_size=40))
def test_fuzzed_text_gives_a_profile_or_a_siftbus_error(text: str) -> None:
    try:
        parse_profile(text, SCHEMA, id="x")
    except SiftbusError as exc:
        assert exc.line == 1 and exc.column is not None and exc.column >= 1
