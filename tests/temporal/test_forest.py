"""The subspace forest and its stores against brute force (issue 20, item 5).

After every random insert and delete: each parent covers its child, the roots of a type
are pairwise incomparable, every key is reachable once, hull columns agree with their
nodes; every query direction (overlapping, within, containing) equals the pairwise
relation over all stored boxes; preloaded answers equal the forest's; after deleting
everything nothing is left.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from siftbus.covering.relations import covers, overlaps
from siftbus.errors import ConfigError, DuplicateProfileError, UnknownProfileError
from siftbus.model import IntervalSet, Profile, parse_schema
from siftbus.temporal import NO_PRELOAD, PreloadPolicy, SubspaceForest, SubspaceStore
from siftbus.temporal import forest as forest_module
from siftbus.temporal.forest import Relations
from siftbus.temporal.hulls import COVER, OVERLAP, WITHIN
from temporal_strategies import SCHEMA, T, boxes, plain_boxes, random_box


def brute(stored: dict[int, Profile], q: Profile) -> tuple[list[int], list[int], list[int]]:
    return (sorted(k for k, b in stored.items() if overlaps(q, b)),
            sorted(k for k, b in stored.items() if covers(q, b)),
            sorted(k for k, b in stored.items() if covers(b, q)))


def answers(f: SubspaceForest, q: Profile) -> tuple[list[int], list[int], list[int]]:
    return sorted(f.overlapping(q)), sorted(f.within(q)), sorted(f.containing(q))


@pytest.fixture(params=[12, 2], ids=["columns-from-12", "columns-from-2"])
def columns_from(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    """Run with the default threshold and with hull columns almost everywhere."""
    monkeypatch.setattr(forest_module, "COLUMNS_FROM", request.param)
    return int(request.param)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_forest_invariants_and_queries_after_random_inserts_and_deletes(
        data: st.DataObject) -> None:
    for threshold in (12, 2):
        forest_module.COLUMNS_FROM = threshold
        try:
            _run_forest(data)
        finally:
            forest_module.COLUMNS_FROM = 12


def _run_forest(data: st.DataObject) -> None:
    f = SubspaceForest()
    stored: dict[int, Profile] = {}
    key = 0
    for _ in range(data.draw(st.integers(1, 30), label="steps")):
        if stored and data.draw(st.integers(0, 2)) == 0:
            k = data.draw(st.sampled_from(sorted(stored)))
            assert f.remove(k).filter_key == stored.pop(k).filter_key
        else:
            key += 1
            stored[key] = data.draw(boxes(f"p{key}"))
            f.add(key, stored[key])
        f.check()
        q = data.draw(boxes("q"))
        assert answers(f, q) == brute(stored, q)
    for k in list(stored):
        f.remove(k)
        f.check()
    assert len(f) == 0 and f.roots() == []


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_long_random_sequences(seed: int, columns_from: int) -> None:
    """Thousands of interleaved inserts and deletes (seeded, replayable: the seed is in
    the test id), checked against brute force every 50 steps."""
    rng = random.Random(seed)
    f = SubspaceForest()
    stored: dict[int, Profile] = {}
    for step in range(1500):
        if stored and rng.random() < 0.35:
            k = rng.choice(sorted(stored))
            f.remove(k)
            del stored[k]
        else:
            stored[step] = random_box(rng, f"p{step}")
            f.add(step, stored[step])
        if step % 50 == 0:
            f.check()
            for j in range(5):
                q = random_box(rng, f"q{j}")
                assert answers(f, q) == brute(stored, q), (seed, step)
    f.check()
    for k in rng.sample(sorted(stored), len(stored)):
        f.remove(k)
    f.check()
    assert len(f) == 0 and f.roots() == []


# ---- the hull fast path (plain boxes) against the exact-test path and brute force -----

# 75 examples of up to 30 steps, each checked at two thresholds: 150 found nothing more
@settings(max_examples=75, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_trusting_exact_hulls_changes_no_answer(data: st.DataObject) -> None:
    """The forest that takes the hull test's word for plain boxes answers every query like
    the one that tests every candidate exactly, and like brute force, after random
    interleaved inserts and deletes; both keep the invariants."""
    for threshold in (12, 2):
        forest_module.COLUMNS_FROM = threshold
        try:
            fast, slow = SubspaceForest(), SubspaceForest(trust_hulls=False)
            stored: dict[int, Profile] = {}
            for key in range(data.draw(st.integers(1, 30), label="steps")):
                if stored and data.draw(st.integers(0, 2)) == 0:
                    k = data.draw(st.sampled_from(sorted(stored)))
                    fast.remove(k)
                    slow.remove(k)
                    del stored[k]
                else:
                    stored[key] = data.draw(st.one_of(plain_boxes(f"p{key}"), boxes(f"p{key}")))
                    fast.add(key, stored[key])
                    slow.add(key, stored[key])
                fast.check()
                slow.check()
                q = data.draw(st.one_of(plain_boxes("q"), boxes("q")))
                assert answers(fast, q) == answers(slow, q) == brute(stored, q)
        finally:
            forest_module.COLUMNS_FROM = 12


@settings(max_examples=300, deadline=None)
@given(q=st.one_of(plain_boxes("q"), boxes("q")), b=st.one_of(plain_boxes("b"), boxes("b")))
def test_plain_query_tests_equal_the_general_relations(q: Profile, b: Profile) -> None:
    if q.etype != b.etype:
        return  # the forest and the stores only test boxes of the query's type
    for t in (Relations(q), Relations(q, general=True)):
        assert t.overlaps(b) == overlaps(q, b)
        assert t.inside(b) == covers(q, b)
        assert t.around(b) == covers(b, q)


@pytest.mark.parametrize("seed", [4, 5])
def test_the_fast_path_runs_fewer_exact_tests(seed: int, columns_from: int) -> None:
    """On plain boxes the hull fast path decides most relations itself: the same seeded
    sequence needs fewer exact tests than the exact-test path, with equal answers."""
    rng = random.Random(seed)
    fast, slow = SubspaceForest(), SubspaceForest(trust_hulls=False)
    stored: dict[int, Profile] = {}
    for step in range(800):
        if stored and rng.random() < 0.3:
            k = rng.choice(sorted(stored))
            fast.remove(k)
            slow.remove(k)
            del stored[k]
        else:
            stored[step] = random_box(rng, f"p{step}", strings=False, holes=False)
            fast.add(step, stored[step])
            slow.add(step, stored[step])
        if step % 40 == 0:
            q = random_box(rng, "q", strings=False, holes=False)
            assert answers(fast, q) == answers(slow, q) == brute(stored, q)
    fast.check()
    # Small sibling sets (below COLUMNS_FROM) have no columns and are tested as before.
    assert fast.tests < (slow.tests / 2 if columns_from == 2 else slow.tests), \
        (fast.tests, slow.tests)


def test_equal_boxes_share_a_node_and_leave_with_their_last_key() -> None:
    f = SubspaceForest()
    box = Profile.from_constraints("x", T, {"a": IntervalSet.range(1, 3)})
    f.add(1, box)
    f.add(2, box.with_id("y"))
    assert [keys for _, _, keys in f.nodes()] == [[1, 2]]
    f.remove(1)
    assert f.overlapping(box) == [2]
    f.remove(2)
    assert list(f.nodes()) == []


def test_wider_box_adopts_the_roots_it_covers() -> None:
    f = SubspaceForest()
    narrow = [Profile.from_constraints(f"n{i}", T, {"a": IntervalSet.points([i])})
              for i in range(8)]
    for i, p in enumerate(narrow):
        f.add(i, p)
    assert len(f.roots()) == 8
    f.add(99, Profile.from_constraints("w", T, {"a": IntervalSet.range(0, 5)}))
    assert len(f.roots()) == 3 and f.depth() == 2
    f.check()
    f.remove(99)  # its children go back to the roots
    assert len(f.roots()) == 8
    f.check()


def test_errors() -> None:
    f = SubspaceForest()
    box = Profile.from_constraints("x", T, {})
    f.add(1, box)
    with pytest.raises(DuplicateProfileError):
        f.add(1, box)
    with pytest.raises(UnknownProfileError):
        f.remove(2)


# ---- stores: preload tables agree with the forest -----------------------------------

POLICIES = [PreloadPolicy(), NO_PRELOAD, PreloadPolicy(max_cells=8),
            PreloadPolicy(sets={"T": [("a", "b")]}, max_cells=24)]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_stores_answer_every_relation_like_brute_force(data: st.DataObject) -> None:
    stores = [SubspaceStore(p) for p in POLICIES]
    stored: dict[str, Profile] = {}
    n = 0
    for _ in range(data.draw(st.integers(1, 30), label="steps")):
        if stored and data.draw(st.integers(0, 2)) == 0:
            pid = data.draw(st.sampled_from(sorted(stored)))
            del stored[pid]
            for s in stores:
                s.remove(pid)
        else:
            n += 1
            pid = f"p{n}"
            stored[pid] = data.draw(boxes(pid))
            for s in stores:
                s.add(pid, stored[pid])
        # point queries (preloadable) and general ones
        q = data.draw(st.one_of(boxes("q"), points()))
        want = {OVERLAP: sorted(i for i, b in stored.items() if overlaps(q, b)),
                COVER: sorted(i for i, b in stored.items() if covers(b, q)),
                WITHIN: sorted(i for i, b in stored.items() if covers(q, b))}
        for s in stores:
            for rel, expected in want.items():
                assert s.query(q, rel).ids() == expected, (s.policy, rel)
                assert s.query(q, rel, preload=False).ids() == expected


@st.composite
def points(draw: st.DrawFn) -> Profile:
    """Queries pinning attributes to single keys (the preloaded shape)."""
    cons = {}
    for name, hi in (("a", 7), ("b", 2)):
        if draw(st.booleans()):
            cons[name] = IntervalSet.points([draw(st.integers(0, hi))])
    if draw(st.integers(0, 3)) == 0:
        cons["c"] = IntervalSet.points([draw(st.integers(0, 40))])
    return Profile.from_constraints("q", T, cons)


def test_point_queries_are_answered_by_one_lookup() -> None:
    schema = parse_schema('[Doc]\nroom = "int[1,300]"\nkind = "enum[memo,menu,plan]"\n'
                          'size = "int[0,100000]"\n')
    doc = schema["Doc"]
    store = SubspaceStore()
    tables = store.tables(doc, create=True)
    # chosen by domain size: room (300 keys) and kind (3), not size (100,001)
    assert sorted(t.names for t in tables) == [("kind",), ("room",)]
    for i in range(50):
        store.add(f"d{i}", Profile.from_constraints(
            f"d{i}", doc, {"room": IntervalSet.range(1 + i, 10 + i)}))
    q = Profile.from_constraints("q", doc, {"room": IntervalSet.points([12])})
    sel = store.query(q, OVERLAP)
    assert sel.preloaded and sorted(sel) == sorted(f"d{i}" for i in range(2, 12))
    before = store.forest.tests
    assert len(store.query(q, OVERLAP)) == 10
    assert store.forest.tests == before  # no relation was tested


def test_preload_policy_errors() -> None:
    with pytest.raises(ConfigError):
        PreloadPolicy(max_cells=0)
    with pytest.raises(ConfigError, match="no attribute"):
        PreloadPolicy(sets={"T": [("zz",)]}).tables_for(T)
    with pytest.raises(ConfigError, match="string"):
        PreloadPolicy(sets={"T": [("s",)]}).tables_for(T)
    with pytest.raises(ConfigError, match="cells"):
        PreloadPolicy(sets={"T": [("a", "c")]}, max_cells=100).tables_for(T)
    assert SCHEMA["U"].name == "U"
