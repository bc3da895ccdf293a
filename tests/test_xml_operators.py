"""Operators: the matcher's fast predicates and the slot index against the reference test."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from siftbus.xmlfilter.operators import (
    SlotIndex,
    fast_test,
    lookup,
    normalise_values,
    reference_test,
)
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


class _Item:
    """A constraint stand-in compared by identity, as the matcher's constraint objects."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __repr__(self) -> str:
        return f"_Item({self.n})"


@settings(max_examples=200, deadline=None)
@given(ops=st.lists(operations(), min_size=1, max_size=12),
       removals=st.lists(st.integers(0, 11), max_size=6),
       values=st.lists(VALUES, min_size=1, max_size=8),
       as_objects=st.booleans())
def test_slot_index_lists_each_satisfied_constraint_once(
    ops: list[tuple[str, tuple[str, ...]]], removals: list[int], values: list[str],
    as_objects: bool,
) -> None:
    slot: SlotIndex[Any] = SlotIndex()
    live: dict[int, tuple[Any, str, tuple[str, ...]]] = {}
    for i, (op, vals) in enumerate(ops):
        item = _Item(i) if as_objects else i
        slot.add(lookup(op), vals, item)
        live[i] = (item, op, vals)
    for r in removals:  # remove some again: the index must forget exactly those
        if r in live:
            item, op, vals = live.pop(r)
            slot.remove(lookup(op), vals, item)
    assert len(slot) == len(live)
    for v in values:
        got = Counter(id(x) if as_objects else x for x in slot.satisfied(v))
        want = Counter(id(item) if as_objects else item for item, op, vals in live.values()
                       if reference_test(lookup(op), vals)(v))
        assert got == want, v
