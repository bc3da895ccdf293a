"""The profile language: both surface forms, located errors, round trips, fuzzing."""

import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from siftbus.errors import ProfileError, ProfileSyntaxError, SiftbusError
from siftbus.lang import format_profile, parse_profile, parse_profiles
from siftbus.lang.profile import PROFILE_LIMITS, ProfileLimits, load_profiles, parse_profile_text
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


# --- hostile lines: bounded memory, documented limits, one located error -------------

def test_a_long_string_costs_memory_in_proportion_to_its_length() -> None:
    # The old STRING pattern kept regex backtracking state per character: 300 traced
    # bytes per input byte, 3-4.6 GB for a 16 MB line.
    size = 1_000_000
    line = 'p: Lamp(name = "' + "a" * size + '")'
    parse_profile_text('p: Lamp(name = "a")')  # build the parser outside the measurement
    limits = ProfileLimits(max_line=2 * size, max_string=2 * size)
    tracemalloc.start()
    try:
        parsed = parse_profile_text(line, limits=limits)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert parsed.conditions[0].predicate.operands == ("a" * size,)
    assert peak < 12 * size, f"{peak / size:.0f} bytes per input byte"


@pytest.mark.parametrize(("text", "column", "fragment"), [
    ('p: Lamp(name = "' + "a" * 70_000 + '")', 65537, "longer than 65536 characters"),
    ('p: Lamp(name = "' + "a" * 20_000 + '")', 16, "string longer than 16384 characters"),
    ("p: T1(a1 = " + "9" * 1001 + ")", 12, "number longer than 1000 characters"),
    ("p: T1(" + ", ".join(["a1 > 1"] * 257) + ")", 7 + 8 * 256,
     "more than 256 conditions"),
    ('p: Lamp(name = "\\q")', 17, "invalid string: Invalid \\escape"),
    ('p: Lamp(name = "x\\q")', 18, "invalid string"),
    ('p: Lamp(name = "\\ud800")', 17, "lone UTF-16 surrogate"),
    ('p: Lamp(name prefix "a\tb")', 23, "invalid string: Invalid control character"),
    ('p: Lamp(name = "' + "a" * 5000, 16, "unexpected character"),
    ("p" * 60_000 + "@" + "q" * 5000, 60_001, "unexpected character '@'"),
])
def test_hostile_profile_lines_are_one_located_error(text: str, column: int,
                                                     fragment: str) -> None:
    with pytest.raises(ProfileSyntaxError) as info:
        parse_profile(text, SCHEMA, source="p.txt", line=3)
    err = info.value
    assert (err.source, err.line, err.column) == ("p.txt", 3, column), str(err)
    assert fragment in str(err)
    assert len(str(err)) < 300


def test_profile_limits_are_configurable() -> None:
    text = "p: T1(" + ", ".join(["a1 > 1"] * 300) + ")"
    assert parse_profile(text, SCHEMA, limits=ProfileLimits(max_conditions=300)).id == "p"
    with pytest.raises(ValueError, match="max_string"):
        ProfileLimits(max_string=0)
    assert ProfileLimits(65536, 16384, 1000, 256) == PROFILE_LIMITS


def test_profile_files_read_by_the_one_rule(tmp_path: Path) -> None:
    f = tmp_path / "p.txt"
    f.write_bytes(b"\xef\xbb\xbfp1: T1(a1 = 1)\rp2: T1(a2 = 2)\r\np3: T1()\n")
    assert [p.id for p in load_profiles(f, SCHEMA)] == ["p1", "p2", "p3"]
    assert [p.id for p in parse_profiles("p1: T1()\rp2: T1()", SCHEMA)] == ["p1", "p2"]
    f.write_bytes(b"p1: T1()\rp2: Lamp(name = \"\xff\")\n")
    with pytest.raises(ProfileError) as info:
        load_profiles(f, SCHEMA)
    assert (info.value.line, info.value.column) == (2, 18) and "not UTF-8" in str(info.value)
    f.write_bytes(b"p1: T1()\n" + b"x" * 300_000 + b"\n")
    with pytest.raises(ProfileError, match=r"ProfileLimits\.max_line") as info:
        load_profiles(f, SCHEMA)
    assert info.value.line == 2


# --- MIN and MAX as enum labels --------------------------------------------------------

LEVELS = parse_schema("""
[Alarm]
level = "enum[LOW,MID,HIGH,MAX]"
odd = "enum[A,MIN,B]"
n = "int[0,9]"
""")


def keys(text: str) -> dict[str, tuple[tuple[int, int], ...]]:
    p = parse_profile(text, LEVELS)
    return {c.attr: c.constraint.intervals for c in p.conditions}  # type: ignore[attr-defined]


def test_a_declared_label_wins_over_the_domain_bound() -> None:
    assert keys("p: Alarm(level = MAX)") == {"level": ((3, 3),)}
    assert keys("p: Alarm(level < MAX)") == {"level": ((0, 2),)}
    assert keys("p: Alarm(odd = MIN)") == {"odd": ((1, 1),)}  # the label, not A
    assert keys("p: Alarm(odd > MIN)") == {"odd": ((2, 2),)}
    assert keys("p: Alarm(level >= MIN)") == {}  # MIN is not a label here: the bound
    assert keys("p: Alarm(n < MAX)") == {"n": ((0, 8),)}
    # Bittner's virtual elements apply only where no such label is declared
    assert keys("p: PROFILE(PRI(level<MAX,TYPE=Alarm))") == {"level": ((0, 2),)}
    assert keys("p: PROFILE(PRI(odd>MIN,TYPE=Alarm))") == {"odd": ((2, 2),)}
    assert keys("p: PROFILE(PRI(level>MIN,n<MAX,TYPE=Alarm))") == {}


def test_profiles_on_min_max_labels_print_and_parse_back() -> None:
    for text in ("p: Alarm(level = MAX)", "p: Alarm(level in {LOW, MAX})",
                 "p: Alarm(odd != MIN, level in [MID, MAX])"):
        p = parse_profile(text, LEVELS)
        for form in ("native", "bittner"):
            assert parse_profile(format_profile(p, form=form), LEVELS) == p


MUTATIONS = ['"', "\\", "(", ")", ",", "{", "}", "[", "]", "=", "<", "@", ":", "\ud800",
             "\x00", "\n", "\u2028", "9" * 50, "MIN", "MAX", "in", "prefix", " "]


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_mutated_profiles_give_a_profile_or_a_siftbus_error(data: st.DataObject) -> None:
    etype = data.draw(event_types(max_attrs=4))
    schema = Schema((etype, *LEVELS))
    text = format_profile(data.draw(profiles(etype, pid="p")),
                          form=data.draw(st.sampled_from(["native", "bittner"])))
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(text)))
        cut = data.draw(st.integers(0, 3))
        text = text[:at] + data.draw(st.sampled_from(MUTATIONS)) + text[at + cut:]
    try:
        parse_profile(text, schema, limits=ProfileLimits(max_string=20, max_conditions=3))
    except SiftbusError as exc:
        assert exc.line == 1 and exc.column is not None and 1 <= exc.column <= len(text) + 1
        assert "\n" not in str(exc)
