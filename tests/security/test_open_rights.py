"""Rights on extended schemas (issue 31): dotted paths, optional and array attributes,
open kinds and the new operators. A subscription is accepted only when every event it
can select lies inside the right, narrowing keeps exactly the events of both (each once),
and the block publish check says of each event what the event check says, checked on
random workloads against the reference semantics (``Profile.matches``)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.match.test_residual import SCHEMA, event, profile

from siftbus.errors import AccessDenied
from siftbus.lang.profile import parse_profile
from siftbus.model import Event, Profile, event_from_dict
from siftbus.security.rights import Rights, RightSet, covered_by_union
from siftbus.wire.events import Block

RUN = settings(max_examples=50, deadline=None,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _case(data: st.DataObject, query: bool = True
          ) -> tuple[Profile | None, list[Profile], list[Event]]:
    """A query (when ``query``), 0-3 rights and 2-10 events, all of one type (drawn of that
    type: drawing either type and dropping the others cost most of the test's time)."""
    tname = data.draw(st.sampled_from(["X", "P"]))
    q = None
    while query and q is None:  # None: an unsatisfiable draw
        q = data.draw(profile("q", tname))
    rights = [r for i in range(data.draw(st.integers(0, 3)))
              if (r := data.draw(profile(f"r{i}", tname))) is not None]
    events = data.draw(st.lists(event(tname), min_size=2, max_size=10))
    return q, rights, events


@RUN
@given(st.data())
def test_an_accepted_subscription_selects_no_event_outside_the_right(
        data: st.DataObject) -> None:
    q, rights, events = _case(data)
    assert q is not None
    if covered_by_union(q, rights):
        for e in events:
            assert not q.matches(e) or any(r.matches(e) for r in rights), e
    pieces = RightSet(tuple(rights)).narrow(q)
    if pieces is not None:
        for e in events:
            want = q.matches(e) and any(r.matches(e) for r in rights)
            assert sum(p.matches(e) for p in pieces) == int(want), e


@RUN
@given(st.data())
def test_the_block_publish_check_agrees_with_the_event_check(data: st.DataObject) -> None:
    _, rights, events = _case(data, query=False)
    right = RightSet(tuple(rights))
    block = Block.of_events(events, "pub", *([0] * 2))  # type: ignore[arg-type]
    rows = right.admitted_rows(block.etype, block.keys)
    got = rows.tolist() if rows is not None else [True] * len(events)
    assert got == [right.admits(e) for e in events]


def _rights(*texts: str, narrow: bool = False) -> Rights:
    right = RightSet.parse(texts, SCHEMA)
    return Rights("tenant", right, right, right, (), narrow)


def _p(text: str) -> Profile:
    return parse_profile(text, SCHEMA)


def test_rights_on_dotted_paths_and_new_operators() -> None:
    r = _rights('X(c.tier = A)', 'X(s suffix ".prod")')
    assert r.check_subscribe(_p('q: X(c.tier = A, s like "a*")')) == (
        _p('q: X(c.tier = A, s like "a*")'),)
    assert r.check_subscribe(_p('q: X(s suffix ".prod", n = 1)'))
    with pytest.raises(AccessDenied, match="reaches outside the subscribe right"):
        r.check_subscribe(_p("q: X(c.tier <= B)"))
    with pytest.raises(AccessDenied, match="reaches outside"):
        r.check_subscribe(_p('q: X(s suffix "prod")'))  # wider than ".prod"
    with pytest.raises(AccessDenied, match="reaches outside"):  # `or` leaves the right
        r.check_subscribe(_p('q: X(c.tier = A or s = "x")'))


def test_an_optional_attribute_left_open_is_not_covered_by_rights_requiring_it() -> None:
    """``f > 0`` and ``f <= 0`` cover every value of ``f`` but not its absence."""
    r = _rights("X(f > 0)", "X(f <= 0)")
    assert r.check_subscribe(_p("q: X(f exists)"))
    with pytest.raises(AccessDenied, match="reaches outside"):
        r.check_subscribe(_p("q: X(n = 1)"))
    narrowed = _rights("X(f > 0)", narrow=True).check_subscribe(_p("q: X(b = true)"))
    e = {"type": "X", "n": 1, "s": "", "tags": ["a"], "c": {"tier": "A"}, "b": True}
    assert [p.matches(event_from_dict({**e, "f": 2.0}, SCHEMA)) for p in narrowed] == [True]
    assert [p.matches(event_from_dict(e, SCHEMA)) for p in narrowed] == [False]


def test_narrowing_with_checks_is_a_clear_refusal() -> None:
    r = _rights('X(s suffix ".prod")', narrow=True)
    with pytest.raises(AccessDenied, match="not expressible as profiles"):
        r.check_subscribe(_p("q: X(n = 1)"))


def test_publish_rights_hold_on_arrays_absent_values_and_checks() -> None:
    r = _rights('X(tags = "ok", f > 0)', 'P(s suffix "x")')
    base = {"type": "X", "n": 1, "s": "", "c": {"tier": "A"}}
    good = event_from_dict({**base, "tags": ["no", "ok"], "f": 1.5}, SCHEMA)
    absent = event_from_dict({**base, "tags": ["ok"]}, SCHEMA)
    for events, bad in [([good], 0), ([good, absent], 1)]:
        block = Block.of_events(events, "pub", *([0] * 2))  # type: ignore[arg-type]
        if bad:
            with pytest.raises(AccessDenied, match=f"{bad} of 2 X events"):
                r.check_publish_rows(block.etype, block.keys)
        else:
            r.check_publish_rows(block.etype, block.keys)
    p_block = Block.of_events([event_from_dict({"type": "P", "n": 1, "s": "ab"}, SCHEMA)],
                              "pub", *([0] * 2))  # type: ignore[arg-type]
    with pytest.raises(AccessDenied, match="1 of 1 P events"):  # the suffix check holds
        r.check_publish_rows(p_block.etype, p_block.keys)
