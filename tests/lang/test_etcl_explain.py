"""ETCL explanations and printing: explain names the comparison that decided, with its
values, and agrees with evaluate; the printer's text parses back to the same tree."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings

from etcl_strategies import constraints, events
from siftbus.channel.event import StructuredEvent
from siftbus.lang.etcl import format_node, parse, parse_constraint
from siftbus.lang.etcl.explain import MAX_EXPLANATION

EV = StructuredEvent.of("Telecom", "Alarm", "link-down", variable_header={"Priority": 3},
                        filterable_data={"severity": 1, "site": "berlin-3", "up": True,
                                         "codes": [1, 2, 3], "level": "high"})


@pytest.mark.parametrize("text, expected", [
    ("$severity > 2", "false: $severity > 2 is FALSE ($severity is 1)"),
    ("$severity >= 1 and $site == 'paris'",
     "false: $site == 'paris' is FALSE ($site is 'berlin-3')"),
    ("$severity > 2 or 'paris' ~ $site",
     "false: $severity > 2 is FALSE ($severity is 1); 'paris' ~ $site is FALSE "
     "($site is 'berlin-3')"),
    ("not $up", "false: not $up is FALSE: $up is TRUE"),
    ("not ($severity == 1)",
     "false: not ($severity == 1) is FALSE: $severity == 1 is TRUE ($severity is 1)"),
    ("exist $nothing",
     "false: exist $nothing is FALSE ($nothing is in neither the variable header nor the "
     "filterable data)"),
    ("5 in $codes", "false: 5 in $codes is FALSE ($codes is [1, 2, 3])"),
    ("$Priority + $severity > 10", "false: $Priority + $severity > 10 is FALSE "
     "($Priority is 3, $severity is 1)"),
    ("$level > 2",
     "error: $level > 2: cannot compare str with int ($level is 'high')"),
    ("$missing == 1",
     "error: $missing == 1: $missing is in neither the variable header nor the filterable "
     "data"),
    ("$severity", "error: the constraint yields int, not a boolean"),
    ("$severity == 1 and $site ~ 'berlin-3-north'", "true"),
    ("", "true"),
])
def test_explain_names_the_deciding_comparison(text: str, expected: str) -> None:
    assert parse_constraint(text).explain(EV) == expected


def test_explain_of_a_long_or_says_how_many_more() -> None:
    text = " or ".join(f"$severity == {i}" for i in range(2, 12))
    out = parse_constraint(text).explain(EV)
    assert out.startswith("false: $severity == 2 is FALSE ($severity is 1); ")
    assert out.endswith("and 7 more FALSE terms")


def test_explain_cuts_long_values_and_lines() -> None:
    big = StructuredEvent.of("d", "t", filterable_data={"s": "x" * 100_000})
    out = parse_constraint("$s == '" + "y" * 5000 + "'").explain(big)
    assert out.startswith("false: $s == 'yyyy") and len(out) <= MAX_EXPLANATION
    assert "$s is 'xxxx" in out


@settings(max_examples=400, deadline=None)
@given(constraints(), events())
def test_explain_agrees_with_evaluate(text: str, event: Any) -> None:
    c = parse_constraint(text)
    verdict = c.explain(event)
    assert verdict.split(":")[0] in ("true", "false", "error")
    assert (verdict == "true") is c.evaluate(event), (text, verdict)
    assert "\n" not in verdict and len(verdict) <= MAX_EXPLANATION


@settings(max_examples=400, deadline=None)
@given(constraints())
def test_printed_text_parses_to_the_same_tree(text: str) -> None:
    tree = parse(text)
    assert tree is not None
    printed = format_node(tree)
    assert parse(printed) == tree, printed
    assert format_node(parse(printed)) == printed  # type: ignore[arg-type]


def test_printer_keeps_parentheses_that_change_the_tree() -> None:
    for text in ["1 - (2 - 3) == 0", "(1 - 2) - 3 == -4", "(TRUE or FALSE) and FALSE",
                 "not (1 == 2)", "(1 + 2) * 3 == 9", "1 - -2 == 3", "('a' ~ 'b') == FALSE"]:
        tree = parse(text)
        assert tree is not None
        assert parse(format_node(tree)) == tree
        assert parse_constraint(format_node(tree)).evaluate(None) == \
            parse_constraint(text).evaluate(None)
