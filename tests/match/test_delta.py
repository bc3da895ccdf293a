"""The live-update path: the flat delta of recent adds (``match.delta``) and the tiered
merges of compiled levels (``match.leveled``), against the reference."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from siftbus.errors import DuplicateProfileError
from siftbus.lang.profile import parse_profile
from siftbus.match import ReferenceMatcher, kernel_numba, kernel_python, leveled
from siftbus.match.conformance import random_domain, random_event, random_profile
from siftbus.match.counting import CountingMatcher
from siftbus.match.delta import takes_type
from siftbus.match.index import IndexMatcher
from siftbus.model import Attribute, Event, EventType, Profile, StringDomain, parse_schema


def _ordered_type(rnd: random.Random, max_attrs: int) -> EventType:
    attrs = []
    while len(attrs) < rnd.randint(1, max_attrs):
        d = random_domain(rnd)
        if not isinstance(d, StringDomain):
            attrs.append(Attribute(f"a{len(attrs)}", d, len(attrs)))
    return EventType("T", tuple(attrs))


def _hot(rnd: random.Random, t: EventType) -> dict[str, list[int]]:
    return {a.name: [rnd.randint(a.domain.min_key, a.domain.max_key) for _ in range(3)]
            for a in t.attributes}


@settings(max_examples=40, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), delta_limit=st.sampled_from([1, 3, 12, 2048]),
       fanout=st.sampled_from([2, 3, 4]), n=st.integers(1, 120),
       counting=st.booleans())
@pytest.mark.usefixtures("kernels")
def test_interleaved_adds_and_removes_match_the_reference(
        seed: int, delta_limit: int, fanout: int, n: int, counting: bool) -> None:
    """Adds one at a time into a loaded matcher (the delta, then levels compiled from it
    and merged ``fanout`` at a time), removes from the delta and from levels, re-adds
    under removed ids; after each step, per event and in a batch, the reference's
    answer; at the end the profiles read back are the ones added."""
    rnd = random.Random(seed)
    t = _ordered_type(rnd, 6)
    assert takes_type(t)
    hot = _hot(rnd, t)
    saved = leveled.FANOUT
    leveled.FANOUT = fanout
    try:
        m = CountingMatcher(delta_limit=delta_limit) if counting else \
            IndexMatcher(delta_limit=delta_limit)
        ref = ReferenceMatcher()
        base = [p for i in range(rnd.randint(0, 40))
                if (p := random_profile(rnd, t, f"b{i:03d}", hot)) is not None]
        for p in base:
            m.add(p)
            ref.add(p)
        evs = [random_event(rnd, t, hot) for _ in range(8)]
        m.match_batch(evs)  # compiles the base
        live = [p.id for p in base]
        for i in range(n):
            step = rnd.random()
            if step < 0.6 or not live:
                p = random_profile(rnd, t, f"p{i:03d}" if rnd.random() < 0.8
                                   else rnd.choice(["b000", "p000"]) + f"x{i}", hot)
                if p is None:
                    continue
                m.add(p)
                ref.add(p)
                live.append(p.id)
            else:
                pid = live.pop(rnd.randrange(len(live)))
                assert m.remove(pid) == ref.remove(pid)
            if rnd.random() < 0.3:
                e = rnd.choice(evs)
                assert m.match(e) == ref.match(e)
        assert [m.match(e) for e in evs] == ref.match_batch(evs)
        assert m.match_batch(evs) == ref.match_batch(evs)
        assert sorted(p.id for p in m.profiles()) == sorted(live)
        for pid in rnd.sample(live, min(3, len(live))):
            assert m.get(pid) == ref.get(pid)
    finally:
        leveled.FANOUT = saved


def test_delta_kernels_agree() -> None:
    """The compiled and numpy ``delta_match`` on random rows: profiles without rows, sets
    of several intervals on one attribute, removed profiles."""
    rnd = random.Random(5)
    for _ in range(200):
        m = rnd.randint(1, 5)
        n = rnd.randint(0, 30)
        off, attr, lo, hi = [0], [], [], []
        for _ in range(n):
            for a in sorted(rnd.sample(range(m), rnd.randint(0, m))):
                for _ in range(rnd.randint(1, 3)):
                    x = rnd.randint(0, 20)
                    attr.append(a)
                    lo.append(x)
                    hi.append(x + rnd.randint(0, 8))
            off.append(len(attr))
        keys = np.array([rnd.randint(0, 25) for _ in range(m)], np.int64)
        alive = np.array([rnd.random() < 0.8 for _ in range(n)], np.uint8)
        args = (keys, n, np.array(off, np.int64), np.array(attr, np.int64),
                np.array(lo, np.int64), np.array(hi, np.int64), alive)
        want = [j for j in range(n) if alive[j] and all(
            any(lo[r] <= keys[attr[r]] <= hi[r] for r in range(off[j], off[j + 1])
                if attr[r] == a) for a in set(attr[off[j]:off[j + 1]]))]
        for impl in (kernel_numba, kernel_python):
            out = np.zeros(max(n, 1), np.int32)
            k = impl.delta_match(*args, out)
            assert out[:k].tolist() == want
            small = np.zeros(1, np.int32)
            assert impl.delta_match(*args, small) == len(want)  # count past a short out


def test_duplicates_found_in_the_delta_and_in_levels() -> None:
    schema = parse_schema('[A]\nx = "int[0,99]"\n')
    m = IndexMatcher(delta_limit=4)
    for i in range(10):
        m.add(parse_profile(f"p{i}: A(x > {i})", schema))
    m.match(Event.of(schema["A"], {"x": 50}))  # p0-p9 compiled, none pending
    m.add(parse_profile("q: A(x < 5)", schema))
    for pid in ("p3", "q"):
        with pytest.raises(DuplicateProfileError):
            m.add(parse_profile(f"{pid}: A(x = 1)", schema))
    m.remove("q")
    m.add(parse_profile("q: A(x = 1)", schema))
    assert m.match(Event.of(schema["A"], {"x": 1})) == ["p0", "q"]


def test_string_profiles_wait_one_by_one_at_most_pending_limit() -> None:
    """Profiles the delta cannot hold (string conditions) are compiled after
    ``pending_limit`` of them, the others only after ``delta_limit``."""
    schema = parse_schema('[A]\nx = "int[0,99]"\ns = "string"\n')
    assert not takes_type(schema["A"])
    m = IndexMatcher(pending_limit=2, delta_limit=100)
    for i in range(3):
        m.add(parse_profile(f"p{i}: A(s = \"a\")", schema))
    m.match(Event.of(schema["A"], {"x": 1, "s": "a"}))
    assert m.stats().pending == 0
    t = parse_schema('[B]\nx = "int[0,99]"\n')["B"]
    for i in range(50):
        m.add(Profile.build(f"q{i}", t, []))
    assert m.match(Event.of(t, {"x": 3})) == sorted(f"q{i}" for i in range(50))
    assert m.stats().pending == 50

