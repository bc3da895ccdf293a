"""Wide profiles (match/wide.py: rejection bitsets and sorted endpoints) against the
reference: every workload shape, interleaved add and remove, both kernel implementations."""

from __future__ import annotations

import random
from decimal import Decimal

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from siftbus.errors import UnsatisfiableProfileError
from siftbus.match import ReferenceMatcher, wide
from siftbus.match import index as index_module
from siftbus.match.conformance import STRINGS, check_matcher
from siftbus.match.index import IndexMatcher, events_to_columns
from siftbus.model import (
    DecimalDomain,
    EnumDomain,
    Event,
    EventType,
    IntDomain,
    Op,
    Predicate,
    Profile,
    StringDomain,
)
from siftbus.model.schema import Attribute

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def _domain(rnd: random.Random, large: bool) -> object:
    kind = rnd.randrange(5)
    if kind <= 1:
        size = rnd.choice([10**6, 10**9]) if large else rnd.choice([2, 20, 1000])
        lo = rnd.randint(-size, size)
        return IntDomain(lo, lo + size)
    if kind == 2:
        return DecimalDomain(Decimal(-50), Decimal(rnd.choice([50, 5000])), rnd.randint(0, 2))
    if kind == 3:
        return EnumDomain(tuple(f"L{i}" for i in range(rnd.randint(1, 6))))
    return StringDomain()


def _predicate(rnd: random.Random, attr: Attribute, width: float) -> Predicate:
    d = attr.domain
    if isinstance(d, StringDomain):
        op = rnd.choice([Op.EQ, Op.NE, Op.IN, Op.PREFIX, Op.EXISTS])
        if op is Op.EXISTS:
            return Predicate(attr.name, op)
        if op is Op.IN:
            return Predicate(attr.name, op, tuple(rnd.sample(STRINGS, rnd.randint(1, 3))))
        return Predicate(attr.name, op, (rnd.choice(STRINGS),))
    size = d.max_key - d.min_key
    op = rnd.choice([Op.RANGE, Op.RANGE, Op.RANGE, Op.NE, Op.IN, Op.LT, Op.GE, Op.EQ])
    span = int(size * width)
    x = rnd.randint(d.min_key, d.max_key - span)
    if op is Op.RANGE:
        return Predicate(attr.name, op, (d.value(x), d.value(x + span)))
    if op is Op.IN:  # a set: several runs of cells
        return Predicate(attr.name, op, tuple(d.value(rnd.randint(d.min_key, d.max_key))
                                              for _ in range(rnd.randint(1, 4))))
    return Predicate(attr.name, op, (d.value(x),))


def _workload(seed: int, n_attrs: int, max_conds: int, width: float, large: bool,
              n_profiles: int, n_events: int) -> tuple[EventType, list[Profile], list[Event]]:
    rnd = random.Random(seed)
    etype = EventType("W", tuple(Attribute(f"a{i}", _domain(rnd, large), i)
                                 for i in range(n_attrs)))
    profiles: list[Profile] = []
    for i in range(n_profiles):
        attrs = rnd.sample(etype.attributes, rnd.randint(1, min(max_conds, n_attrs)))
        w = width if rnd.random() < 0.8 else rnd.random()
        try:
            profiles.append(Profile.build(f"p{i:03d}", etype,
                                          [_predicate(rnd, a, w) for a in attrs]))
        except UnsatisfiableProfileError:
            continue
    events = []
    for _ in range(n_events):
        values: dict[str, object] = {}
        for a in etype.attributes:
            d = a.domain
            if isinstance(d, StringDomain):
                values[a.name] = rnd.choice((*STRINGS, "abcd", "zz"))
            else:
                values[a.name] = d.value(rnd.randint(d.min_key, d.max_key))
        events.append(Event.of(etype, values))
    return etype, profiles, events


def _compare(m: IndexMatcher, ref: ReferenceMatcher, events: list[Event], etype: EventType
             ) -> None:
    want = [ref.match(e) for e in events]
    assert [m.match(e) for e in events] == want
    assert m.match_batch(events) == want
    snap = m.snapshot()
    csr = snap.match_columns("W", events_to_columns(etype, events))
    assert csr.rows(snap.profile_ids) == want


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), n_attrs=st.integers(1, 20),
       max_conds=st.integers(1, 20), width=st.sampled_from([0.0, 0.01, 0.1, 0.5, 0.9]),
       large=st.booleans(), n_profiles=st.integers(1, 60), grouped=st.booleans(),
       lead_bytes=st.sampled_from([-1, 0, wide.LEAD_BYTES, 10**9]),
       reject_bytes=st.sampled_from([1, 8, wide.REJECT_BYTES, 4096]))
