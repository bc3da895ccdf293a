"""covers / overlaps / equivalent / merge, proved by enumerating every event of small domains."""

from __future__ import annotations

import itertools
from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from siftbus.covering.relations import (
    Relation,
    constraint_hull,
    covers,
    equivalent,
    is_perfect_merge,
    merge,
    merge_set,
    overlaps,
    relation,
    string_hull,
    string_union,
)
from siftbus.lang.profile import format_profile, parse_profile
from siftbus.model import Event, EventType, Profile, StringConstraint, parse_schema
from strategies import STRINGS, profiles

SCHEMA = parse_schema(
    '[T]\na = "int[0,3]"\nb = "enum[L0,L1,L2]"\nc = "decimal[0,0.2,1]"\ns = "string"\n'
    '[U]\nx = "int[0,3]"\n'
)
T = SCHEMA["T"]
U = SCHEMA["U"]
# Every string the strategies use, plus one fresh extension of each: a prefix set always
# holds its prefix + "#", which no finite set or exclusion from the pool contains, so
# enumerating this universe decides subset and overlap exactly.
UNIVERSE = sorted(set(STRINGS) | {s + "#" for s in STRINGS})


@cache
def _events(etype: EventType) -> tuple[Event, ...]:
    values = []
    for attr in etype.attributes:
        d = attr.domain
        if hasattr(d, "min_key"):
            values.append([d.value(k) for k in range(d.min_key, d.max_key + 1)])  # type: ignore[union-attr]
        else:
            values.append(UNIVERSE)
    return tuple(Event.of(etype, dict(zip(etype.names, combo, strict=True)))
                 for combo in itertools.product(*values))


def events_of(p: Profile) -> frozenset[int]:
    """Indices (over both types' enumerations) of the events ``p`` matches."""
    out = []
    offset = 0
    for etype in (T, U):
        evs = _events(etype)
        out.extend(offset + i for i, e in enumerate(evs) if p.matches(e))
        offset += len(evs)
    return frozenset(out)


def pairs() -> st.SearchStrategy[tuple[Profile, Profile]]:
    t_profiles = st.one_of(profiles(T, "p", max_conditions=4), profiles(U, "p"))
    return st.tuples(t_profiles, st.one_of(profiles(T, "q", max_conditions=4),
                                           profiles(U, "q"))).map(
        lambda pq: (pq[0], pq[1].with_id("q")))


def related_pairs() -> st.SearchStrategy[tuple[Profile, Profile]]:
    """Pairs that share most conditions, so merges and covering happen often."""
    @st.composite
    def build(draw: st.DrawFn) -> tuple[Profile, Profile]:
        base = draw(profiles(T, "p", max_conditions=3))
        extra = draw(profiles(T, "q", max_conditions=1))
        cons = {c.attr: c.constraint for c in base.conditions}
        for c in extra.conditions:
            cons[c.attr] = c.constraint  # replace one attribute's constraint
        return base, Profile.from_constraints("q", T, cons)
    return build()


SETTINGS = settings(max_examples=250, deadline=None)


@SETTINGS
@given(st.one_of(pairs(), related_pairs()))
def test_covers_overlaps_equivalent_match_enumeration(pq: tuple[Profile, Profile]) -> None:
    p, q = pq
    np_, nq = events_of(p), events_of(q)
    assert covers(p, q) == (nq <= np_)
    assert covers(q, p) == (np_ <= nq)
    assert overlaps(p, q) == bool(np_ & nq)
    assert equivalent(p, q) == (np_ == nq)
    expected = (Relation.EQUIVALENT if np_ == nq else Relation.COVERS if nq <= np_
                else Relation.COVERED_BY if np_ <= nq else Relation.OVERLAPS if np_ & nq
                else Relation.DISJOINT)
    assert relation(p, q) is expected


@SETTINGS
@given(st.one_of(pairs(), related_pairs(), related_pairs()))
def test_merge_is_exact_or_absent_and_imperfect_is_a_superset(
        pq: tuple[Profile, Profile]) -> None:
    p, q = pq
    union = events_of(p) | events_of(q)
    m = merge(p, q)
    loose = merge(p, q, imperfect=True)
    compact = merge(p, q, imperfect=True, compact=True)
    if p.etype != q.etype:
        assert m is None and loose is None and compact is None
        return
    assert loose is not None and compact is not None
    assert events_of(loose) >= union
    assert events_of(compact) >= union
    # The imperfect merge is the smallest box around both unless a string union had to
    # be widened; a perfect merge exists iff that box is exactly the union.
    box_exact = all(
        string_union(a, b) is not None
        for a, b in _string_pairs(p, q))
    if m is not None:
        assert events_of(m) == union
        assert is_perfect_merge(m, p, q)
        assert equivalent(loose, m)
    else:
        assert not box_exact or events_of(loose) != union
    # Merges are ordinary profiles: they print and read back equal.
    for r in (m, loose, compact):
        if r is not None:
            again = parse_profile(format_profile(r.with_id("m")), SCHEMA)
            assert again.filter_key == r.filter_key


def _string_pairs(p: Profile, q: Profile) -> list[tuple[StringConstraint, StringConstraint]]:
    out = []
    for attr in p.etype.attributes:
        a, b = p.constraint(attr.name), q.constraint(attr.name)
        if isinstance(a, StringConstraint) or isinstance(b, StringConstraint):
            a = a if a is not None else StringConstraint()
            b = b if b is not None else StringConstraint()
            assert isinstance(a, StringConstraint) and isinstance(b, StringConstraint)
            out.append((a, b))
    return out


