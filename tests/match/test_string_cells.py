"""String attributes' cells: the cells of a numpy unicode column (the event scanner's
form, found by binary search) are :meth:`AttributeCells.cell_of` of each value, and
every profile's pieces accept exactly the cells of the strings it accepts."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from siftbus.match.cells import _string_layout
from siftbus.match.columns import str_array
from siftbus.model import StringConstraint

PLAIN = st.text(alphabet="ab/-", max_size=4)
# with a NUL too (a numpy unicode array cannot hold one at the end of a string)
WITH_NUL = st.one_of(PLAIN, st.sampled_from(["a\0", "\0b"]))


def constraints(words: st.SearchStrategy[str]) -> st.SearchStrategy[StringConstraint]:
    sets = st.frozensets(words, min_size=1, max_size=3).map(StringConstraint.make)
    prefixes = st.builds(lambda p, ex: StringConstraint.make(None, p, ex),
                         st.one_of(st.sampled_from(["", "a", "ab", "ab/", "b"]), words),
                         st.frozensets(words, max_size=3))
    return st.one_of(sets, prefixes)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), nul=st.booleans())
def test_string_cells_and_pieces(data: st.DataObject, nul: bool) -> None:
    words = WITH_NUL if nul else PLAIN
    cons = data.draw(st.lists(constraints(words), min_size=1, max_size=8))
    # values near the conditions' strings: each of them, and each extended
    named = sorted({x for c in cons for x in (*(c.allowed or ()), c.prefix, *c.excluded)})
    near = st.builds(lambda a, b: a + b, st.sampled_from(named), st.sampled_from(["", "a", "/"]))
    values = data.draw(st.lists(st.one_of(words, near), max_size=30))
    # a profile's constraint object may be another's too (the scanners share one per text)
    owner = data.draw(st.lists(st.integers(0, len(cons) - 1), max_size=8))
    slot_con = sorted([(i, c) for i, c in enumerate(cons) if not c.empty]
                      + [(len(cons) + k, cons[o]) for k, o in enumerate(owner)
                         if not cons[o].empty])
    objects = np.empty(len(slot_con), object)
    objects[:] = [c for _, c in slot_con]
    cells, pieces = _string_layout("s", 0, np.array([i for i, _ in slot_con], np.int32),
                                   objects)
    cons = cons + [cons[o] for o in owner]
    # in (slot, first cell) order, runs disjoint: what primas' hulls and records read
    rows = list(zip(pieces.slots.tolist(), pieces.first.tolist(), pieces.last.tolist(),
                    strict=True))
    assert rows == sorted(rows)
    assert all(a[0] != b[0] or a[2] < b[1] for a, b in itertools.pairwise(rows))
    want = [cells.cell_of(v) for v in values]
    plain = [v for v in values if not v.endswith("\0")]
    assert cells.cells_of(str_array(plain)).tolist() == [cells.cell_of(v) for v in plain]
    if not nul:
        assert cells.cells_of(np.array(values, dtype=object)).tolist() == want
    for slot, con in enumerate(cons):
        if con.empty:
            continue
        runs = [(f, t) for s, f, t in zip(pieces.slots.tolist(), pieces.first.tolist(),
                                          pieces.last.tolist(), strict=True) if s == slot]
        for v, c in zip(values, want, strict=True):
            assert (v in con) == any(f <= c <= t for f, t in runs), (con, v)
