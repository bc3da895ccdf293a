"""Temporal subspaces on extended schemas (issue 31): boxes over full-width ``int``,
``timestamp``, ``ip``, ``float``, optional attributes and dotted paths behave as boxes
(an absent optional value is one more point, outside every constraint). The DoubleForest
equals the brute-force reference on them; what a box cannot say (``or``, string tests,
``not exists``, array conditions) is refused with one clear error."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from siftbus.errors import ProfileError
from siftbus.lang.profile import parse_profile
from siftbus.model import Profile, parse_schema
from siftbus.temporal import PersistentNotification, Semantics, TemporalFilter, Validity

from .test_double import Pair

SCHEMA = parse_schema("""
[W]
n = "int"
t = "timestamp"
ip = "optional ip"
f = "optional float"
tags = "optional array<string>"
[W.c]
tier = "enum[A,B,C]"
""")
I64 = 1 << 63
CONDS = [
    *(f"n {op} {v}" for op in ("<", ">=", "=") for v in (-I64, -1, 0, I64 - 1)),
    *(f't {op} "{v}"' for op in ("<", ">") for v in
      ("0001-01-01T00:00:00Z", "2024-01-01T00:00:00Z", "9999-12-31T23:59:59Z")),
    *(f'ip cidr "{b}"' for b in ("10.0.0.0/8", "::/0", "ffff::/16", "10.1.0.0/16")),
    "ip exists", "f exists", "f > 1.5", "f <= -2.25", "c.tier = B", "c.tier >= B",
]


@st.composite
def box(draw: st.DrawFn, pid: str) -> Profile:
    while True:
        conds = draw(st.lists(st.sampled_from(CONDS), max_size=3, unique=True))
        try:
            return parse_profile(f"{pid}: W({', '.join(conds)})", SCHEMA)
        except ProfileError:  # unsatisfiable: draw again
            continue


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_double_forest_equals_the_reference_on_open_kinds(data: st.DataObject) -> None:
    pair = Pair()
    for step in range(data.draw(st.integers(1, 20))):
        ref = pair.ref
        op = data.draw(st.sampled_from(["subscribe", "publish", "publish", "withdraw",
                                        "advance"]))
        if op == "subscribe":
            pair.do(op, TemporalFilter(data.draw(box(f"f{step}")),
                                       data.draw(st.sampled_from(list(Semantics)))))
        elif op == "publish":
            end = data.draw(st.sampled_from([2.0, 5.0, float("inf")]))
            if end > ref.now:
                pair.do(op, PersistentNotification(f"n{step}", data.draw(box(f"n{step}")),
                                                   "pub", Validity(ref.now, end)))
        elif op == "withdraw" and ref.notes:
            pair.do(op, data.draw(st.sampled_from(sorted(ref.notes))))
        elif op == "advance":
            pair.do(op, ref.now + data.draw(st.sampled_from([1.0, 3.0])))
        pair.check_queries(data.draw(box("q")))


@pytest.mark.parametrize("text", [
    'q: W(n = 1 or n = 2)', 'q: W(ip not exists)', 'q: W(tags = "a")',
    'q: W(c.tier = A, tags suffix "x")',
])
def test_what_a_box_cannot_say_is_refused(text: str) -> None:
    with pytest.raises(ProfileError, match="temporal subspaces take conjunctions"):
        TemporalFilter(parse_profile(text, SCHEMA))
    with pytest.raises(ProfileError, match="temporal subspaces take conjunctions"):
        PersistentNotification("n", parse_profile(text, SCHEMA))


def test_an_absent_optional_value_lies_only_in_boxes_leaving_it_free() -> None:
    """A notification constraining ``ip`` is covered by a filter constraining it wider,
    never by one leaving it free-or-absent the other way round."""
    wide = parse_profile('w: W(ip cidr "10.0.0.0/8")', SCHEMA)
    narrow = parse_profile('x: W(ip cidr "10.1.0.0/16")', SCHEMA)
    free = parse_profile("y: W(n > 0)", SCHEMA)
    assert Semantics.COVERED_BY.selects(wide, narrow)
    assert not Semantics.COVERED_BY.selects(wide, free)  # free includes absent ip
    assert Semantics.OVERLAPS.selects(wide, free)
