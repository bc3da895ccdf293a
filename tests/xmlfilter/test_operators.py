"""Operators: the matcher's fast predicates and the slot index against the reference test."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from siftbus.xmlfilter.operators import (
    fast_test,
    lookup,
    normalise_values,
    reference_test,
)
from siftbus.xmlfilter.slots import IntervalIndex, SlotIndex
from xml_strategies import EPC_PATTERNS, EPCS, GLOBS, NUMBERS, STRINGS

VALUES = st.one_of(st.sampled_from(STRINGS + EPCS + NUMBERS + ["", " ", "urn:com:"]),
                   st.text(max_size=12))


@st.composite
def operations(draw: Any) -> tuple[str, tuple[str, ...]]:
    """An operator id and its normalised operands."""
    kind = draw(st.sampled_from(["exists", "equals", "in-set", "match", "epc", "num"]))
    if kind == "exists":
        op, vals = "attribute-exists", []
    elif kind == "equals":
        op, vals = "string-equals", [draw(VALUES)]
    elif kind == "in-set":
        op, vals = "string-in-set", draw(st.lists(VALUES, min_size=1, max_size=4))
    elif kind == "match":
        op, vals = "string-match", [draw(st.one_of(st.sampled_from(GLOBS), VALUES))]
    elif kind == "epc":
        op, vals = "match-epc", [draw(st.sampled_from(EPC_PATTERNS))]
    else:
        op = draw(st.sampled_from(["numeric-eq", "numeric-ne", "numeric-lt", "numeric-le",
                                   "numeric-gt", "numeric-ge"]))
        vals = [draw(st.sampled_from(["1", "2.5", "-3", "0", "100", "1e2"]))]
    return op, normalise_values(lookup(op), vals)


@settings(max_examples=300, deadline=None)
@given(op=operations(), values=st.lists(VALUES, min_size=1, max_size=8))
def test_fast_test_agrees_with_reference(op: tuple[str, tuple[str, ...]],
                                         values: list[str]) -> None:
    spec = lookup(op[0])
    ref = reference_test(spec, op[1])
    fast = fast_test(spec, op[1])
    for v in values:
        assert (True if fast is None else bool(fast(v))) == ref(v), (op, v)


@settings(max_examples=200, deadline=None)
@given(ops=st.lists(operations(), min_size=1, max_size=12),
       removals=st.lists(st.integers(0, 11), max_size=6),
       values=st.lists(VALUES, min_size=1, max_size=8))
def test_slot_index_lists_each_satisfied_constraint_once(
    ops: list[tuple[str, tuple[str, ...]]], removals: list[int], values: list[str],
) -> None:
    slot = SlotIndex()
    live: dict[int, tuple[int, str, tuple[str, ...]]] = {}
    for i, (op, vals) in enumerate(ops):
        slot.add(lookup(op), vals, i)
        live[i] = (i, op, vals)
    for r in removals:  # remove some again: the index must forget exactly those
        if r in live:
            item, op, vals = live.pop(r)
            slot.remove(lookup(op), vals, item)
    assert len(slot) == len(live)
    for v in values:
        got = Counter(slot.satisfied(v))
        want = Counter(item for item, op, vals in live.values()
                       if reference_test(lookup(op), vals)(v))
        assert got == want, v


@settings(max_examples=200, deadline=None)
@given(intervals=st.lists(st.tuples(st.integers(0, 60), st.integers(0, 20)), max_size=40),
       removals=st.lists(st.integers(0, 39), max_size=10),
       points=st.lists(st.integers(-2, 85), min_size=1, max_size=10))
def test_interval_index_stabs_exactly_the_containing_intervals(
    intervals: list[tuple[int, int]], removals: list[int], points: list[int]
) -> None:
    idx = IntervalIndex()
    live = {}
    for i, (lo, width) in enumerate(intervals):
        idx.add(lo, lo + width, i)
        live[i] = (lo, lo + width)
    for x in points[:2]:  # query between changes: the tree is rebuilt after each
        assert sorted(idx.stab(x)) == sorted(i for i, (a, b) in live.items() if a <= x <= b)
    for r in removals:
        if r in live:
            idx.remove(r)
            del live[r]
    assert len(idx) == len(live)
    for x in points:
        assert sorted(idx.stab(x)) == sorted(i for i, (a, b) in live.items() if a <= x <= b)


SERIAL_PATTERNS = st.builds(
    lambda c, i, lo, w, tail: f"urn:epc:idpat:sgtin:{c}.{i}.[{lo}-{lo + w}]{tail}",
    st.sampled_from(["0614141", "0614142"]), st.sampled_from(["107346", "107347"]),
    st.integers(0, 3000), st.integers(0, 1500), st.just(""))
EPC_VALUES = st.builds(lambda c, i, s: f"urn:epc:id:sgtin:{c}.{i}.{s}",
                       st.sampled_from(["0614141", "0614142", "x"]),
                       st.sampled_from(["107346", "107347"]),
                       st.one_of(st.integers(0, 5000).map(str),
                                 st.sampled_from(["0042", "²", "1" * 40, "", "-3"])))


@settings(max_examples=150, deadline=None)
@given(patterns=st.lists(st.one_of(SERIAL_PATTERNS, st.sampled_from([
    *EPC_PATTERNS, "urn:epc:idpat:sgtin:0614141.[107000-107346].*",
    "urn:epc:idpat:sgtin:0614141.107346.*"])), min_size=1, max_size=60),
    values=st.lists(EPC_VALUES, min_size=1, max_size=8))
def test_serial_range_patterns_through_the_interval_index(patterns: list[str],
                                                          values: list[str]) -> None:
    """Thousands of serial ranges under one literal prefix are looked up by interval, and
    the result equals the reference reading of every pattern."""
    slot = SlotIndex()
    spec = lookup("match-epc")
    for i, p in enumerate(patterns):
        slot.add(spec, (p,), i)
    for v in values:
        want = sorted(i for i, p in enumerate(patterns) if reference_test(spec, (p,))(v))
        assert sorted(slot.satisfied(v)) == want, v


# -- the EPC fast path: the header remembered, buckets found by slicing the value's text --

EPC_TEXT = st.one_of(
    st.builds(lambda pre, scheme, fields, ws: ws + pre + scheme + ":" + ".".join(fields) + ws,
              st.sampled_from(["urn:epc:", "URN:EPC:", "urn:epc:id:", "urn:epc:idpat:",
                               "urn:epc:tag:", "urn:epc:pat:", "urn:epx:id:", "urn:epc:id:id:",
                               "urn::", "", "urn:epc:id:x:"]),
              st.sampled_from(["sgtin", "sscc", "", "a.b", "id"]),
              st.lists(st.sampled_from(["0614141", "107346", "2017", "", "*", "1", "0042"]),
                       min_size=1, max_size=4),
              st.sampled_from(["", " ", "\n"])),
    st.text(alphabet=":.a1 ", max_size=14))


@settings(max_examples=400, deadline=None)
@given(values=st.lists(EPC_TEXT, min_size=1, max_size=6))
def test_epc_parts_agrees_with_epc_split(values: list[str]) -> None:
    """The remembered-header reading gives the scheme and fields of the full parse, for
    valid and invalid URNs alike (read twice: the second time from the memo)."""
    from siftbus.xmlfilter.operators import epc_split
    from siftbus.xmlfilter.slots import epc_parts

    for v in values + values:
        split = epc_split(v)
        parts = epc_parts(v)
        if split is None:
            assert parts is None, v
        else:
            assert parts is not None, v
            assert (parts[0], parts[1].split(".")) == split, v


EPC_ANY_PATTERNS = st.builds(
    lambda scheme, fields: f"urn:epc:idpat:{scheme}:" + ".".join(fields),
    st.sampled_from(["sgtin", "sscc"]),
    st.lists(st.sampled_from(["0614141", "107346", "2017", "1", "*", "[0-2017]", "[1-1]"]),
             min_size=1, max_size=4))


@settings(max_examples=200, deadline=None)
@given(ops=st.lists(st.tuples(st.booleans(), EPC_ANY_PATTERNS), min_size=1, max_size=30),
       values=st.lists(EPC_TEXT, min_size=1, max_size=8))
def test_epc_buckets_of_every_literal_prefix_length_agree_with_reference(
        ops: list[tuple[bool, str]], values: list[str]) -> None:
    """Patterns whose literal prefix is none, some or all of their fields, added and
    removed in turn: a slot lists exactly the patterns the reference reading accepts."""
    slot = SlotIndex()
    spec = lookup("match-epc")
    live: dict[int, str] = {}
    for i, (remove, p) in enumerate(ops):
        if remove and live:
            cid = min(live)
            slot.remove(spec, (live.pop(cid),), cid)
        else:
            slot.add(spec, (p,), i)
            live[i] = p
        for v in values:
            want = sorted(c for c, q in live.items() if reference_test(spec, (q,))(v))
            assert sorted(slot.satisfied(v)) == want, (v, live)


def test_wildcard_company_prefix_patterns_are_looked_up_not_scanned(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``urn:epc:idpat:sgtin:*.ITEM.*`` (any company): by the item field, so a value
    verifies only the patterns of its own item, whatever their number."""
    from siftbus.xmlfilter.operators import EpcPattern

    slot = SlotIndex()
    spec = lookup("match-epc")
    patterns = [f"urn:epc:idpat:sgtin:*.{9 * 10**5 + i:06d}.*" for i in range(153)]
    patterns += ["urn:epc:idpat:sgtin:*.900007.[1-5]", "urn:epc:idpat:sgtin:*.*.[1-5]"]
    for i, p in enumerate(patterns):
        slot.add(spec, (p,), i)
    calls = 0
    verify = EpcPattern.matches_fields

    def counted(self: EpcPattern, got: list[str]) -> bool:
        nonlocal calls
        calls += 1
        return verify(self, got)

    values = ("urn:epc:id:sgtin:0614141.900007.3", "urn:epc:id:sgtin:1.900100.9",
              "urn:epc:id:sgtin:1.123456.2")
    want = [sorted(i for i, p in enumerate(patterns) if reference_test(spec, (p,))(v))
            for v in values]
    monkeypatch.setattr(EpcPattern, "matches_fields", counted)
    assert [sorted(slot.satisfied(v)) for v in values] == want
    assert want[0] == [7, 153, 154] and want[2] == [154]
    assert calls <= 3 * 3  # not 3 x 155


def test_a_separator_float_refuses_is_no_number() -> None:
    """'\\x1f' is whitespace to the number pattern but not to float(): the slot index
    raised ValueError on such a value instead of treating it as no number."""
    from siftbus.xmlfilter.operators import parse_number

    assert parse_number("0\x1f") is None
    assert parse_number(" 2.5\n") == 2.5
