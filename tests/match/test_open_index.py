"""Issue 31 item 8: the open index (``match.open_index``) answers exactly what the
reference answers, on random open workloads (open kinds, optional/nested/array fields,
string tests, ``not``, ``or``) with interleaved add and remove; and it is what every
engine's residual side list now uses."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.match.test_residual import event, profile

from siftbus.lang.profile import parse_profile
from siftbus.match.engines import make_matcher
from siftbus.match.open_index import REBALANCE_AT, OpenIndexMatcher
from siftbus.match.reference import ReferenceMatcher
from siftbus.model import event_from_dict, parse_schema

RUN = settings(max_examples=50, deadline=None,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@RUN
@given(st.data())
def test_open_index_agrees_with_the_reference_under_add_and_remove(
        data: st.DataObject) -> None:
    fast, ref = OpenIndexMatcher(), ReferenceMatcher()
    live: list[str] = []
    for step in range(data.draw(st.integers(1, 16))):
        action = data.draw(st.sampled_from(["add", "add", "add", "remove", "match"]))
        if action == "add":
            p = data.draw(profile(f"p{step}"))
            if p is None:
                continue
            fast.add(p)
            ref.add(p)
            live.append(p.id)
        elif action == "remove" and live:
            pid = live.pop(data.draw(st.integers(0, len(live) - 1)))
            assert fast.remove(pid) == ref.remove(pid)
        events = data.draw(st.lists(event(), min_size=1, max_size=4))
        want = ref.match_batch(events)
        assert fast.match_batch(events) == want
        assert [fast.match(e) for e in events] == want
        assert len(fast) == len(live)
    for pid in list(live):  # removing everything leaves no condition behind
        fast.remove(pid)
    assert not fast._types


SHARED = parse_schema("""
[E]
env = "string"
number = "string"
tags = "array<string>"
region = "optional string"
kind = "string"
name = "string"
""")


def _rules(n: int, modulo: int) -> list[str]:
    return [f'r{i}: E(env = "prod", number = "{i % modulo}", tags = "tag1", '
            f'tags = "tag2", region not in {{"moon"}}, kind in {{"app", "database"}}, '
            f'name like "*-myapp-*")' for i in range(n)]


def test_shared_conditions_are_numbered_once_and_access_is_the_selective_one() -> None:
    m = OpenIndexMatcher()
    for text in _rules(3 * REBALANCE_AT, REBALANCE_AT // 2):
        m.add(parse_profile(text, SHARED))
    t = m._types["E"]
    # env, 32 numbers, 2 tags, region, kind, name: each once however many rules use it
    assert len(t.conds) == 1 + REBALANCE_AT // 2 + 2 + 1 + 1 + 1
    # no rule is reached through env = "prod" (every rule has it): through its number
    assert max(len(g) for g in t.access.values()) == 6
    ev = event_from_dict({"type": "E", "env": "prod", "number": "7", "tags": ["tag2", "tag1"],
                          "region": "earth", "kind": "app", "name": "app-myapp-7"}, SHARED)
    assert m.match(ev) == sorted(f"r{i}" for i in (7, 39, 71, 103, 135, 167))
    moon = event_from_dict({"type": "E", "env": "prod", "number": "7", "tags": ["tag1"],
                            "region": "moon", "kind": "app", "name": "app-myapp-7"}, SHARED)
    assert m.match(moon) == []


def test_every_engine_side_list_is_the_open_index() -> None:
    for name in ("index", "counting"):
        m = make_matcher(name)
        m.add(parse_profile('a: E(env = "prod", tags = "x")', SHARED))
        assert isinstance(m._side_list(), OpenIndexMatcher)  # type: ignore[attr-defined]


def test_a_condition_written_twice_is_released_with_its_profile() -> None:
    m = OpenIndexMatcher()
    m.add(parse_profile('a: E(env = "prod", tags = "x", tags = "x", name like "*y*", '
                        'name like "*y*")', SHARED))
    m.add(parse_profile('b: E(env = "prod")', SHARED))
    m.remove("a")
    t = m._types["E"]
    assert [c.check.attr for c in t.conds.values()] == ["env"]
    assert [len(ft) for ft in t.fields.values()] == [1]