def string_constraints() -> st.SearchStrategy[StringConstraint]:
    pool = st.sampled_from(STRINGS)
    finite = st.frozensets(pool, max_size=4).map(lambda s: StringConstraint.make(s))
    prefixed = st.builds(lambda p, e: StringConstraint.make(None, p, e), pool,
                         st.frozensets(pool, max_size=3))
    return st.one_of(finite, prefixed)


def _strings(c: StringConstraint) -> frozenset[str]:
    return frozenset(s for s in UNIVERSE if s in c)


@settings(max_examples=300, deadline=None)
@given(string_constraints(), string_constraints())
def test_string_union_and_hull(a: StringConstraint, b: StringConstraint) -> None:
    u = string_union(a, b)
    if u is not None:
        assert _strings(u) == _strings(a) | _strings(b)
    else:
        # Inexpressible: a finite set reaching outside a prefix, or unrelated prefixes.
        assert a.allowed is None or b.allowed is None
    h = string_hull(a, b)
    assert _strings(h) >= _strings(a) | _strings(b)
    assert constraint_hull(a, b) == h


def test_finite_domains_make_strict_bounds_exact() -> None:
    s = parse_schema('[Temp]\nvalue = "int[-40,60]"\nroom = "int[1,9]"\n')
    gt = parse_profile("p: Temp(value > 58)", s)
    setp = parse_profile("q: Temp(value in {59, 60})", s)
    assert relation(gt, setp) is Relation.EQUIVALENT
    ne = parse_profile("r: Temp(value != -40)", s)
    gtmin = parse_profile("t: Temp(value > MIN)", s)
    assert equivalent(ne, gtmin)


def test_tarkoma_example_2_1() -> None:
    s = parse_schema('[X]\nx = "int[0,100]"\n')
    f1 = parse_profile("f1: X(x < 10)", s)
    f2 = parse_profile("f2: X(x in [5, 9])", s)
    f3 = parse_profile("f3: X(x in [8, 15])", s)
    assert covers(f1, f2) and not covers(f1, f3)
    assert relation(f2, f3) is Relation.OVERLAPS
    assert overlaps(f1, f2) and overlaps(f1, f3)
    # [10,20] + [20,30] is perfect; [10,15] + [25,30] is perfect as a set, and the
    # compact (single interval) imperfect merge is [10,30].
    a = parse_profile("a: X(x in [10, 20])", s)
    b = parse_profile("b: X(x in [20, 30])", s)
    m = merge(a, b)
    assert m is not None and format_profile(m, with_id=False) == "X(x in [10, 30])"
    c = parse_profile("c: X(x in [10, 15])", s)
    d = parse_profile("d: X(x in [25, 30])", s)
    m2 = merge(c, d)
    assert m2 is not None and m2.constraint("x") is not None
    hull = merge(c, d, imperfect=True, compact=True)
    assert hull is not None and format_profile(hull, with_id=False) == "X(x in [10, 30])"


def test_two_attribute_difference_has_no_perfect_merge() -> None:
    s = parse_schema('[R]\nroom = "int[1,9]"\nvalue = "int[0,40]"\n')
    p = parse_profile("p@h1: R(room = 1, value > 20)", s)
    q = parse_profile("q@h1: R(room = 2, value > 30)", s)
    assert merge(p, q) is None
    m = merge(p, q, imperfect=True, id="m")
    assert m is not None and m.id == "m" and m.subscriber == "h1"
    assert format_profile(m, with_id=False) == "R(room < 3, value > 20)"
    # Per-room sensors merge into one profile when only the room differs (Bittner §5).
    r = parse_profile("r: R(room = 2, value > 20)", s)
    pr = merge(p, r)
    assert pr is not None
    assert format_profile(pr, with_id=False) == "R(room < 3, value > 20)"


@pytest.mark.parametrize(("p", "q", "want"), [
    ('T(s prefix "ab")', 'T(s = "abc")', Relation.COVERS),
    ('T(s prefix "a", s != "ab")', 'T(s prefix "ab")', Relation.OVERLAPS),
    ('T(s prefix "a")', 'T(s prefix "b")', Relation.DISJOINT),
    ('T(s in {"a", "b"})', 'T(s != "c")', Relation.COVERED_BY),
])
def test_string_relations(p: str, q: str, want: Relation) -> None:
    assert relation(parse_profile("p: " + p, SCHEMA), parse_profile("q: " + q, SCHEMA)) is want


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(related_pairs().map(lambda pq: pq[0]), related_pairs().map(
    lambda pq: pq[1]), profiles(T, "r", max_conditions=2)), min_size=1, max_size=8))
def test_merge_set_keeps_exactly_the_same_events(ps: list[Profile]) -> None:
    ps = [p.with_id(f"p{i}") for i, p in enumerate(ps)]
    out = merge_set(ps)
    assert frozenset().union(*map(events_of, out)) == frozenset().union(*map(events_of, ps))
    assert len(out) <= len(ps)
    assert not any(a is not b and covers(a, b) for a in out for b in out)
    # Pairs left over have no perfect merge.
    assert all(merge(a, b) is None for a, b in itertools.combinations(out, 2))


def test_merge_set_fuses_per_room_profiles() -> None:
    s = parse_schema('[R]\nroom = "int[1,9]"\nvalue = "int[0,40]"\n')
    ps = [parse_profile(f"p{r}: R(room = {r}, value > 20)", s) for r in range(1, 10)]
    ps.append(parse_profile("x: R(room = 2, value > 30)", s))  # covered
    out = merge_set(ps)
    assert [format_profile(p, with_id=False) for p in out] == ["R(value > 20)"]
