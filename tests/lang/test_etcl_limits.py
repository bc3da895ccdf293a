"""ETCL on hostile input: documented limits, each exceeded with one ConstraintError at a
position; long chains evaluated without recursion; bounded memory; linear-time globs;
the parser fuzzed (a Constraint or a ConstraintError, nothing else)."""

from __future__ import annotations

import re
import subprocess
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from siftbus.channel.event import StructuredEvent
from siftbus.errors import ConstraintError
from siftbus.lang.etcl import (
    DEFAULT_LIMITS,
    ConstraintLimits,
    name_matches,
    parse_constraint,
)

ROOT = Path(__file__).resolve().parents[2]
EV = StructuredEvent.of("Telecom", "Alarm", "e", filterable_data={"x": 1, "s": "abc"})


def warm_up() -> None:
    """Build the parser before measuring memory (building it is a one-time cost)."""
    parse_constraint("$x == 'a'", source="warm-up")


def at_stack_depth(frames: int, fn: Callable[[], Any]) -> Any:
    """Call ``fn`` with ``frames`` frames already on the stack (as in a server)."""
    if frames == 0:
        return fn()
    return at_stack_depth(frames - 1, fn)


CHAINS = {
    "and": lambda n: " and ".join(["$x == 1"] * n),
    "or": lambda n: " or ".join(["$x == 2"] * (n - 1) + ["TRUE"]),
    "plus": lambda n: " + ".join(["$x"] * n) + f" == {n}",
    "minus": lambda n: " - ".join(["$x"] * n) + f" == {2 - n}",
    "times": lambda n: " * ".join(["$x"] * n) + " == 1",
    "divide": lambda n: " / ".join(["$x"] * n) + " == 1",
}


@pytest.mark.parametrize("kind", sorted(CHAINS))
@pytest.mark.parametrize("terms", [990, 2500])
def test_long_chains_evaluate_without_recursion(kind: str, terms: int) -> None:
    """~990 and/or/+ terms used to raise RecursionError (in a server's deeper stack
    already at fewer terms); a chain is one node now, however long."""
    text = CHAINS[kind](terms)
    assert len(text) <= DEFAULT_LIMITS.max_length
    c = at_stack_depth(400, lambda: parse_constraint(text))
    assert at_stack_depth(400, lambda: c.evaluate(EV)) is True
    assert at_stack_depth(400, lambda: c.explain(EV)) == "true"


@pytest.mark.parametrize("opening, closing", [("(", ")"), ("not (", ")"), ("(1 + ", ")"),
                                              ("($x == 1 and ", ")"), ("not (not (", "))")])
