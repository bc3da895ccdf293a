"""The access strategy's per-constraint candidate plans (tuples built on first use from the
candidate tables) against the XPath oracle and against the tables themselves.

The workload is dense on purpose: few paths and values and up to four conditions per
filter, so that many filters share an access constraint and the rarest other constraint,
which is what the plan's groups are made of.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from siftbus.xmlfilter import ContentFilter, Receiver, Subscription, XmlEventFilter, XPathReference
from siftbus.xmlfilter.matcher import XmlMatcher
from xml_strategies import ACTIONS, NS, READPOINTS, STEPS, epcis_documents

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

RECEIVERS = [Receiver("HTTP", "http://r1/"), Receiver("HTTP", "http://r2/")]


@st.composite
def dense_condition(draw: Any) -> tuple[Any, ...]:
    kind = draw(st.integers(0, 4))
    if kind == 0:
        return ("readPoint/id", "string-equals", [draw(st.sampled_from(READPOINTS[:2]))])
    if kind == 1:
        return ("action", "string-equals", [draw(st.sampled_from(ACTIONS[:2]))])
    if kind == 2:
        return ("bizStep", "string-in-set", draw(st.lists(st.sampled_from(STEPS[:2]),
                                                          min_size=1, max_size=2)))
    if kind == 3:
        return ("epcList/epc", "match-epc", ["urn:epc:idpat:sgtin:1000001.*"],
                draw(st.sampled_from(["all", "any"])))
    return ("readPoint/id", "attribute-exists", [])


@st.composite
def dense_subscriptions(draw: Any) -> list[Subscription]:
    out: list[Subscription] = []
    seen: set[str] = set()
    for i in range(draw(st.integers(1, 30))):
        filters = [ContentFilter.build("//ObjectEvent", [
            c for c in draw(st.lists(dense_condition(), max_size=4))], namespaces=NS)
            for _ in range(draw(st.integers(1, 2)))]
        sub = Subscription.build(draw(st.sampled_from(RECEIVERS)), filters, id=f"d{i}")
        if sub.digest not in seen:
            seen.add(sub.digest)
            out.append(sub)
    return out


def check_plans(m: XmlMatcher) -> None:
    """Every cached plan equals one built afresh from the tables, and the plans reference
    exactly the registered filters that have conditions (so unsubscribe left none behind)."""
    in_plans: set[int] = set()
    for con in m._cons.values():
        cached = con.plan
        fresh = con.make_plan()
        if cached is not None:
            assert cached == fresh, con.key
        single, pair, multi = fresh
        fids = [r.fid for r in single]
        fids += [r.fid for _, g in pair for r in g]
        for first, group in multi:
            for rest, rec in group:
                fids.append(rec.fid)
                # the group's key and the rest are the filter's other constraints, and a
                # filter of three or more constraints has at least two of them
                assert {first.cid, *(k.cid for k in rest), con.cid} == set(rec.cids)
                assert rest
        assert len(fids) == len(set(fids)) == len(con.access)
        assert set(fids) == con.access
        in_plans |= con.access
        con.plan = cached  # leave the matcher's state as it was
    with_conditions = {fid for fid, rec in m._filters.items() if rec.cids}
    assert in_plans == with_conditions


def view(f: XmlEventFilter, doc: bytes) -> list[tuple[Any, ...]]:
    return [(r.match.subscriptions, r.match.receivers) for r in f.iter_results(doc)]


def oracle(ref: XPathReference, doc: bytes) -> list[tuple[Any, ...]]:
    return [(e.subscriptions, e.receivers) for e in ref.evaluate(doc)]


@SETTINGS
@given(subs=dense_subscriptions(), docs=st.lists(epcis_documents(), min_size=1, max_size=3),
       precheck=st.booleans())
def test_dense_filters_equal_xpath_oracle(subs: list[Subscription], docs: list[bytes],
                                          precheck: bool) -> None:
    ref = XPathReference(subs, mode="xpath")
    f = XmlEventFilter(precheck=precheck, rebalance_min=4)
    for s in subs:
        f.subscribe(s)
    for doc in docs:
        assert view(f, doc) == oracle(ref, doc)
    check_plans(f.matcher)


@SETTINGS
@given(subs=dense_subscriptions(), doc=epcis_documents(),
       ops=st.lists(st.tuples(st.booleans(), st.integers(0, 100)), min_size=1, max_size=40),
       precheck=st.booleans())
def test_plans_follow_subscribe_and_unsubscribe(
    subs: list[Subscription], doc: bytes, ops: list[tuple[bool, int]], precheck: bool
) -> None:
    """Plans are built while matching and must be dropped by every change that touches
    their tables: match after every operation, compare with the oracle and the tables."""
    f = XmlEventFilter(precheck=precheck, rebalance_min=3)
    ref = XPathReference()
    active: set[str] = set()
    for add, k in ops:
        if add or not active:
            s = subs[k % len(subs)]
            if s.id in active:
                continue
            f.subscribe(s)
            ref.add(s)
            active.add(s.id)
        else:
            sid = sorted(active)[k % len(active)]
            f.unsubscribe(sid)
            ref.remove(sid)
            active.discard(sid)
        assert view(f, doc) == oracle(ref, doc)
        check_plans(f.matcher)
    for sid in sorted(active):
        f.unsubscribe(sid)
        check_plans(f.matcher)
    assert f.matcher.is_empty_index()
