"""The access strategy's table (a compiled snapshot on integer arrays and a delta of the
filters changed since) against the XPath oracle and against the matcher's registry.

The workload is dense on purpose: few paths and values and up to four conditions per
filter, so that many filters share an access constraint, and ``compile_min`` is small,
so that matching runs on every mix of snapshot, delta and removed filters.
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


def check_table(m: XmlMatcher) -> None:
    """The access table (compiled snapshot and delta) holds exactly the registered filters
    that have conditions, each once, under one of its own constraints and with all the
    others (so unsubscribe left none behind and compiling lost none)."""
    entries = m._table.snapshot_entries()
    want = sorted(fid for fid, sid in enumerate(m._f_sub) if sid is not None and m._f_cids[fid])
    assert [e[0] for e in entries] == want
    for fid, access, others in entries:
        assert sorted((access, *others)) == sorted(m._f_cids[fid])


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
    f = XmlEventFilter(precheck=precheck, compile_min=4)
    for s in subs:
        f.subscribe(s)
    for doc in docs:
        assert view(f, doc) == oracle(ref, doc)
    check_table(f.matcher)


@SETTINGS
@given(subs=dense_subscriptions(), doc=epcis_documents(),
       ops=st.lists(st.tuples(st.booleans(), st.integers(0, 100)), min_size=1, max_size=40),
       precheck=st.booleans())
def test_plans_follow_subscribe_and_unsubscribe(
    subs: list[Subscription], doc: bytes, ops: list[tuple[bool, int]], precheck: bool
) -> None:
    """Changes go to the delta and the table is compiled again as they pile up: match
    after every operation, compare with the oracle and the registry."""
    f = XmlEventFilter(precheck=precheck, compile_min=3)
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
        check_table(f.matcher)
    for sid in sorted(active):
        f.unsubscribe(sid)
        check_table(f.matcher)
    assert f.matcher.is_empty_index()


@settings(max_examples=200, deadline=None)
@given(vals=st.lists(st.integers(0, 50_000), max_size=400), spread=st.booleans())
def test_kernel_sorts_and_dedupes_ranks(vals: list[int], spread: bool) -> None:
    """The kernel's three ways to sort matched ranks (insertion for a few, marks over a
    short span, a sort over a long one) all give the sorted distinct values."""
    import numpy as np

    from siftbus.xmlfilter.table import _sorted_distinct

    if not spread:
        vals = [v % 500 for v in vals]
    arr = np.array(vals + [0] * 3, np.int32)
    marks = np.zeros(50_001, np.uint8)
    n = _sorted_distinct(arr, len(vals), marks)
    assert arr[:n].tolist() == sorted(set(vals))
    assert not marks.any()  # left clean for the next event


def test_hundreds_of_matches_per_event_equal_the_oracle() -> None:
    """Many matching filters per event: the kernel's output buffers grow, and the ranks
    of hundreds of subscriptions are sorted by marks; against the XPath oracle."""
    subs = [Subscription.build(Receiver("HTTP", f"http://r{i % 350}/{i}"), [ContentFilter.build(
        "//ObjectEvent", [("action", "string-equals", ["OBSERVE"]),
                          ("readPoint/id", "attribute-exists", []),
                          ("bizStep", "string-in-set", [STEPS[0], STEPS[i % 3]])])],
        id=f"m{i:04d}") for i in range(700)]
    doc = (b"<r>" + b"".join(
        f"<ObjectEvent><action>{a}</action><bizStep>{s}</bizStep>"
        f"<readPoint><id>x</id></readPoint></ObjectEvent>".encode()
        for a in ("OBSERVE", "ADD") for s in STEPS) + b"</r>")
    f = XmlEventFilter(compile_min=8)
    for s in subs:
        f.subscribe(s)
    want = oracle(XPathReference(subs, mode="xpath"), doc)
    assert view(f, doc) == want
    assert max(len(w[0]) for w in want) == 700
    check_table(f.matcher)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(conds=st.lists(st.lists(st.one_of(  # biased to 'exists', which most events meet
    st.just(("readPoint/id", "attribute-exists", [])), dense_condition()),
    min_size=1, max_size=2), min_size=49, max_size=140),
       receivers=st.integers(1, 120),
       docs=st.lists(epcis_documents(), min_size=1, max_size=3))
def test_many_matches_per_event_equal_xpath_oracle(conds: list[list[Any]], receivers: int,
                                                   docs: list[bytes]) -> None:
    """Dozens to over a hundred matched subscriptions and receivers per event: their ids
    are taken from object arrays by rank (above 48) instead of one by one; the notified
    subscriptions and receivers equal the XPath oracle's, from the compiled snapshot
    (every filter has a condition: an unconditional one takes the general path)."""
    f = XmlEventFilter(compile_min=1)
    subs = []
    seen: set[str] = set()
    for i, cs in enumerate(conds):
        sub = Subscription.build(
            Receiver("HTTP", f"http://r{i % receivers:03d}/"),
            [ContentFilter.build("//ObjectEvent", cs, namespaces=NS)], id=f"m{i:03d}")
        if sub.digest not in seen:
            seen.add(sub.digest)
            subs.append(sub)
            f.subscribe(sub)
    f.matcher.compile()
    ref = XPathReference(subs, mode="xpath")
    for doc in docs:
        assert view(f, doc) == oracle(ref, doc)
