"""The DoubleForest against the brute-force reference (issue 20, items 2 and 5).

Random interleaved subscribe / unsubscribe / publish / update / withdraw / advance
sequences over random boxes and validities: after every operation the changes equal the
reference's (as multisets), applying them strictly to per-filter collections never fails
(no duplicate, no gap) and leaves exactly the reference's collections, and both query
directions agree -- with preloading on, off, and with small tables.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from siftbus.errors import DuplicateProfileError, InputError, UnknownProfileError
from siftbus.model import IntervalSet, Profile
from siftbus.temporal import (
    NO_PRELOAD,
    Change,
    ChangeKind,
    Collections,
    DoubleForest,
    PersistentNotification,
    PreloadPolicy,
    Reason,
    ReferenceTemporal,
    Semantics,
    TemporalFilter,
    Validity,
)
from temporal_strategies import TIMES, boxes, filters, notifications, random_box

POLICIES = [PreloadPolicy(), NO_PRELOAD, PreloadPolicy(max_cells=8)]


def key(ch: Change) -> tuple[str, str, str, int, str]:
    return (ch.kind.value, ch.filter, ch.notification.id, ch.notification.version,
            ch.reason.value)


def same(a: Iterable[Change], b: Iterable[Change]) -> bool:
    return Counter(map(key, a)) == Counter(map(key, b))


class Pair:
    """A DoubleForest per policy and the reference, driven together."""

    def __init__(self) -> None:
        self.ref = ReferenceTemporal()
        self.dfs = [DoubleForest(preload=p) for p in POLICIES]
        self.colls = [Collections() for _ in self.dfs]

    def do(self, op: str, arg: object) -> None:
        want = getattr(self.ref, op)(arg)
        for df, colls in zip(self.dfs, self.colls, strict=True):
            if op == "subscribe":
                assert isinstance(arg, TemporalFilter)
                colls.open(arg.id)
            if op == "unsubscribe":
                colls.close(str(arg))
            got = getattr(df, op)(arg)
            if op == "unsubscribe":
                continue
            assert same(got, want), (op, arg, sorted(map(key, got)), sorted(map(key, want)))
            colls.apply(got)  # strictly: no duplicate, no gap
            snap = colls.snapshot()
            ref = self.ref.collections()
            assert {f: sorted(c) for f, c in snap.items()} == \
                   {f: sorted(c) for f, c in ref.items()}

    def check_queries(self, q: Profile) -> None:
        for df in self.dfs:
            for s in Semantics:
                assert df.notifications_for(q, s).ids() == self.ref.notifications_for(q, s)
                assert df.notifications_for(q, s, preload=False).ids() == \
                    self.ref.notifications_for(q, s)
            assert df.filters_for(q) == self.ref.filters_for(q)
            assert df.filters_for(q, preload=False) == self.ref.filters_for(q)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_double_forest_equals_the_reference(data: st.DataObject) -> None:
    pair = Pair()
    n_notes = n_filters = 0
    for _ in range(data.draw(st.integers(1, 30), label="steps")):
        ref = pair.ref
        live = sorted(ref.notes)
        op = data.draw(st.sampled_from(["subscribe", "unsubscribe", "publish", "publish",
                                        "update", "withdraw", "advance"]))
        if op == "subscribe":
            n_filters += 1
            pair.do(op, data.draw(filters(f"f{n_filters}")))
        elif op == "unsubscribe" and ref.filters:
            pair.do(op, data.draw(st.sampled_from(sorted(ref.filters))))
        elif op == "publish":
            n_notes += 1
            n = data.draw(notifications(f"n{n_notes}"))
            if not n.validity.expired(ref.now):
                pair.do(op, n)
        elif op == "update" and live:
            nid = data.draw(st.sampled_from(live))
            n = data.draw(notifications(nid))
            if not n.validity.expired(ref.now):
                pair.do(op, n)
        elif op == "withdraw" and live:
            pair.do(op, data.draw(st.sampled_from(live)))
        elif op == "advance":
            later = [t for t in [*TIMES, 13.0] if t > ref.now]
            if later:
                pair.do(op, data.draw(st.sampled_from(later)))
        pair.check_queries(data.draw(boxes("q")))


@pytest.mark.parametrize("seed", [7, 8])
def test_long_random_sequence_with_time(seed: int) -> None:
    """A long seeded sequence (replay with the seed in the test id)."""
    rng = random.Random(seed)
    pair = Pair()
    now = 0.0
    for step in range(600):
        r = rng.random()
        ref = pair.ref
        if r < 0.15:
            pair.do("subscribe", TemporalFilter(random_box(rng, f"f{step}"),
                                                rng.choice(list(Semantics))))
        elif r < 0.2 and ref.filters:
            pair.do("unsubscribe", rng.choice(sorted(ref.filters)))
        elif r < 0.6:
            start = now + rng.choice([-1.0, 0.0, 0.0, 2.0, 5.0])
            v = Validity(start, start + rng.choice([1.0, 3.0, 10.0, float("inf")]))
            if not v.expired(now):
                pair.do("publish", PersistentNotification(f"n{step}", random_box(
                    rng, f"n{step}"), "pub", v))
        elif r < 0.7 and ref.notes:
            nid = rng.choice(sorted(ref.notes))
            v = Validity(now, now + rng.choice([2.0, 20.0]))
            pair.do("update", PersistentNotification(nid, random_box(rng, nid), "pub", v))
        elif r < 0.75 and ref.notes:
            pair.do("withdraw", rng.choice(sorted(ref.notes)))
        else:
            now += rng.choice([0.5, 1.0, 3.0])
            pair.do("advance", now)
        if step % 20 == 0:
            pair.check_queries(random_box(rng, "q"))


def test_late_subscriber_gets_what_is_still_valid() -> None:
    from temporal_strategies import T

    df = DoubleForest()
    room = [Profile.from_constraints(f"d{i}", T, {"a": IntervalSet.range(i, i + 1)})
            for i in range(4)]
    df.publish(PersistentNotification("d0", room[0], "p", Validity(0, 10)))
    df.publish(PersistentNotification("d1", room[1], "p", Validity(0, 2)))
    df.publish(PersistentNotification("d2", room[2], "p", Validity(5, 10)))  # not yet
    df.advance(3)  # d1 expired
    f = TemporalFilter(Profile.from_constraints("me", T, {"a": IntervalSet.range(0, 7)}))
    got = df.subscribe(f)
    assert [(c.kind, c.notification.id, c.reason) for c in got] == \
        [(ChangeKind.ADD, "d0", Reason.SUBSCRIBED)]
    got = df.advance(6)
    assert [(c.kind, c.notification.id, c.reason) for c in got] == \
        [(ChangeKind.ADD, "d2", Reason.ACTIVATED)]
    got = df.update(PersistentNotification("d0", room[3], "p", Validity(0, 10)))
    assert [(c.kind, c.notification.version) for c in got] == [(ChangeKind.UPDATE, 1)]
    got = df.advance(10)
    assert sorted((c.kind, c.notification.id, c.reason) for c in got) == \
        [(ChangeKind.REMOVE, "d0", Reason.EXPIRED), (ChangeKind.REMOVE, "d2", Reason.EXPIRED)]
    assert df.notification_count == 0


def test_semantics_select_as_defined() -> None:
    from temporal_strategies import T

    def box(lo: int, hi: int) -> Profile:
        return Profile.from_constraints("x", T, {"a": IntervalSet.range(lo, hi)})

    wide, narrow, beside = box(0, 5), box(2, 3), box(4, 7)
    assert Semantics.OVERLAPS.selects(wide, narrow) and Semantics.OVERLAPS.selects(wide, beside)
    assert Semantics.COVERED_BY.selects(wide, narrow)      # the notification lies inside
    assert not Semantics.COVERED_BY.selects(narrow, wide)
    assert Semantics.COVERS.selects(narrow, wide)          # the notification contains it
    assert not Semantics.COVERS.selects(wide, beside)
    assert not Semantics.OVERLAPS.selects(narrow, beside)


def test_errors() -> None:
    from temporal_strategies import T

    df = DoubleForest(now=5.0)
    box = Profile.from_constraints("x", T, {})
    with pytest.raises(InputError, match="expired"):
        df.publish(PersistentNotification("old", box, "p", Validity(0, 5)))
    df.publish(PersistentNotification("a", box, "p"))
    with pytest.raises(DuplicateProfileError):
        df.publish(PersistentNotification("a", box, "p"))
    with pytest.raises(UnknownProfileError):
        df.update(PersistentNotification("b", box, "p"))
    with pytest.raises(UnknownProfileError):
        df.withdraw("b")
    with pytest.raises(UnknownProfileError):
        df.unsubscribe("f")
    df.subscribe(TemporalFilter(box.with_id("f")))
    with pytest.raises(DuplicateProfileError):
        df.subscribe(TemporalFilter(box.with_id("f")))
    with pytest.raises(InputError):
        Validity(3, 3)
    with pytest.raises(InputError):
        Validity.of(0, end=5, ttl=3)
    with pytest.raises(InputError):
        Validity.of(0, ttl=-1)
    with pytest.raises(InputError):
        Semantics.parse("inside")
    assert Validity.of(10, ttl=5) == Validity(10, 15)
    assert df.advance(1.0) == [] and df.now == 5.0  # time never goes back


def test_load_makes_the_state_that_publishing_makes() -> None:
    rng = random.Random(5)
    spans = [(0.0, 2.0), (0.0, 9.0), (4.0, 9.0)]
    notes = [PersistentNotification(f"n{i}", random_box(rng, f"n{i}"), "p",
                                    Validity(*rng.choice(spans))) for i in range(60)]
    fs = [TemporalFilter(random_box(rng, f"f{i}"), rng.choice(list(Semantics)))
          for i in range(30)]
    a, b = DoubleForest(now=1.0), DoubleForest(now=1.0)
    a.load(notes, fs)
    for f in fs:
        b.subscribe(f)
    for n in notes:
        b.publish(n)
    for t in (1.0, 3.0, 5.0, 10.0):
        assert same(a.advance(t), b.advance(t))
        for f in fs:
            assert [n.id for n in a.collection(f.id)] == [n.id for n in b.collection(f.id)]