@pytest.mark.parametrize("levels", [497, 993, 100_000 // 8])
def test_deep_nesting_is_one_error_at_a_position(opening: str, closing: str,
                                                 levels: int) -> None:
    text = opening * levels + "TRUE" + closing * levels
    if len(text) > DEFAULT_LIMITS.max_length:
        text = text[:DEFAULT_LIMITS.max_length]
    with pytest.raises(ConstraintError) as info:
        at_stack_depth(400, lambda: parse_constraint(text))
    assert info.value.line == 1 and info.value.column is not None
    assert "nests deeper than 100 levels" in info.value.message or \
        "ends too early" in info.value.message


def test_nesting_up_to_the_limit_is_accepted() -> None:
    limit = DEFAULT_LIMITS.max_depth
    ok = "(" * (limit - 1) + "$x == 1" + ")" * (limit - 1)  # parentheses + comparison
    assert at_stack_depth(400, lambda: parse_constraint(ok).evaluate(EV)) is True
    with pytest.raises(ConstraintError) as info:
        parse_constraint("(" * limit + "$x == 1" + ")" * limit)
    assert info.value.column == limit + 1  # the first token of the comparison
    assert "nests deeper than 100 levels" in str(info.value)


def test_limits_are_configurable() -> None:
    small = ConstraintLimits(max_length=20, max_depth=3)
    # not, (, not, (, == : five levels
    assert parse_constraint("not (not ($x == 1))", limits=ConstraintLimits(max_depth=5))
    with pytest.raises(ConstraintError, match="nests deeper than 3 levels"):
        parse_constraint("not (not ($x == 1))", limits=small)
    with pytest.raises(ConstraintError, match="longer than the limit of 20") as info:
        parse_constraint("$x == 1 and\n$y == 'abcdefghij'", limits=small)
    assert (info.value.line, info.value.column) == (2, 9)  # where character 21 stands
    assert parse_constraint("x" * 40_000, limits=ConstraintLimits(max_length=40_000))


def test_longer_than_the_limit_is_refused_before_lexing() -> None:
    text = "$x == '" + "a" * 8_000_000 + "'"  # the 8 MB string that took 4.1 GB
    warm_up()
    tracemalloc.start()
    try:
        with pytest.raises(ConstraintError, match="8,000,008 characters is longer than the "
                                                  "limit of 32,768"):
            parse_constraint(text)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000


def test_a_long_string_costs_memory_linear_in_its_length() -> None:
    """The lexer's string pattern used to keep backtracking state per character (about
    500 bytes per character): a string at the length limit now costs a few copies."""
    n = DEFAULT_LIMITS.max_length - 20
    warm_up()
    for body in ["a" * n, "\\'" * (n // 2), "a\\b" * (n // 3)]:
        text = f"$s == '{body}'"
        tracemalloc.start()
        try:
            c = parse_constraint(text, source="x")  # source: not served from the cache
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert c.evaluate(EV) is False
        assert peak < 20 * len(text), (len(text), peak)


def test_memory_of_a_constraint_at_the_limit_is_bounded() -> None:
    text = " or ".join(["$x < 1"] * (DEFAULT_LIMITS.max_length // 10))
    warm_up()
    tracemalloc.start()
    try:
        c = parse_constraint(text, source="x")
        kept, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert c.evaluate(EV) is False
    assert kept < 300 * len(text) and peak < 600 * len(text), (kept, peak)


@pytest.mark.parametrize("text, column, message", [
    ("and TRUE", 1, "unexpected keyword 'and'"),
    ("in $codes", 1, "unexpected keyword 'in'"),
    ("  or 1", 3, "unexpected keyword 'or'"),
    ("$x == 1 and and TRUE", 13, "unexpected keyword 'and'"),
    ("TRUE not", 6, "unexpected keyword 'not'"),
    ("exist and", 7, "unexpected keyword 'and'"),
    ("$x == \"HVAC\"", 7, "ETCL strings are in single quotes"),
    ("$x == 1" + "9" * 5000, 7, "has too many digits"),
    ("$.a[" + "9" * 5000 + "] == 1", 1, "has too many digits"),
    ("$x == '" + "q" * 100 + "' '" + "r" * 10_000 + "'", 110, "'rrrrrrrrrrrr"),
])
def test_errors_are_located_and_short(text: str, column: int, message: str) -> None:
    with pytest.raises(ConstraintError) as info:
        parse_constraint(text)
    assert (info.value.line, info.value.column) == (1, column)
    assert message in info.value.message
    assert len(str(info.value)) < 200


def test_the_readme_example_runs() -> None:
    """The README's example used a double-quoted string, which ETCL does not have: run it
    through a shell from the repository root, as a reader would paste it, on the shipped
    alarms (HVAC severity 4, HVAC severity 1, Security severity 5)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.findall(r"^(siftbus etcl eval .*\\\n.*)$", readme, re.MULTILINE)
    assert len(found) == 1, "the README has one etcl eval example"
    command = found[0].replace("siftbus ", f"{sys.executable} -m siftbus ", 1)
    r = subprocess.run(["bash", "-c", command], cwd=ROOT, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "true" and lines[1].startswith("false: $severity > 2 is FALSE")
    assert lines[2].startswith("false: ") and "domain_name" in lines[2]
    assert len(lines) == 3


def test_integer_overflow_is_an_evaluation_error() -> None:
    big = StructuredEvent.of("d", "t", filterable_data={"x": 2**1000})
    c = parse_constraint(" * ".join(["$x"] * 2000) + " > 0")
    assert c.evaluate(big) is False
    assert c.explain(big).endswith("integer overflow ($x is an integer of 1001 bits)")
    assert parse_constraint("$x * 2 > 0").evaluate(big) is True  # below 2**1024: exact


PATTERNS = st.text(alphabet="ab*", max_size=8)
NAMES = st.text(alphabet="abc", max_size=12)


def glob_reference(pattern: str, name: str) -> bool:
    if pattern in ("", "*", "%ALL"):
        return True
    return re.fullmatch(".*".join(re.escape(p) for p in pattern.split("*")), name,
                        re.DOTALL) is not None


@settings(max_examples=500, deadline=None)
@given(PATTERNS, NAMES)
def test_globs_match_as_the_regex_reference(pattern: str, name: str) -> None:
    assert name_matches(pattern, name) is glob_reference(pattern, name)


def test_many_stars_do_not_backtrack() -> None:
    """A regex glob took exponential time here; bounded by a subprocess time-out."""
    code = ("from siftbus.lang.etcl import name_matches\n"
            "assert not name_matches('*a' * 30 + '*b', 'a' * 20000)\n"
            "assert name_matches('*a' * 30 + '*b', 'a' * 20000 + 'b')\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=20, cwd=ROOT)


TOKENS = ["$x", "$.a[0]", "$.u.(1)", "$s._length", "1", "-2", ".5", "1e3", "'a'", "'it\\'s'",
          "TRUE", "FALSE", "and", "or", "not", "in", "exist", "default", "~", "==", "!=", "<",
          "<=", ">", ">=", "+", "-", "*", "/", "(", ")", "x", "\"q\"", "\x00", "é", "\udcff",
          "'", "$", "9" * 30, "\n"]


@settings(max_examples=600, deadline=None)
@given(st.one_of(
    st.lists(st.sampled_from(TOKENS), max_size=60).map(" ".join),
    st.text(max_size=80),
    st.tuples(st.integers(0, 300), st.sampled_from(["(", "not (", "1 + (", "-"])).map(
        lambda t: t[1] * t[0] + "1" + ")" * t[0]),
))
def test_fuzz_parser_gives_a_constraint_or_a_constraint_error(text: str) -> None:
    try:
        c = at_stack_depth(300, lambda: parse_constraint(text))
    except ConstraintError as exc:
        assert exc.line is not None and exc.column is not None
        assert len(str(exc)) < 300
        return
    for event in (EV, 7, {"a": [1]}, None):
        assert at_stack_depth(300, lambda e=event: c.evaluate(e)) in (True, False)
        assert at_stack_depth(300, lambda e=event: c.explain(e)).split(":")[0] in (
            "true", "false", "error")
