"""The per-event path against the reference: ``match(event)`` one event at a time, through
a level's id matcher (``CompiledType.id_matcher``: keys packed, one kernel call, the
ids) and the prefetching kernel of ``match/kernel_event_numba.py``, which keeps the
members past the pre-checks and checks them in batches.

The workload makes those batches overflow: two lead cells hold most profiles, their
other conditions pass often (hundreds of members kept per event, more than
``CAND - CHUNK``, past the 256 ranks the first output buffer holds), sets of several
runs need their runs checked, and up to hundreds of profiles have no condition
(``always``, more than ``CAND``); lead sets are lists, bitmaps or both; removals
(tombstones), re-adds (the delta, merged levels) between the rounds; on both kernels,
with the id prefetch on every level or only on large ones."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from siftbus.match import ReferenceMatcher, kernel, level
from siftbus.match.index import IndexMatcher
from siftbus.model import Event, Op, Predicate, Profile, parse_schema

HOT = parse_schema('[H]\na = "int[0,1]"\nb = "int[0,999]"\nc = "enum[X,Y,Z]"\n'
                   'd = "int[-5,5]"\n')["H"]


def _profile(rnd: random.Random, pid: str, empty: float) -> Profile:
    if rnd.random() < empty:
        return Profile.build(pid, HOT, [])
    preds = [Predicate("a", Op.EQ, (rnd.randint(0, 1),))] if rnd.random() < 0.8 else \
        [Predicate("b", Op.RANGE, (x := rnd.randint(0, 990), x + rnd.randint(0, 9)))]
    r = rnd.random() if preds[0].attr == "a" else 1.0
    if r < 0.5:  # passes the pre-check for most events
        preds.append(Predicate("b", Op.GE, (rnd.randint(0, 200),)))
    elif r < 0.7:  # several runs: the member's runs are checked
        preds.append(Predicate("b", Op.IN, tuple(rnd.sample(range(0, 1000, 7), 4))))
    elif r < 0.8:
        preds.append(Predicate("b", Op.NE, (rnd.randint(0, 999),)))
    if rnd.random() < 0.5:
        preds.append(Predicate("c", Op.IN, tuple(rnd.sample(["X", "Y", "Z"], 2))))
    if rnd.random() < 0.3:
        preds.append(Predicate("d", Op.LE, (rnd.randint(-5, 5),)))
    return Profile.build(pid, HOT, preds)


def _event(rnd: random.Random) -> Event:
    return Event.of(HOT, {"a": rnd.randint(0, 1),
                          "b": rnd.choice([0, 999, rnd.randint(0, 999), rnd.randrange(0, 1000, 7)]),
                          "c": rnd.choice("XYZ"), "d": rnd.randint(-5, 5)})


@settings(max_examples=12, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(200, 2500),
       threshold=st.sampled_from([1.0, 1.0, 0.0, 1 / 32]),
       empty=st.sampled_from([0.0, 0.02, 0.3]), drop=st.floats(0.0, 0.6),
       prefetch_all=st.booleans(), delta=st.sampled_from([0, 64]))
@pytest.mark.usefixtures("kernels")
def test_per_event_matches_equal_the_reference(seed: int, n: int, threshold: float,
                                               empty: float, drop: float,
                                               prefetch_all: bool, delta: int) -> None:
    saved = level.PREFETCH_FROM
    level.PREFETCH_FROM = 1 if prefetch_all else saved
    try:
        rnd = random.Random(seed)
        m = IndexMatcher(threshold, pending_limit=0 if not delta else 16, delta_limit=delta)
        ref = ReferenceMatcher()
        profiles = [_profile(rnd, f"p{i:04d}", empty) for i in range(n)]
        for p in profiles:
            m.add(p)
            ref.add(p)
        evs = [_event(rnd) for _ in range(10)]
        assert [m.match(e) for e in evs] == ref.match_batch(evs)
        levels = [lv for ts in m._types.values() for lv in ts.levels]
        # the id matcher serves every level without wide profiles
        assert all(lv.own_prefetch == (not lv.compiled.wide.n) for lv in levels)
        assert any(lv.own_prefetch for lv in levels)
        assert [lv.prefetching() for lv in levels] == [
            lv.own_prefetch and kernel.name() == "numba" and (prefetch_all or lv.n >= saved)
            for lv in levels]
        for p in rnd.sample(profiles, int(drop * n)):
            m.remove(p.id)
            ref.remove(p.id)
        assert [m.match(e) for e in evs] == ref.match_batch(evs)
        for i in range(rnd.randint(0, 80)):
            p = _profile(rnd, f"q{i:03d}", empty)
            m.add(p)
            ref.add(p)
            if i % 9 == 0:
                e = _event(rnd)
                assert m.match(e) == ref.match(e)
        assert [m.match(e) for e in evs] == ref.match_batch(evs)
    finally:
        level.PREFETCH_FROM = saved


@pytest.mark.usefixtures("kernels")
def test_batches_of_kept_members_overflow_and_are_all_checked() -> None:
    """One event keeps far more members than a batch holds (lists and bitmaps), and
    more profiles without conditions than a batch; every one is checked (the match
    counts show the batches and the output buffer overflowed)."""
    rnd = random.Random(5)
    for threshold in (1.0, 0.0):
        m = IndexMatcher(threshold, pending_limit=0)
        ref = ReferenceMatcher()
        for i in range(3000):
            p = _profile(rnd, f"p{i:04d}", 0.25)
            m.add(p)
            ref.add(p)
        evs = [_event(rnd) for _ in range(6)]
        want = ref.match_batch(evs)
        assert min(len(w) for w in want) > 600  # > CAND, > 256 (the first buffer)
        assert [m.match(e) for e in evs] == want


def test_the_packed_arrays_hold_the_kernels_scratch() -> None:
    """``pack_keys_arrays`` reserves exactly the scratch the compiled kernel takes from
    the end of ``i64`` (a smaller one would overlap the copied arrays)."""
    from siftbus.match import kernel_event_numba

    assert kernel.SCRATCH == kernel_event_numba.SCRATCH


WIDE_DOMAIN = parse_schema('[W]\na = "int[0,1]"\nb = "int[0,199999]"\n')["W"]


@pytest.mark.usefixtures("kernels")
def test_per_event_on_int32_entries() -> None:
    """More than 32,767 cells: lead-set entries and records are int32 (16 bytes more per
    entry for the prefetches to step over); per-event matches still equal the
    reference's, with removals."""
    rnd = random.Random(9)
    m = IndexMatcher(1.0, pending_limit=0)
    ref = ReferenceMatcher()
    for i in range(18_000):  # distinct narrow ranges on b: ~36,000 cells
        y = 11 * i  # every range's bounds its own
        preds = [Predicate("b", Op.RANGE, (y, y + rnd.randint(0, 8)))]
        if i % 9 == 0:
            preds = [Predicate("a", Op.EQ, (rnd.randint(0, 1),)),
                     Predicate("b", Op.GE, (rnd.randrange(0, 100_000),))]
        p = Profile.build(f"p{i:05d}", WIDE_DOMAIN, preds)
        m.add(p)
        ref.add(p)
    evs = [Event.of(WIDE_DOMAIN, {"a": rnd.randint(0, 1), "b": rnd.randrange(0, 200_000)})
           for _ in range(8)]
    assert [m.match(e) for e in evs] == ref.match_batch(evs)
    (lv,) = m._types["W"].levels
    assert lv.compiled.set_ent.dtype == np.int32 and lv.own_prefetch
    assert max(len(ref.match(e)) for e in evs) > 300
    for i in range(0, 18_000, 3):
        m.remove(f"p{i:05d}")
        ref.remove(f"p{i:05d}")
    assert [m.match(e) for e in evs] == ref.match_batch(evs)
