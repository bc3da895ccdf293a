"""The composite language: documented examples, round trips, located errors, limits,
fuzzing (a value or a SiftbusError), and the event-time declaration of the schema."""

from __future__ import annotations

import dataclasses
import re
import time
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from composite_strategies import BUILDING, POLICIES, SCHEMA, composites
from siftbus.errors import InputError, ProfileError, ProfileSyntaxError, SchemaError, SiftbusError
from siftbus.lang.composite import (
    CompositeLimits,
    CompositeProfile,
    Conjunction,
    Consumption,
    Disjunction,
    FollowedBy,
    Negation,
    Select,
    Windowed,
    format_composite,
    format_duration,
    load_composites,
    parse_composite,
    parse_composites,
)
from siftbus.match.composite import event_time, stamp
from siftbus.model import Event, parse_schema
from siftbus.model.schema import Schema


def doc_examples() -> list[str]:
    text = Path(__file__).resolve().parents[2].joinpath("docs", "composite.md").read_text()
    block = text.split("### Examples", 1)[1].split("```", 2)[1]
    return [ln for ln in block.splitlines() if ln.strip() and not ln.startswith("#")]


def test_documented_examples_parse_and_print_back() -> None:
    lines = doc_examples()
    assert len(lines) == 5
    for line in lines:
        c = parse_composite(line, BUILDING)
        assert parse_composite(format_composite(c), BUILDING) == c


def test_precedence_follows_the_table() -> None:
    c = parse_composite("p: a=Motion() -> b=Heater() and c=Door() or d=Badge() within 1 s",
                        BUILDING)
    # -> binds loosest, then or, then and: a -> ((b and c) or d)
    assert isinstance(c.pattern, FollowedBy)
    _, rest = c.pattern.steps
    assert isinstance(rest, Disjunction)
    assert isinstance(rest.operands[0], Conjunction)
    assert [x.label for x in c.components()] == ["a", "b", "c", "d"]
    chain = parse_composite("p: a=Motion() -> b=Motion() -> c=Motion() within 1 s", BUILDING)
    assert isinstance(chain.pattern, FollowedBy) and len(chain.pattern.steps) == 3
    grouped = parse_composite("p: (a=Motion() -> b=Motion()) -> c=Motion() within 1 s",
                              BUILDING)
    assert isinstance(grouped.pattern, FollowedBy) and len(grouped.pattern.steps) == 2
    assert format_composite(grouped).startswith("p: (a=Motion() -> b=Motion()) -> c=Motion()")


def test_defaults_ids_labels_and_keywords() -> None:
    c = parse_composite("alarm@security: GlassBreak(level > 5) -> m=Motion(present = 1) "
                        "WITHIN 60 S Same room", BUILDING)
    assert (c.id, c.subscriber, c.owner) == ("alarm", "security", "security")
    assert (c.select, c.consumption, c.window, c.same) == (Select.FIRST, Consumption.REUSE,
                                                           60_000_000, ("room",))
    glass, motion = c.positive()
    assert (glass.label, motion.label) == ("GlassBreak", "m")
    assert (glass.profile.id, glass.profile.subscriber) == ("alarm/GlassBreak", "security")
    assert c.component("m") is motion
    neg = parse_composite("f: Heater(on = 1) -> not Temperature(value > 19) within 10 min "
                          "select each consume", BUILDING)
    assert isinstance(neg.pattern, FollowedBy) and isinstance(neg.pattern.steps[1], Negation)
    assert [x.label for x in neg.negated()] == ["Temperature"]
    assert (neg.select, neg.consumption) == (Select.EACH, Consumption.CONSUME)
    w = parse_composite("w: (a=Motion() -> b=Motion() within 2 s) -> c=Motion() within 1 h",
                        BUILDING)
    assert isinstance(w.pattern, FollowedBy) and isinstance(w.pattern.steps[0], Windowed)
    assert parse_composite("q: Motion() within 1.5 min", BUILDING).window == 90_000_000


@pytest.mark.parametrize(("us", "text"), [
    (0, "0 s"), (1, "0.000001 s"), (1_500, "0.0015 s"),
    (2_000, "2 ms"), (90_000_000, "90 s"), (600_000_000, "10 min"), (7_200_000_000, "2 h"),
    (86_400_000_000, "1 d"), (1_250_000, "1250 ms"),
])
def test_durations_print_exactly(us: int, text: str) -> None:
    assert format_duration(us) == text
    c = parse_composite(f"q: Motion() within {text}", BUILDING)
    assert c.window == us


