"""The XML filter against per-subscription lxml XPath, on random documents and subscriptions."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from siftbus.xmlfilter import ContentFilter, Subscription, XmlEventFilter, XPathReference
from xml_strategies import TARGETS, epcis_documents, subscriptions

CONFIGS = [
    {"strategy": "access", "precheck": True, "precheck_rounds": 1},
    {"strategy": "access", "precheck": True, "precheck_rounds": 8},
    {"strategy": "access", "precheck": False},
    {"strategy": "access", "precheck": True, "compile_min": 2},
    {"strategy": "counting", "precheck": True, "precheck_rounds": 2},
    {"strategy": "counting", "precheck": False},
]

SETTINGS = settings(max_examples=100, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def engine_view(f: XmlEventFilter, doc: bytes) -> list[tuple[Any, ...]]:
    return [(r.match.subscriptions, r.match.receivers) for r in f.iter_results(doc)]


def oracle_view(ref: XPathReference, doc: bytes) -> list[tuple[Any, ...]]:
    return [(e.subscriptions, e.receivers) for e in ref.evaluate(doc)]


@SETTINGS
@given(subs=subscriptions(), docs=st.lists(epcis_documents(), min_size=1, max_size=3))
def test_engine_equals_xpath_oracle(subs: list[Subscription], docs: list[bytes]) -> None:
    ref_x = XPathReference(subs, mode="xpath")
    ref_p = XPathReference(subs, mode="python")
    engines = []
    for cfg in CONFIGS:
        f = XmlEventFilter(**cfg)  # type: ignore[arg-type]
        for s in subs:
            f.subscribe(s)
        engines.append(f)
    for doc in docs:
        want = oracle_view(ref_x, doc)
        assert oracle_view(ref_p, doc) == want
        for cfg, f in zip(CONFIGS, engines, strict=True):
            assert engine_view(f, doc) == want, cfg


@SETTINGS
@given(
    subs=subscriptions(),
    doc=epcis_documents(),
    ops=st.lists(st.tuples(st.booleans(), st.integers(0, 100)), min_size=1, max_size=25),
    precheck=st.booleans(),
)
def test_interleaved_subscribe_unsubscribe(
    subs: list[Subscription], doc: bytes, ops: list[tuple[bool, int]], precheck: bool
) -> None:
    """Churn between messages and between the events of one message; after each step the
    engine agrees with the oracle on the current set; removing everything empties it."""
    f = XmlEventFilter(precheck=precheck, precheck_rounds=2, compile_min=3)
    ref = XPathReference()
    # one permanent subscription per target keeps the set of located events stable, so the
    # i-th event of the message is the same element whatever else is registered
    anchors = [Subscription.build(("anchor", "a"), [ContentFilter.build(t, [], namespaces={
        "epcis": "urn:epcglobal:epcis:xsd:1"})], id=f"anchor{i}") for i, t in enumerate(TARGETS)]
    for a in anchors:
        f.subscribe(a)
        ref.add(a)
    active: dict[str, Subscription] = {}
    ops_iter = iter(ops)

    def step() -> None:
        op = next(ops_iter, None)
        if op is None:
            return
        add, k = op
        if add or not active:
            s = subs[k % len(subs)]
            if s.id in active:
                return
            f.subscribe(s)
            ref.add(s)
            active[s.id] = s
        else:
            sid = sorted(active)[k % len(active)]
            f.unsubscribe(sid)
            ref.remove(sid)
            del active[sid]

    for _ in range(3):  # a few messages, churn between and inside them
        step()
        for r in f.iter_results(doc):
            want = oracle_view(ref, doc)[r.event]
            assert (r.match.subscriptions, r.match.receivers) == want
            step()
    for sid in list(active):
        f.unsubscribe(sid)
    for a in anchors:
        f.unsubscribe(a.id)
    assert f.matcher.is_empty_index()
    assert f.publish(doc) == []


@SETTINGS
@given(subs=subscriptions(), seed=st.integers(0, 2**32), strategy=st.sampled_from(
    ["access", "counting"]))
def test_add_remove_every_order_leaves_nothing(subs: list[Subscription], seed: int,
                                               strategy: str) -> None:
    rnd = random.Random(seed)
    f = XmlEventFilter(strategy=strategy, compile_min=2)  # type: ignore[arg-type]
    order = list(subs)
    rnd.shuffle(order)
    for s in order:
        f.subscribe(s)
    assert len(f) == len(subs)
    rnd.shuffle(order)
    for s in order:
        f.unsubscribe(s.id)
    assert f.matcher.is_empty_index(), f"seed {seed}"


def test_publish_in_threads_while_subscribing() -> None:
    """Two publisher threads and a churning subscriber: every event is matched against one
    consistent subscription set (the permanent one always matches, nothing crashes)."""
    import threading
    from pathlib import Path

    doc = (Path(__file__).parents[1] / "data" / "xml" / "appendix7_message.xml").read_bytes()
    f = XmlEventFilter()
    f.subscribe(Subscription.build(("HTTP", "http://always/"), [ContentFilter.build(
        "//ObjectEvent", [("readPoint/id", "attribute-exists", [])])], id="always"))
    churn = [Subscription.build(("HTTP", f"http://c{i}/"), [ContentFilter.build(
        "//ObjectEvent", [("bizStep", "string-match", ["urn:com:*"]),
                          ("action", "string-in-set", ["OBSERVE", f"x{i}"])])], id=f"c{i}")
        for i in range(20)]
    errors: list[BaseException] = []
    seen: list[tuple[str, ...]] = []
    stop = threading.Event()

    def publisher() -> None:
        try:
            for _ in range(200):
                if stop.is_set():
                    break
                seen.extend(r.match.subscriptions for r in f.iter_results(doc))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=publisher) for _ in range(2)]
    for t in threads:
        t.start()
    for _ in range(10):
        for s in churn:
            f.subscribe(s)
        for s in churn:
            f.unsubscribe(s.id)
    stop.set()
    for t in threads:
        t.join(60)
    assert not errors
    assert seen and all("always" in sids for sids in seen)
    assert all(set(sids) <= {"always", *(s.id for s in churn)} for sids in seen)
    assert len(f) == 1


@settings(max_examples=200, deadline=None)
@given(receivers=st.lists(st.tuples(st.text("a\x00\x01b", min_size=1, max_size=4),
                                    st.text("a\x00\x01b", min_size=1, max_size=4)),
                          min_size=1, max_size=6, unique=True))
def test_receivers_distinct_and_sorted_whatever_their_text(
    receivers: list[tuple[str, str]]
) -> None:
    """Receivers given through the API may hold any text, NUL included: the matcher keeps
    them apart and orders them by (method, address) like the oracle."""
    from siftbus.xmlfilter import Receiver

    f = XmlEventFilter()
    subs = [Subscription.build(Receiver(m, a), [ContentFilter.build("//ObjectEvent")],
                               id=f"r{i}") for i, (m, a) in enumerate(receivers)]
    for s in subs:
        f.subscribe(s)
    doc = b"<EventList><ObjectEvent><action>ADD</action></ObjectEvent></EventList>"
    (r,) = list(f.iter_results(doc))
    assert [(x.method, x.address) for x in r.match.receivers] == sorted(receivers)
    assert oracle_view(XPathReference(subs, mode="xpath"), doc) == [
        (r.match.subscriptions, r.match.receivers)]
