"""Covering on open kinds whose keys fill or pass int64 (``int`` is all of int64,
``timestamp`` nanoseconds and ``ip`` pass it): the index answers what pairwise covering
answers, with no overflow, and "covers" is never said of a pair an event tells apart."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from siftbus.covering.query import CoveringIndex
from siftbus.covering.relations import covers
from siftbus.lang.profile import parse_profile
from siftbus.model import Event, Profile, event_from_dict, parse_schema

from .test_query import check_queries, compiled_hull_filter

SCHEMA = parse_schema('[W]\nn = "int"\nm = "int"\nf = "float"\n'
                      't = "optional timestamp"\nip = "optional ip"\n')
I64 = 1 << 63
INTS = [-I64, -I64 + 1, -1, 0, 1, I64 - 2, I64 - 1]
FLOATS = [-1.7976931348623157e308, -1.5, 0.0, 2.5, 1.7976931348623157e308]
TIMES = ["0001-01-01T00:00:00Z", "1969-12-31T23:59:59.999999999Z", "2024-05-01T12:00:00Z",
         "9999-12-31T23:59:59.999999999Z"]
IPS = ["0.0.0.0", "10.1.2.3", "255.255.255.255", "::", "::1",
       "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"]
CIDRS = ["10.0.0.0/8", "0.0.0.0/0", "::/0", "::/1", "8000::/1", "10.1.0.0/16"]
OPS = ["=", "!=", "<", "<=", ">", ">="]


@st.composite
def condition(draw: st.DrawFn) -> str:
    op = draw(st.sampled_from(OPS))
    which = draw(st.integers(0, 4))
    if which < 2:
        attr = "nm"[which]
        a, b = sorted(draw(st.sampled_from(INTS)) for _ in range(2))
        return draw(st.sampled_from([f"{attr} {op} {a}", f"{attr} in [{a}, {b}]",
                                     f"{attr} not in {{{a}, {b}}}"]))
    if which == 2:
        return f"f {op} {draw(st.sampled_from(FLOATS)):f}"
    if which == 3:
        return draw(st.sampled_from([f't {op} "{draw(st.sampled_from(TIMES))}"',
                                     "t exists", "t not exists"]))
    return draw(st.sampled_from([f'ip cidr "{draw(st.sampled_from(CIDRS))}"',
                                 f'ip {op} "{draw(st.sampled_from(IPS))}"', "ip exists"]))


@st.composite
def profile(draw: st.DrawFn, pid: str = "p") -> Profile | None:
    conds = draw(st.lists(condition(), max_size=3))
    try:
        return parse_profile(f"{pid}: W({', '.join(conds)})", SCHEMA)
    except Exception:  # an unsatisfiable draw
        return None


@st.composite
def event(draw: st.DrawFn) -> Event:
    d: dict[str, object] = {"type": "W", "n": draw(st.sampled_from(INTS)),
                            "m": draw(st.sampled_from(INTS)),
                            "f": draw(st.sampled_from(FLOATS))}
    if draw(st.booleans()):
        d["t"] = draw(st.sampled_from(TIMES))
    if draw(st.booleans()):
        d["ip"] = draw(st.sampled_from(IPS))
    return event_from_dict(d, SCHEMA)


RUN = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _profiles(data: st.DataObject) -> list[Profile]:
    drawn = data.draw(st.lists(profile(), min_size=1, max_size=25))
    return [p for p in drawn if p is not None]


@RUN
@given(st.data(), st.integers(0, 2**32))
def test_index_equals_pairwise_covering_on_full_width_keys(data: st.DataObject,
                                                           seed: int) -> None:
    ps = _profiles(data)
    if ps:
        check_queries(ps, seed)


@RUN
@given(st.data(), st.integers(0, 2**32))
def test_compiled_hull_filter_on_full_width_keys(data: st.DataObject, seed: int) -> None:
    ps = _profiles(data)
    if ps:
        with compiled_hull_filter():
            check_queries(ps, seed)


@RUN
@given(st.data())
def test_covers_on_full_width_keys_is_never_false(data: st.DataObject) -> None:
    ps = _profiles(data)
    events = data.draw(st.lists(event(), min_size=1, max_size=10))
    index = CoveringIndex(p.with_id(f"p{i}") for i, p in enumerate(ps))
    for p in index.profiles():
        for q in index.covered(p):
            assert covers(p, q)
            for e in events:
                assert not q.matches(e) or p.matches(e), (p, q, e)


def test_the_extremes_of_int64_cover_as_intervals() -> None:
    wide = parse_profile(f"a: W(n >= {-I64})", SCHEMA)  # all of int64: no condition
    top = parse_profile(f"b: W(n > {I64 - 3})", SCHEMA)
    low = parse_profile(f"c: W(n < {-I64 + 2}, m = {I64 - 1})", SCHEMA)
    index = CoveringIndex([wide, top, low])
    assert [q.id for q in index.covered(wide)] == ["b", "c"]
    assert [q.id for q in index.covering(top)] == ["a"]
    assert index.covered(top) == [] and index.covered(low) == []