@pytest.mark.parametrize(("text", "at", "fragment"), [
    ("p: Motion() -> Heater()", None, "needs 'within <duration>'"),
    ("p: not Motion() -> Heater() within 1 s", "not", "'not' may only be a step"),
    ("p: Motion() and not Heater() within 1 s", "not", "'not' may only be a step"),
    ("p: Motion() -> not Heater() and Door() within 1 s", "and", "unexpected 'and'"),
    ("p: Motion() -> Motion() within 1 s", "Motion() w", "label 'Motion' is used twice"),
    ("p: Motion(present = 5) within 1 s", "present", "outside the domain"),
    ("p: Motion(nope = 1) within 1 s", "nope", "no attribute 'nope'"),
    ("p: Nope() within 1 s", "Nope", "unknown event type 'Nope'"),
    ("p: Motion() within 1 s same level", "level", "has no attribute 'level'"),
    ("p: Motion() and Sensor() within 1 s same room", "room", "domains must be the same"),
    ("p: Motion() within 1 s same room, room", ", room", "'same room' is given twice"),
    ("p: (Motion() within 2 s) within 1 s", "2 s", "longer than the 1 s around it"),
    ("p: Motion() within 0.0000001 s", "0.0", "whole number of microseconds"),
    ("p: Motion() within -1 s", "-1", "cannot be negative"),
    ("p: Motion() within 1 parsec", "parsec", "expected a unit"),
    ("p: Motion() within 1 s select last", "last", "expected 'each', 'first'"),
    ("Motion() within 1 s", "Motion", "has no id"),
    ("p: Motion(\x00) within 1 s", "\x00", "unexpected character"),
])
def test_errors_are_located(text: str, at: str | None, fragment: str) -> None:
    with pytest.raises(InputError) as err:
        parse_composite(text, BUILDING, source="c.txt", line=7)
    e = err.value
    assert fragment in e.message, e.message
    column = len(text.rstrip()) + 1 if at is None else text.index(at) + 1
    if at == ", room":
        column += 2
    assert (e.source, e.line, e.column) == ("c.txt", 7, column), str(e)


def test_limits() -> None:
    lim = CompositeLimits(max_line=200, max_components=3, max_alternatives=4, max_depth=3)
    with pytest.raises(ProfileSyntaxError, match="longer than 200"):
        parse_composite("p: Motion() within 1 s" + " " * 200, BUILDING, limits=lim)
    with pytest.raises(ProfileError, match="at most 3 components"):
        parse_composite("p: a=Motion() -> b=Motion() -> c=Motion() -> d=Motion() within 1 s",
                        BUILDING, limits=lim)
    with pytest.raises(ProfileError, match="6 alternatives"):
        parse_composite("p: (a=Motion() or b=Heater()) and (c=Door() or d=Badge() or e=Button())"
                        " within 1 s", BUILDING,
                        limits=CompositeLimits(max_alternatives=4, max_depth=8))
    with pytest.raises(ProfileError, match="deeper than 3"):
        parse_composite("p: (((a=Motion() -> b=Motion()) -> c=Motion())) within 1 s", BUILDING,
                        limits=lim)


HOSTILE = [
    "p: " + "(" * 5000 + "Motion()" + ")" * 5000 + " within 1 s",
    "p: " + "(" * 16000,
    "p: " + " -> ".join(f"x{i}=Motion()" for i in range(900)) + " within 1 s",
    "p: " + " and ".join(f"(x{i}=Motion() or y{i}=Heater())" for i in range(8)) + " within 1 s",
    "p: Motion() within " + "9" * 10000 + " s",
    "p: Motion() within 1 s" + " " * 20000,
    'p: Motion(room in {' + ",".join(["1"] * 9000) + "}) within 1 s",
]


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_lines_fail_fast_with_one_short_error(text: str) -> None:
    t0 = time.perf_counter()
    with pytest.raises(SiftbusError) as err:
        parse_composite(text, BUILDING)
    assert time.perf_counter() - t0 < 5  # generous: the point is "not quadratic"
    assert len(str(err.value)) < 200


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(composites(subscriber="sub"), st.sampled_from(POLICIES))
def test_print_parse_round_trip(c: CompositeProfile, policy: tuple[Select, Consumption]
                                ) -> None:
    c = dataclasses.replace(c, select=policy[0], consumption=policy[1])
    text = format_composite(c)
    back = parse_composite(text, SCHEMA)
    assert back == c, text
    assert format_composite(back) == text


ALPHABET = st.sampled_from([
    *"AB()=-> notandorwithin1s same k,v<>", "->", " not ", " and ", " or ", " within ",
    " same ", "A(", "B(v = 1)", "select each", "consume", "x:", "(", ")", " 2 s", "ms", "\x00"])


@settings(max_examples=500, deadline=None)
@given(st.lists(ALPHABET, max_size=40).map("".join))
def test_fuzz_gives_a_value_or_a_siftbus_error(text: str) -> None:
    try:
        c = parse_composite("x: " + text, SCHEMA)
    except SiftbusError:
        return
    assert parse_composite(format_composite(c), SCHEMA) == c


def test_files_skip_comments_and_refuse_duplicate_ids(tmp_path: Path) -> None:
    f = tmp_path / "c.txt"
    f.write_text("# rules\n\na: Motion() within 1 s\nb: Heater() within 1 s\n"
                 "a: Door() within 1 s\n")
    with pytest.raises(ProfileError, match=re.escape("'a' is already used on line 3")) as err:
        load_composites(f, BUILDING)
    assert err.value.line == 5
    assert [c.id for c in parse_composites("a: Motion() within 1 s\n", BUILDING)] == ["a"]
    with pytest.raises(ProfileError, match="cannot read"):
        load_composites(tmp_path / "missing.txt", BUILDING)


