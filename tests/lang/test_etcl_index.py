"""The ETCL profile compiler is exactly the evaluator: differential tests with hypothesis
over random constraints (compilable and not), random events, interleaved add/remove."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from siftbus.channel.event import StructuredEvent
from siftbus.channel.filter_index import ConstraintIndex
from siftbus.lang.etcl import conjuncts, num_key, parse_constraint
from siftbus.match import engines

ENGINE = "index"  # the reference engine is the oracle behind IndexMatcher already
FIELDS = ["x", "s"]
REFS = ["${f}", "{f}", "$.filterable_data({f})", "$.header.variable_header({f})"]
FIXED = ["$domain_name", "$type_name", "$event_name",
         "$.header.fixed_header.event_type.domain_name"]
COMMON = ["0", "1", "0.5", "'a'", "''", "TRUE"]
RARE = ["-2", "-1.5", "2.0", "1e300", "'b'", "'d1'", "'t1'", "FALSE", "9007199254740993", "-0.0"]
LITERALS = st.one_of(st.sampled_from(COMMON), st.sampled_from(RARE))
OPS = ["==", "!=", "<", "<=", ">", ">="]
VALUES = st.one_of(
    st.sampled_from([0, 1, 0.5, "a", "", True, 1.0]),
    st.sampled_from([0, 1, -2, 3, 2, 0.5, -1.5, 2.0, -0.0, 1e300, float("inf"), float("-inf"),
                     float("nan"), 2**60, 9007199254740993, "a", "b", "", "d1", True, False,
                     None, [1, 2], {"k": 1}]),
    st.integers(-4, 4),
    st.floats(allow_nan=False, width=16),
)


@st.composite
def atoms(draw: st.DrawFn) -> str:
    ref = draw(st.sampled_from(REFS)).format(f=draw(st.sampled_from(FIELDS)))
    if draw(st.integers(0, 5)) == 0:
        ref = draw(st.sampled_from(FIXED))
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return f"exist {ref}"
    if kind == 1:
        return f"not exist {ref}"
    if kind == 2:
        return ref
    lit = draw(LITERALS)
    op = draw(st.sampled_from(OPS))
    text = f"{lit} {op} {ref}" if kind == 3 else f"{ref} {op} {lit}"
    if kind == 4:
        text = f"not ({text})"
    return text


@st.composite
def constraints(draw: st.DrawFn) -> str:
    parts = draw(st.lists(atoms(), min_size=0, max_size=4))
    if draw(st.integers(0, 4)) == 0:  # something the index cannot take
        parts.append(draw(st.sampled_from(["'a' ~ $s", "$x + 1 > 2", "($x == 1 or $s == 'a')",
                                           "$s < 'b'", "3 in $x", "$curtime.time > 0"])))
    return " and ".join(parts)


PATTERNS = st.sampled_from(["*", "", "%ALL", "d1", "d*", "x*y", "t1", "t*", "*1"])
TYPES = st.lists(st.tuples(PATTERNS, PATTERNS), max_size=2)


@st.composite
def events(draw: st.DrawFn) -> StructuredEvent:
    def props() -> dict[str, object]:
        names = draw(st.lists(st.sampled_from(FIELDS), unique=True))
        return {n: draw(VALUES) for n in names}

    return StructuredEvent.of(draw(st.sampled_from(["d1", "d2", "xay", "", "a"])),
                              draw(st.sampled_from(["t1", "t2", "a", ""])),
                              draw(st.sampled_from(["", "a", "e"])),
                              variable_header=props(), filterable_data=props())


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(constraints(), TYPES), min_size=1, max_size=12),
       st.lists(events(), min_size=1, max_size=8))
def test_compiled_equals_evaluator(specs: list[tuple[str, list[tuple[str, str]]]],
                                   evs: list[StructuredEvent]) -> None:
    idx = ConstraintIndex(engine=ENGINE, min_indexed=0)
    for i, (text, types) in enumerate(specs):
        idx.add(f"c{i}", parse_constraint(text), types)
    for e in evs:
        assert idx.match(e) == idx.match_slow(e), e


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.booleans(), constraints(), TYPES), min_size=1, max_size=25),
       st.lists(events(), min_size=1, max_size=4))
def test_interleaved_add_remove(ops: list[tuple[bool, str, list[tuple[str, str]]]],
                                evs: list[StructuredEvent]) -> None:
    idx = ConstraintIndex(engine=ENGINE, min_indexed=0)
    live: list[str] = []
    for n, (add, text, types) in enumerate(ops):
        if add or not live:
            idx.add(f"k{n}", parse_constraint(text), types)
            live.append(f"k{n}")
        else:
            idx.remove(live.pop(n % len(live)))
        for e in evs:
            assert idx.match(e) == idx.match_slow(e)
    for k in live:
        idx.remove(k)
    assert len(idx) == 0
    assert idx.match(evs[0]) == set()


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(constraints(), TYPES), min_size=1, max_size=10),
       st.lists(events(), min_size=1, max_size=4))
def test_every_registered_engine_answers_as_the_evaluator(
        specs: list[tuple[str, list[tuple[str, str]]]], evs: list[StructuredEvent]) -> None:
    for name in engines.names():
        idx = ConstraintIndex(engine=name, min_indexed=0)
        assert idx.engine == name
        for i, (text, types) in enumerate(specs):
            idx.add(f"c{i}", parse_constraint(text), types)
        for e in evs:
            assert idx.match(e) == idx.match_slow(e), (name, e)


def test_the_engine_comes_from_the_registry() -> None:
    assert ConstraintIndex().engine == engines.DEFAULT_ENGINE
    with pytest.raises(ValueError) as exc:  # refused when made, naming the choices
        ConstraintIndex(engine="nonesuch")
    assert "nonesuch" in str(exc.value) and all(n in str(exc.value) for n in engines.names())


def test_few_constraints_use_the_evaluator() -> None:
    idx = ConstraintIndex(engine=ENGINE, min_indexed=3)
    idx.add("a", parse_constraint("$x == 1"))
    e = StructuredEvent.of("d", "t", filterable_data={"x": 1})
    assert idx.match(e) == {"a"} and idx._matcher is None  # not built for one constraint
    idx.add("b", parse_constraint("$x == 2"))
    idx.add("c", parse_constraint("$x >= 1"))
    assert idx.match(e) == {"a", "c"} and idx._matcher is not None


def test_conjunctive_constraints_compile() -> None:
    idx = ConstraintIndex(engine=ENGINE, min_indexed=0)
    assert idx.add("a", parse_constraint("$x > 1 and $.filterable_data(s) == 'q'"), [("d", "t")])
    assert idx.add("b", parse_constraint("not exist $.filterable_data(y) and $type_name != 'z'"))
    assert not idx.add("c", parse_constraint("$x > 1 or $y < 2"))
    assert not idx.add("d", parse_constraint("$x > 1"), [("a*b", "t")])
    assert idx.compiled_count == 2 and idx.fallback_count == 2
    e = StructuredEvent.of("d", "t", filterable_data={"x": 2, "s": "q"})
    assert idx.match(e) == {"a", "b", "c"}
    assert conjuncts(parse_constraint("$s < 'b'")) is None


def test_number_keys_preserve_order() -> None:
    xs = [-math.inf, -1e300, -2.5, -1.0, -5e-324, -0.0, 0.0, 5e-324, 1.0, 2.5, 1e300, math.inf]
    keys = [num_key(x) for x in xs]
    assert keys == sorted(keys)
    assert num_key(-0.0) == num_key(0.0)
    assert len(set(keys)) == len(xs) - 1


ALL_VALUES = [0, 1, -2, 3, 2, 0.5, -1.5, 2.0, -0.0, 1e300, float("inf"), float("-inf"),
              float("nan"), 2**60, 9007199254740993, 9007199254740992, "a", "b", "", "d1",
              True, False, None, [1, 2], {"k": 1}, 1.0000000000000002, 0.9999999999999999]


def test_every_atom_exhaustively() -> None:
    """Every reference form x operator x literal x orientation (and negation) against
    every value placed in the variable header, the filterable data, both or neither."""
    idx = ConstraintIndex(engine=ENGINE, min_indexed=0)
    texts = []
    for ref in [*(r.format(f="x") for r in REFS), *FIXED]:
        texts += [f"exist {ref}", f"not exist {ref}", ref]
        for lit in COMMON + RARE:
            for op in OPS:
                texts += [f"{ref} {op} {lit}", f"{lit} {op} {ref}", f"not ({ref} {op} {lit})"]
    for i, t in enumerate(texts):
        idx.add(f"c{i}", parse_constraint(t))
    assert idx.compiled_count > len(texts) * 2 // 3  # huge ints, string order: evaluator
    evs = []
    for v in ALL_VALUES:
        evs += [StructuredEvent.of("d1", "t1", "a", filterable_data={"x": v}),
                StructuredEvent.of("d1", "a", "", variable_header={"x": v}),
                StructuredEvent.of("", "t1", "e", variable_header={"x": v},
                                   filterable_data={"x": "a"})]
    evs.append(StructuredEvent.of("d1", "t1"))
    for e in evs:
        assert idx.match(e) == idx.match_slow(e), e
