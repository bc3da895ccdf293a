"""Siena's counting matcher against the reference (conformance suite and hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from siftbus.lang.profile import parse_profile
from siftbus.match.conformance import check_matcher
from siftbus.match.counting import CountingMatcher, compile_counting
from siftbus.match.engines import make_matcher
from siftbus.model import Event, parse_schema


@pytest.mark.parametrize("pending_limit", [0, 16])
@pytest.mark.usefixtures("kernels")
def test_conformance(pending_limit: int) -> None:
    check_matcher(lambda: CountingMatcher(pending_limit=pending_limit), seed=5, rounds=2)


def test_engine_registered() -> None:
    assert isinstance(make_matcher("counting"), CountingMatcher)


def test_identical_conditions_share_one_attribute_filter() -> None:
    schema = parse_schema('[T]\na = "int[0,99]"\nb = "int[0,99]"\n')
    profiles = [parse_profile(f"p{i}: T(a = 5, b > {i % 3})", schema) for i in range(30)]
    ct = compile_counting(schema["T"], sorted(profiles, key=lambda p: p.id))
    assert ct.n_filters == 4  # a = 5, and three distinct b > k
    m = CountingMatcher(pending_limit=0)
    for p in profiles:
        m.add(p)
    e = Event.of(schema["T"], {"a": 5, "b": 1})
    assert m.match(e) == sorted(f"p{i}" for i in range(30) if i % 3 == 0)


@settings(max_examples=30, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), pending_limit=st.sampled_from([0, 3]),
       n_profiles=st.integers(0, 80))
@pytest.mark.usefixtures("kernels")
def test_differential_interleaved(seed: int, pending_limit: int, n_profiles: int) -> None:
    check_matcher(lambda: CountingMatcher(pending_limit=pending_limit), seed=seed, rounds=1,
                  profiles=n_profiles, events=15)


def _wide_workload(seed: int, n: int) -> tuple[list, list[Event]]:
    """REIN-like profiles: wide and narrow intervals on a large domain, 1-4 attributes."""
    import random

    rnd = random.Random(seed)
    schema = parse_schema("[R]\n" + "".join(f'a{i} = "int[0,999999]"\n' for i in range(4)))
    profiles = []
    for i in range(n):
        conds = []
        for a in rnd.sample(range(4), rnd.randint(1, 4)):
            w = rnd.choice([0, 10, 5_000, 500_000, 999_999])
            x = rnd.randrange(1_000_000 - w)
            conds.append(f"a{a} in [{x}, {x + w}]" if rnd.random() < 0.8 else f"a{a} != {x}")
        profiles.append(parse_profile(f"p{i}: R({', '.join(conds)})", schema))
    events = [Event.of(schema["R"], {f"a{i}": rnd.randrange(1_000_000) for i in range(4)})
              for _ in range(60)]
    return profiles, events


@settings(max_examples=15, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1))
@pytest.mark.usefixtures("kernels")
def test_wide_intervals_on_a_large_domain_agree_with_the_reference(seed: int) -> None:
    from siftbus.match.reference import ReferenceMatcher

    profiles, events = _wide_workload(seed, 120)
    m, ref = CountingMatcher(pending_limit=0), ReferenceMatcher()
    for p in profiles:
        m.add(p)
        ref.add(p)
    for p in profiles[::7]:  # removals between the adds and the matches
        m.remove(p.id)
        ref.remove(p.id)
    for e in events:
        assert m.match(e) == ref.match(e)


def test_memory_grows_with_the_conditions_not_with_the_cells_they_cover() -> None:
    # 2,000 profiles of 1-4 conditions, most intervals cover a large part of the domain:
    # listed per cell, each would take thousands of entries (about 4 KB per condition).
    profiles, _ = _wide_workload(3, 2_000)
    ct = compile_counting(profiles[0].etype, sorted(profiles, key=lambda p: p.id))
    conditions = sum(len(p.conditions) for p in profiles)
    size = sum(a.nbytes for a in (ct.node_base, ct.af_off, ct.af_mem, ct.pr_off, ct.pr_mem,
                                  ct.ncond))
    assert size / conditions < 100