@pytest.mark.usefixtures("kernels")
def test_every_shape_with_interleaved_add_and_remove(
        seed: int, n_attrs: int, max_conds: int, width: float, large: bool, n_profiles: int,
        grouped: bool, lead_bytes: int, reject_bytes: int,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Wide and narrow intervals on small and large domains, decimals, enums, strings,
    sets and negations, 1-20 conditions over 1-20 attributes; profiles all wide
    (``LEAD_BYTES`` -1), some (0), all in lead sets (10**9) or as the rule chooses, with
    few or
    many buckets: the same matches as the reference per event, in batches and through
    snapshots, while profiles are added and removed one by one and in bulk."""
    monkeypatch.setattr(wide, "LEAD_BYTES", lead_bytes)
    if lead_bytes < 0:  # every profile with a condition wide
        monkeypatch.setattr(wide, "MIXED_LEAD_BYTES", -1)
    if lead_bytes == 0:  # levels of wide and lead-set profiles side by side
        monkeypatch.setattr(wide, "CELL_BYTES", 0)
        monkeypatch.setattr(wide, "WIDE_BYTES", 10**9)
    monkeypatch.setattr(wide, "REJECT_BYTES", reject_bytes)
    monkeypatch.setattr(index_module, "GROUPED_MIN", 1 if grouped else 10**9)
    monkeypatch.setattr(index_module, "GROUPED_MIN_PROFILES", 0)
    etype, profiles, events = _workload(seed, n_attrs, max_conds, width, large, n_profiles,
                                        12)
    rnd = random.Random(seed)
    m = IndexMatcher(pending_limit=rnd.choice([0, 4]))
    ref = ReferenceMatcher()
    half = len(profiles) // 2
    from siftbus.match.columns import ProfileColumns

    m.add_columns(ProfileColumns.from_profiles(etype, profiles[:half]))
    for p in profiles[:half]:
        ref.add(p)
    _compare(m, ref, events, etype)
    live = list(profiles[:half])
    for p in profiles[half:]:
        m.add(p)
        ref.add(p)
        live.append(p)
        if rnd.random() < 0.3:
            gone = live.pop(rnd.randrange(len(live)))
            assert m.remove(gone.id) == gone
            ref.remove(gone.id)
        if rnd.random() < 0.3:
            e = rnd.choice(events)
            assert m.match(e) == ref.match(e)
    _compare(m, ref, events, etype)
    for p in rnd.sample(live, len(live) // 2):
        assert m.remove(p.id) == p
        ref.remove(p.id)
    _compare(m, ref, events, etype)


@settings(max_examples=10, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1))
@pytest.mark.usefixtures("kernels")
def test_conformance_suite_with_every_profile_wide(seed: int,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole conformance suite (two types, every operator, churn, re-adds) with every
    profile that has a condition kept wide."""
    monkeypatch.setattr(wide, "LEAD_BYTES", -1)
    monkeypatch.setattr(wide, "MIXED_LEAD_BYTES", -1)
    check_matcher(IndexMatcher, seed=seed, rounds=1, profiles=50, events=12)


def test_rein_shape_is_wide_and_linear_in_memory() -> None:
    """Intervals of half a large domain (REIN's shape) are kept wide, and the index costs
    at most 100 bytes per condition (the lead sets took thousands)."""
    rnd = np.random.default_rng(5)
    etype = EventType("W", tuple(Attribute(f"a{i}", IntDomain(0, 999_999), i)
                                 for i in range(20)))
    profiles = []
    for i in range(3000):
        attrs = rnd.choice(20, 10, replace=False)
        x = rnd.integers(0, 500_000, 10)
        profiles.append(Profile.build(f"s{i:05d}", etype, [
            Predicate(f"a{a}", Op.RANGE, (int(v), int(v) + 500_000))
            for a, v in zip(attrs, x, strict=True)]))
    m = IndexMatcher()
    from siftbus.match.columns import ProfileColumns

    m.add_columns(ProfileColumns.from_profiles(etype, profiles))
    ct = m.snapshot().types["W"]
    assert ct.wide.n == len(profiles)
    assert ct.nbytes() / (10 * len(profiles)) <= 100
    ref = ReferenceMatcher()
    for p in profiles:
        ref.add(p)
    events = [Event.of(etype, {f"a{i}": int(v) for i, v in enumerate(rnd.integers(0, 10**6, 20))})
              for _ in range(20)]
    assert m.match_batch(events) == [ref.match(e) for e in events]
    assert sum(len(r) for r in m.match_batch(events)) > 0
