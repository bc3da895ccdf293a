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
