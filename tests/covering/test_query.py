"""CoveringIndex answers exactly what pairwise covering over the whole set answers."""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager

from hypothesis import given, settings
from hypothesis import strategies as st

from siftbus.covering import query
from siftbus.covering.query import CoveringIndex
from siftbus.covering.relations import covers, equivalent
from siftbus.match import kernel
from siftbus.model import Op, Predicate, Profile, parse_schema
from strategies import profiles

SCHEMA = parse_schema('[T]\na = "int[0,6]"\nb = "enum[L0,L1,L2]"\ns = "string"\n'
                      '[U]\nx = "int[0,3]"\n')


def ids(ps: list[Profile]) -> list[str]:
    return [p.id for p in ps]


def brute(stored: dict[str, Profile], p: Profile) -> dict[str, list[str]]:
    others = [q for q in stored.values() if q.id != p.id]
    cov = [q for q in others if covers(q, p)]
    below = [q for q in others if covers(p, q)]
    strict_below = [q for q in below if not equivalent(p, q)]
    strict_above = [q for q in cov if not equivalent(p, q)]

    def strictly(a: Profile, b: Profile) -> bool:
        return covers(a, b) and not covers(b, a)

    return {
        "covering": sorted(q.id for q in cov),
        "covered": sorted(q.id for q in below),
        "equivalent": sorted(q.id for q in others if equivalent(p, q)),
        "direct_below": sorted(q.id for q in strict_below
                               if not any(strictly(r, q) for r in strict_below)),
        "direct_above": sorted(q.id for q in strict_above
                               if not any(strictly(q, r) for r in strict_above)),
        "strict_covering": sorted(q.id for q in strict_above),
    }


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(profiles(SCHEMA["T"], max_conditions=3), profiles(SCHEMA["U"])),
                min_size=1, max_size=60),
       st.integers(0, 2**32))
def test_queries_equal_pairwise_covering(ps: list[Profile], seed: int) -> None:
    check_queries(ps, seed)


@contextmanager
def compiled_hull_filter() -> Iterator[None]:
    """The numba hull filter on for every query, however few the candidates (in a
    broker it runs from 64 candidates on, once the process runs compiled kernels)."""
    before = query._COMPILED_FROM
    kernel.use("numba")
    query._COMPILED_FROM = -1
    try:
        yield
    finally:
        query._COMPILED_FROM = before
        kernel.use()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(profiles(SCHEMA["T"], max_conditions=3), profiles(SCHEMA["U"])),
                min_size=1, max_size=60),
       st.integers(0, 2**32))
def test_the_compiled_hull_filter_answers_the_same(ps: list[Profile], seed: int) -> None:
    with compiled_hull_filter():
        check_queries(ps, seed)


def check_queries(ps: list[Profile], seed: int) -> None:
    """Add ``ps`` with removals interleaved; every query equals the pairwise answer."""
    rng = random.Random(seed)
    index = CoveringIndex()
    stored: dict[str, Profile] = {}
    for i, p in enumerate(ps):
        q = p.with_id(f"p{i}")
        index.add(q)
        stored[q.id] = q
        if rng.random() < 0.25:  # interleave removals
            gone = rng.choice(sorted(stored))
            assert index.remove(gone).id == gone
            del stored[gone]
    assert len(index) == len(stored)
    probes = list(stored.values())[:8] + [p.with_id("probe") for p in ps[:4]]
    for p in probes:
        want = brute(stored, p)
        assert ids(index.covering(p)) == want["covering"]
        assert ids(index.covered(p)) == want["covered"]
        assert ids(index.equivalent(p)) == want["equivalent"]
        assert ids(index.directly_covered(p)) == want["direct_below"]
        assert ids(index.directly_covering(p)) == want["direct_above"]
        assert ids(index.covering(p, strict=True)) == want["strict_covering"]
        assert index.is_covered(p) == bool(want["covering"])
    for pid in list(stored):
        index.remove(pid)
    assert len(index) == 0 and index.covering(ps[0]) == []


def test_growth_past_initial_capacity() -> None:
    etype = SCHEMA["U"]
    index = CoveringIndex(Profile.build(f"p{i}", etype, [Predicate("x", Op.LE, (i % 4,))])
                          for i in range(300))
    top = index.get("p3")
    assert len(index.covered(top)) == 299
    assert len(index.equivalent(top)) == 74
    direct = ids(index.directly_covered(top))  # x <= 2, i.e. i % 4 == 2
    assert len(direct) == 75 and direct[:3] == ["p10", "p102", "p106"]


def test_same_type_name_from_two_schemas_never_mixes() -> None:
    other = parse_schema('[U]\nx = "int[0,9]"\n')
    mine = Profile.build("a", SCHEMA["U"], [Predicate("x", Op.LE, (2,))])
    theirs = Profile.build("b", other["U"], [Predicate("x", Op.LE, (5,))])
    index = CoveringIndex([mine, theirs])
    assert index.covering(mine) == [] and index.covered(theirs) == []
    assert index.get("b") is theirs


def test_types_with_more_than_63_attributes() -> None:
    wide = parse_schema("[W]\n" + "".join(f'a{i} = "int[0,3]"\n' for i in range(70)))
    etype = wide["W"]
    rng = random.Random(5)
    ps = []
    for i in range(80):
        attrs = rng.sample([0, 1, 62, 63, 64, 69], rng.randint(0, 3))
        ps.append(Profile.build(f"w{i}", etype, [
            Predicate(f"a{a}", Op.LE, (rng.randint(0, 2),)) for a in attrs]))
    index = CoveringIndex(ps)
    stored = {p.id: p for p in ps}
    for p in ps[:30]:
        want = brute(stored, p)
        assert ids(index.covering(p)) == want["covering"]
        assert ids(index.covered(p)) == want["covered"]
