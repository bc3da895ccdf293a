"""ETCL conformance: every operator, coercion, error-means-no-match, paths, the Bendt
report's expressions I-VII, and fuzzing of the parser."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from siftbus.channel.event import StructuredEvent
from siftbus.errors import ConstraintError
from siftbus.lang.etcl import Struct, Union, parse_constraint

EV = StructuredEvent.of(
    "Telecom", "Alarm", "link-down",
    variable_header={"Priority": 3, "Timeout": 0},
    filterable_data={"severity": 4, "ratio": 0.5, "name": "hello", "up": False,
                     "codes": [1, 2, 3], "tags": ["a", "b"], "Priority": 99,
                     "nested": {"value": 5, "list": [10, 20]}},
    remainder_of_body={"phone_numbers": ["12345678", "999"]},
)


def ev(text: str, event: object = EV) -> bool:
    return parse_constraint(text).evaluate(event)


@pytest.mark.parametrize("text, expected", [
    # literals and comparisons
    ("1 == 1", True), ("1 == 1.0", True), ("1 != 2", True), ("2 < 3", True), ("3 <= 3", True),
    ("4 > 3.5", True), ("3 >= 4", False), (".1 == 0.1", True), ("1e2 == 100", True),
    ("-3 < +2", True), ("'abc' < 'abd'", True), ("'b' > 'abc'", True), ("'a' == 'a'", True),
    ("TRUE == TRUE", True), ("FALSE < TRUE", True), ("TRUE != FALSE", True),
    # arithmetic, precedence, integer division
    ("1 + 2 * 3 == 7", True), ("(1 + 2) * 3 == 9", True), ("7 / 2 == 3", True),
    ("-7 / 2 == -3", True), ("7.0 / 2 == 3.5", True), ("10 - 2 - 3 == 5", True),
    ("8 / 2 / 2 == 2", True), ("2 * 3 + 1 > 6", True),
    # logic and precedence of not/and/or
    ("TRUE and FALSE", False), ("TRUE or FALSE", True), ("not FALSE", True),
    ("not TRUE or TRUE", True), ("TRUE or FALSE and FALSE", True),
    ("not (TRUE and FALSE)", True),
    # ~ : left contained in right
    ("'ell' ~ 'hello'", True), ("'hello' ~ 'ell'", False), ("'' ~ 'x'", True),
    # in
    ("2 in $codes", True), ("5 in $codes", False), ("'a' in $tags", True),
    ("2.0 in $codes", True), ("2 in codes", True),
    # run-time variables and shorthands
    ("$domain_name == 'Telecom'", True), ("$type_name == 'Alarm'", True),
    ("$event_name == 'link-down'", True), ("$severity == 4", True),
    ("$Priority == 3", True),  # the variable header wins over filterable data
    ("$.filterable_data(Priority) == 99", True), ("Priority == 99", True),
    ("$.header.variable_header(Priority) == 3", True),
    ("$.header.fixed_header.event_type.domain_name == 'Telecom'", True),
    ("$.header.fixed_header.event_name == 'link-down'", True),
    ("$curtime.time > 0", True), ("$curtime._type_id == 'UtcT'", True),
    # component paths
    ("$.0.0.0.1 == 'Alarm'", True), ("$.filterable_data[0].name == 'severity'", True),
    ("$.filterable_data._length == 8", True), ("$nested.value == 5", True),
    ("$nested.list[1] == 20", True), ("$nested.list._length == 2", True),
    ("$.remainder_of_body.phone_numbers[0] == '12345678'", True),
    ("$._type_id == 'StructuredEvent'", True),
    ("$.header._repos_id == 'IDL:omg.org/CosNotification/EventHeader:1.0'", True),
    ("$.filterable_data(name) == 'hello'", True),
    # exist
    ("exist $severity", True), ("exist $nothing", False), ("not exist $nothing", True),
    ("exist $.remainder_of_body.phone_numbers[5]", False), ("exist severity", True),
    # booleans as constraints
    ("$up", False), ("not $up", True), ("$up == FALSE", True),
    # the empty constraint
    ("", True), ("   ", True),
])
def test_operators(text: str, expected: bool) -> None:
    assert ev(text) is expected


@pytest.mark.parametrize("text", [
    "1 == 'a'", "'a' < 1", "TRUE == 1", "TRUE + 1 == 2", "'a' + 'b' == 'ab'", "1 / 0 == 1",
    "1.0 / 0 == 1", "$missing == 1", "$missing != 1", "not $missing", "1", "'x'",
    "1 ~ 'a'", "'x' in $codes", "1 in $severity", "$nested == 1", "$codes == 1",
    "$.filterable_data[99].name == 'x'", "$.header.nope == 1", "$severity._length == 1",
    "default $nested", "$.9 == 1", "$up < 1", "$name and TRUE", "not 5",
    "$.remainder_of_body.phone_nubers[0] == '12345678'",
])
def test_errors_do_not_match(text: str) -> None:
    assert ev(text) is False
    # an error propagates through not: it is not an ordinary FALSE
    assert ev(f"not ({text})") is False or text in ("$missing != 1",)


def test_error_means_no_match_even_negated() -> None:
    assert ev("not ($missing == 1)") is False
    assert ev("not (1 == 'a')") is False
    assert ev("TRUE or 1 / 0 == 1") is True  # short-circuit: the error is never evaluated
    assert ev("1 / 0 == 1 or TRUE") is False
    assert ev("FALSE and 1 / 0 == 1") is False


def test_component_dollar_one_versus_float() -> None:
    any_event = {"a": 0.1, "b": 2}
    assert ev("$.0 == .1", any_event)  # $.0 is member 0, .1 is the number
    assert ev("$.1 == 2", any_event)
    assert ev("$.a == 0.1 and $.b == 2", any_event)


def test_any_events() -> None:
    assert ev("$ == 10", 10)
    assert not ev("$ == 10", 11)
    assert not ev("$domain_name == ''", 10)  # run-time variables need a structured event
    assert ev("$[1] == 'y'", ["x", "y"])
    assert ev("$._length == 2", ["x", "y"])


def test_unions_and_structs() -> None:
    u = Union(1, "one", member="first", type_id="U", repos_id="IDL:U:1.0")
    d = Union(9, 42, member="other", is_default=True)
    e = StructuredEvent.of("d", "t", filterable_data={"u": u, "d": d, "s": Struct(
        "Point", "IDL:Point:1.0", ("x", "y"), (1, 2))})
    assert ev("$u._d == 1", e)
    assert ev("$u.(1) == 'one'", e)
    assert not ev("$u.(2) == 'one'", e)
    assert ev("$u.first == 'one'", e)
    assert not ev("$u.second == 'one'", e)
    assert ev("$u._type_id == 'U' and $u._repos_id == 'IDL:U:1.0'", e)
    assert ev("default $d and not default $u", e)
    assert ev("$d.() == 42", e)
    assert not ev("$u.() == 'one'", e)
    assert ev("$s.x == 1 and $s.1 == 2 and $s._type_id == 'Point'", e)


def test_bendt_expressions() -> None:
    """The thesis's benchmark filters I-VII (section 6.2.4), V/VI with the typo fixed and
    with it kept (the typo variant must be FALSE)."""
    any_ev = {"phone_numbers": ["12345678"]}
    se = StructuredEvent.of("d", "TESTING", "TESTING")
    assert ev("$ == 10", 10)
    assert ev("$event_name == 'TESTING'", se)
    assert ev("$type_name == 'TESTING'", se)
    assert ev("$.phone_numbers[0] == '12345678'", any_ev)
    assert ev("exist $.phone_numbers[0] and $.phone_numbers[0] == '12345678'", any_ev)
    assert ev("exist $.phone_numbers[0] and exist $.phone_numbers[0] and "
              "$.phone_numbers[0] == '12345678'", any_ev)
    assert ev("exist $.phone_numbers[0] and exist $.phone_numbers[0] and "
              "exist $.phone_numbers[0] and $.phone_numbers[0] == '12345678'", any_ev)
    assert not ev("exist $.phone_nubers[0] and $.phone_numbers[0] == '12345678'", any_ev)
    assert not ev("exist $.phone_numbers[0] and exist $.phone_nubers[0] and "
                  "$.phone_numbers[0] == '12345678'", any_ev)
    # the thesis's other examples
    assert ev("$.age > 20", {"age": 21})
    assert ev("exist $.nested.value and $.nested.value > 2", {"nested": {"value": 3}})


def test_extraction_is_cached_per_evaluation(monkeypatch: pytest.MonkeyPatch) -> None:
    import siftbus.lang.etcl.evaluate as evaluate
    from siftbus.lang.etcl import Path

    calls = []
    real = evaluate.resolve

    def counting(path: Path, event: object) -> object:
        calls.append(path.text)
        return real(path, event)

    monkeypatch.setattr(evaluate, "resolve", counting)
    c = parse_constraint("exist $.nested.value and $.nested.value > 2 and $.nested.value < 9")
    assert c.evaluate({"nested": {"value": 3}})
    assert calls == ["$.nested.value"]


@pytest.mark.parametrize("text, column", [
    ("$x ==", 4), ("a b", 3), ("$x == 'abc", 7), ("1 < 2 < 3", 7), ("(1", 2), ("1 +", 3),
    ("$x == \"a\"", 7), ("exist 3", 7), ("default $x.", 11), ("and", 1),
])
def test_syntax_errors_have_positions(text: str, column: int) -> None:
    with pytest.raises(ConstraintError) as info:
        parse_constraint(text)
    assert info.value.line == 1
    assert info.value.column == column


def test_multiline_error_line() -> None:
    with pytest.raises(ConstraintError) as info:
        parse_constraint("$a == 1 and\n  $b === 2")
    assert info.value.line == 2


def test_huge_number_literal() -> None:
    with pytest.raises(ConstraintError):
        parse_constraint("$x < 1e999")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("$.()[]'~<>=!+-*/ 0123456789abxyz_TRUEFALSnotdi")),
               max_size=40))
def test_fuzz_parser_only_constraint_errors(text: str) -> None:
    try:
        c = parse_constraint(text)
    except ConstraintError:
        return
    assert c.evaluate(EV) in (True, False)
    assert c.evaluate(7) in (True, False)