# ---- event time in the schema -------------------------------------------------------

def test_schema_declares_event_time_and_carries_it() -> None:
    s = parse_schema('[Heater]\nroom = "int[1,300]"\nts = "decimal[0,4102444800,3]"\n'
                     '"@time" = "ts"\n[Tick]\nt = "int[0,100]"\n"@time" = "t"\n'
                     '[Plain]\na = "int[0,1]"\n')
    assert (s["Heater"].time, s["Tick"].time, s["Plain"].time) == ("ts", "t", None)
    assert s["Heater"].names == ("room", "ts")  # the key is no attribute
    assert Schema.from_dict(s.to_dict()) == s
    assert parse_schema(s.to_toml()) == s
    h = Event.of(s["Heater"], {"room": 1, "ts": Decimal("1700000000.25")})
    assert event_time(h) == 1_700_000_000_250_000
    assert event_time(Event.of(s["Tick"], {"t": 7})) == 7_000_000
    plain = Event.of(s["Plain"], {"a": 1})
    assert event_time(plain) is None
    assert stamp(plain, (0,), 5).time == 5 and stamp(h, (0,), 5).time == 1_700_000_000_250_000
    with pytest.raises(ValueError, match="declares no time"):
        stamp(plain, (0,))


@pytest.mark.parametrize(("toml", "fragment"), [
    ('[H]\na = "int[0,1]"\n"@time" = "b"\n', "not an attribute of H"),
    ('[H]\na = "enum[X,Y]"\n"@time" = "a"\n', "must be int or decimal"),
    ('[H]\na = "string"\n"@time" = "a"\n', "must be int or decimal"),
    ('[H]\na = "decimal[0,1,7]"\n"@time" = "a"\n', "at most 6"),
    ('[H]\na = "int[0,1]"\n"@time" = 3\n', "must name an attribute"),
])
def test_bad_time_declarations_are_located(toml: str, fragment: str) -> None:
    with pytest.raises(SchemaError) as err:
        parse_schema(toml, source="s.toml")
    assert fragment in err.value.message
    assert (err.value.source, err.value.line) == ("s.toml", 3)


@pytest.mark.parametrize("word", ["not", "and", "or", "within", "same", "select", "first",
                                  "each", "reuse", "consume", "NOT", "Each"])
def test_keywords_are_not_labels(word: str) -> None:
    line = f"p: {word}=GlassBreak(level > 5) -> m=Motion() within 1 s"
    with pytest.raises(ProfileSyntaxError, match="is a keyword and cannot be a label") as err:
        parse_composite(line, BUILDING)
    assert err.value.column == 4
    # where a keyword is part of a label it is just a label
    assert parse_composite(f"p: {word}x=GlassBreak() within 1 s", BUILDING)


def _compact(text: str) -> str:
    """``text`` as a user may write it: no default policies, no optional spaces."""
    for long, short in ((" select first", ""), (" reuse", ""), (" = ", "="), (" > ", ">"),
                        (" < ", "<"), (" != ", "!="), (" >= ", ">="), (" <= ", "<="),
                        (", ", ","), (" -> ", "->")):
        text = text.replace(long, short)
    return text


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(composites(subscriber="sub"), st.sampled_from(POLICIES), st.integers(-4, 60))
def test_what_is_accepted_at_the_line_limit_prints_back_acceptably(
        c: CompositeProfile, policy: tuple[Select, Consumption], slack: int) -> None:
    c = dataclasses.replace(c, select=policy[0], consumption=policy[1])
    short = _compact(format_composite(c))
    lim = CompositeLimits(max_line=len(short) + slack)
    try:
        back = parse_composite(short, SCHEMA, limits=lim)
    except ProfileSyntaxError as exc:
        assert "longer than" in str(exc)
        return
    assert back == c, short
    printed = format_composite(back)
    assert len(printed) <= lim.max_line
    assert parse_composite(printed, SCHEMA, limits=lim) == c


def test_a_line_at_the_default_limit_that_would_print_longer_is_refused() -> None:
    labels = [f"{'l' * 1000}{i:02d}" for i in range(16)]
    body = "->".join(f"{lab}=Motion()" for lab in labels) + " within 1s"
    line = "p:" + body
    line = line.replace("l", "m", 1)  # any letter: only the length matters
    line = "p:" + "m" * (16384 - len(line)) + line[2:]
    assert len(line) == 16384
    with pytest.raises(ProfileSyntaxError, match="prints as 16435 characters"):
        parse_composite(line, BUILDING)
    fits = parse_composite(line.replace("l" * 200, "l", 1), BUILDING)
    assert parse_composite(format_composite(fits), BUILDING) == fits
