"""XML subscriptions routed across brokers: every strategy delivers exactly what one XML
filter holding every subscription delivers, with subscriptions coming and going; and the
covering relation is sound (checked against the XPath oracle on random events)."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from siftbus.errors import ConfigError
from siftbus.xmlfilter import ContentFilter, Receiver, Subscription, XmlEventFilter
from siftbus.xmlfilter.covering import covers, overlaps
from siftbus.xmlfilter.network import XmlNetwork
from xml_strategies import NS, epcis_documents, subscriptions

SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
STRATEGIES = [("flooding", False), ("flooding", True), ("advertisements", False),
              ("advertisements", True)]


@st.composite
def trees(draw: Any) -> list[tuple[str, str]]:
    n = draw(st.integers(1, 7))
    return [(f"B{i}", f"B{draw(st.integers(0, i - 1))}") for i in range(1, n)] or []


def events_of(doc: bytes) -> list[bytes]:
    """Each event of a generated document as its own message (with its wrappers)."""
    from lxml import etree

    root = etree.fromstring(doc)
    out = []
    for ev in root.iter("{*}ObjectEvent", "{*}E"):
        if ev.getparent() is not None and ev.getparent().tag in ("ObjectEvent", "E"):
            continue
        out.append(etree.tostring(ev))
    return out


def single(subs: list[Subscription], events: list[bytes]) -> Counter[tuple[str, int]]:
    f = XmlEventFilter()
    for s in subs:
        f.subscribe(s)
    got: Counter[tuple[str, int]] = Counter()
    for i, ev in enumerate(events):
        for r in f.iter_results(ev):
            for n in r.notifications:
                got.update((sid, i) for sid in n.subscriptions)
    return got


@SETTINGS
@given(links=trees(), subs=subscriptions(), doc=epcis_documents(), seed=st.integers(0, 99))
def test_every_strategy_delivers_what_one_filter_delivers(
        links: list[tuple[str, str]], subs: list[Subscription], doc: bytes, seed: int) -> None:
    rnd = random.Random(seed)
    names = sorted({n for e in links for n in e} or {"B0"})
    events = events_of(doc)
    home = {s.id: rnd.choice(names) for s in subs}
    pub = rnd.choice(names)
    drop = {s.id for s in subs if rnd.random() < 0.3}
    for strategy, cover in STRATEGIES:
        net = XmlNetwork(links, brokers=names, strategy=strategy, covering=cover)
        # an advertisement every event of this publisher matches (broad on purpose)
        net.advertise(pub, "ad0", [ContentFilter.build("//ObjectEvent"),
                                   ContentFilter.build("//E")])
        for s in subs:
            net.subscribe(home[s.id], s)
        for sid in sorted(drop):
            net.unsubscribe(home[sid], sid)
        got = Counter((d.subscription, d.event) for d in net.publish(pub, events))
        live = [s for s in subs if s.id not in drop]
        assert got == single(live, events), (strategy, cover)


def test_the_tree_is_checked() -> None:
    with pytest.raises(ConfigError, match="tree"):
        XmlNetwork([("a", "b"), ("b", "c"), ("c", "a")])
    with pytest.raises(ConfigError, match="tree"):
        XmlNetwork([("a", "b"), ("c", "d")])
    with pytest.raises(ConfigError, match="tree"):
        XmlNetwork([("a", "b")], brokers=["c"])
    assert list(XmlNetwork([], brokers=["a"]).brokers) == ["a"]


def sub(conds: list[Any], target: str = "//ObjectEvent", sid: str = "x") -> Subscription:
    return Subscription.build(("HTTP", f"http://{sid}/"), [ContentFilter.build(
        target, conds, namespaces=NS)], id=sid)


@pytest.mark.parametrize(("a", "b", "want"), [
    ([], [("action", "string-equals", ["ADD"])], True),
    ([("action", "attribute-exists", [])], [("action", "string-equals", ["ADD"])], True),
    ([("action", "string-in-set", ["ADD", "OBSERVE"])], [("action", "string-equals", ["ADD"])],
     True),
    ([("action", "string-equals", ["ADD"])], [("action", "string-in-set", ["ADD", "X"])],
     False),
    ([("readPoint/id", "string-match", ["urn:*"])], [("readPoint/id", "string-match",
                                                      ["urn:com:*"])], True),
    ([("readPoint/id", "string-match", ["urn:com:*"])], [("readPoint/id", "string-match",
                                                          ["urn:*"])], False),
    ([("ext:temperature", "numeric-gt", ["5"])], [("ext:temperature", "numeric-ge", ["6"])],
     True),
    ([("ext:temperature", "numeric-gt", ["5"])], [("ext:temperature", "numeric-ge", ["5"])],
     False),
    ([("epcList/epc", "match-epc", ["urn:epc:idpat:sgtin:1000001.*"], "any")],
     [("epcList/epc", "match-epc", ["urn:epc:id:sgtin:1000001.[3000-4000]"], "any")], True),
    ([("epcList/epc", "match-epc", ["urn:epc:idpat:sgtin:1000001.*"])],
     [("epcList/epc", "match-epc", ["urn:epc:idpat:sgtin:1000001.*"], "any")], False),
])
def test_covering_cases(a: list[Any], b: list[Any], want: bool) -> None:
    assert covers(sub(a), sub(b)) is want


CONDITIONS = st.sampled_from([
    ("action", "string-equals", ["ADD"]), ("action", "string-in-set", ["ADD", "OBSERVE"]),
    ("action", "attribute-exists", []), ("bizStep", "string-match", ["urn:com:*"]),
    ("bizStep", "string-match", ["urn:com:bizstep:*"]),
    ("bizStep", "string-equals", ["urn:com:bizstep:receiving"]),
    ("ext:temperature", "numeric-gt", ["2"]), ("ext:temperature", "numeric-ge", ["2.5"]),
    ("ext:temperature", "numeric-lt", ["10"]), ("ext:temperature", "numeric-eq", ["7"]),
    ("epcList/epc", "match-epc", ["urn:epc:idpat:sgtin:1000001.*"], "any"),
    ("epcList/epc", "match-epc", ["urn:epc:idpat:sgtin:*.*"], "any"),
    ("epcList/epc", "match-epc", ["urn:epc:id:sgtin:1000001.[3000-4000]"], "any"),
])


@SETTINGS
@given(a=st.lists(CONDITIONS, max_size=3), b=st.lists(CONDITIONS, max_size=3),
       ta=st.sampled_from(["//ObjectEvent", "/epcis:EPCISDocument//ObjectEvent"]),
       doc=epcis_documents())
def test_covering_and_overlap_are_sound(a: list[Any], b: list[Any], ta: str,
                                        doc: bytes) -> None:
    """When covers(A, B), every event B matches, A matches; when not overlaps(ad, B), no
    event matches both."""
    sa, sb = sub(a, ta, "a"), sub(b, sid="b")
    f = XmlEventFilter()
    f.subscribe(sa)
    f.subscribe(sb)
    for r in f.iter_results(doc):
        got = set(r.match.subscriptions)
        if covers(sa, sb) and "b" in got:
            assert "a" in got
        if not overlaps(sa.filters[0], sb) and "b" in got:
            assert "a" not in got


def test_advertisements_save_subscription_messages() -> None:
    """A chain B0-B1-B2-B3 with the publisher at B0: under advertisements a subscription
    of B3 that the publisher's events cannot match stays at B3; flooding sends it on."""
    links = [("B0", "B1"), ("B1", "B2"), ("B2", "B3")]
    ad = [ContentFilter.build("//ObjectEvent", [("action", "string-equals", ["ADD"])])]
    for strategy, want in (("flooding", 3), ("advertisements", 0)):
        net = XmlNetwork(links, strategy=strategy)
        net.advertise("B0", "p", ad)
        net.subscribe("B3", sub([("action", "string-equals", ["DELETE"])]))
        assert net.traffic.messages["subscribe"] == want, strategy
    net = XmlNetwork(links, strategy="advertisements")
    net.subscribe("B3", sub([("action", "string-equals", ["ADD"])]))
    assert net.traffic.messages["subscribe"] == 0  # nobody advertised yet
    net.advertise("B0", "p", ad)  # the advertisement pulls it along
    assert net.traffic.messages["subscribe"] == 3
    got = net.publish("B0", [b"<ObjectEvent><action>ADD</action></ObjectEvent>"])
    assert [(d.broker, d.receiver, d.subscription) for d in got] == [
        ("B3", Receiver("HTTP", "http://x/"), "x")]
