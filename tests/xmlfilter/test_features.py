"""The thesis's subscription features that profile 1 left out: nested filters (Listing 7),
event-type hierarchy targets (``#Type``), ``visibleAttributes`` and ``timeoutInSeconds``,
with pause, resume and renew; each against its documented semantics (docs/xmlfilter.md)
and the per-subscription XPath oracle."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lxml import etree

from siftbus.errors import (
    DuplicateSubscriptionError,
    SubscriptionError,
    UnknownSubscriptionError,
    XmlFilterError,
)
from siftbus.xmlfilter import (
    ContentFilter,
    Receiver,
    Subscription,
    XmlEventFilter,
    XPathReference,
    parse_subscriptions,
    to_xml,
)
from siftbus.xmlfilter.subscription import NestedFilter
from siftbus.xmlfilter.types import TypeHierarchy
from xml_strategies import NS, epcis_documents, subscriptions

S_NS = "http://www.adiwa.net/subscription/1.0"
F_NS = "http://www.adiwa.net/filter/1.0"
SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def doc(filters: str, extra: str = "") -> bytes:
    return (f'<subscriptionList xmlns="{S_NS}" xmlns:aff="{F_NS}"><subscription id="s">'
            "<receiver><callbackMethod>HTTP</callbackMethod><callbackAddress>http://r/"
            f"</callbackAddress></receiver>{extra}<filterList>{filters}</filterList>"
            "</subscription></subscriptionList>").encode()


def c14n(xml: bytes | Any) -> bytes:
    el = (etree.fromstring(xml, etree.XMLParser(huge_tree=True)) if isinstance(xml, bytes)
          else xml)
    return etree.tostring(el, method="c14n", exclusive=True, with_comments=False)


# -- nested filters (profile 2) ------------------------------------------------------------

# Listing 7 of the thesis, with operatorId for its operator= (the schema requires it) and
# the values of Suschke's example
LISTING_7 = doc("""
<aff:contentFilter target="//ObjectEvent">
  <aff:condition attribute="bizLocation/id" operatorId="string-equal">
    <aff:value>urn:readpoint:bizloc3293</aff:value>
  </aff:condition>
  <aff:contentFilter target="epcList/epc">
    <aff:condition attribute="#content" operatorId="match-epc">
      <aff:value>urn:epc:sgtin:12345.*</aff:value>
    </aff:condition>
  </aff:contentFilter>
</aff:contentFilter>""")


def object_event(loc: str, epcs: list[str]) -> str:
    return ("<ObjectEvent><eventTime>t</eventTime><epcList>"
            + "".join(f"<epc>{e}</epc>" for e in epcs)
            + f"</epcList><bizLocation><id>{loc}</id></bizLocation></ObjectEvent>")


def test_listing_7_keeps_only_the_matching_epcs() -> None:
    f = XmlEventFilter()
    f.subscribe_xml(LISTING_7, default_method="cli", sender="x")
    msg = ("<EventList>"
           + object_event("urn:readpoint:bizloc3293", ["urn:epc:id:sgtin:12345.1",
                                                       "urn:epc:id:sgtin:999.2",
                                                       "urn:epc:id:sgtin:12345.3"])
           + object_event("urn:readpoint:bizloc3293", ["urn:epc:id:sgtin:999.1"])
           + object_event("urn:readpoint:other", ["urn:epc:id:sgtin:12345.1"])
           + "</EventList>").encode()
    notes = f.publish(msg)
    assert [n.event for n in notes] == [0]  # no surviving epc: the filter fails (ev. 1)
    assert c14n(notes[0].xml) == c14n(object_event(
        "urn:readpoint:bizloc3293", ["urn:epc:id:sgtin:12345.1", "urn:epc:id:sgtin:12345.3"]
    ).encode())


def test_nested_filters_nest_and_round_trip() -> None:
    inner = NestedFilter.build("id", [("#content", "string-equals", ["a"])])
    nf = NestedFilter.build("readPoint", [], nested=[inner])
    sub = Subscription.build(("HTTP", "http://r/"), [ContentFilter.build(
        "//ObjectEvent", [("action", "attribute-exists", [])], nested=[nf])], id="n")
    again = parse_subscriptions(to_xml([sub]))
    assert again[0].digest == sub.digest
    f = XmlEventFilter()
    f.subscribe(sub)
    msg = (b"<r><ObjectEvent><action>x</action><readPoint><id>a</id></readPoint>"
           b"<readPoint><id>b</id></readPoint></ObjectEvent>"
           b"<ObjectEvent><action>x</action><readPoint><id>b</id></readPoint></ObjectEvent>"
           b"</r>")
    (note,) = f.publish(msg)
    # the readPoint whose id is not 'a' is removed; inside the kept one nothing is
    assert c14n(note.xml) == c14n(b"<ObjectEvent><action>x</action><readPoint><id>a</id>"
                                  b"</readPoint></ObjectEvent>")


@st.composite
def nested_filters(draw: Any) -> NestedFilter:
    kind = draw(st.integers(0, 2))
    if kind == 0:
        return NestedFilter.build("epcList/epc", [("#content", "match-epc", [
            draw(st.sampled_from(["urn:epc:idpat:sgtin:1000001.*", "urn:epc:sgtin:*.*",
                                  "urn:epc:idpat:sgtin:0614141.*.*"]))])])
    if kind == 1:
        return NestedFilter.build("epcList/epc", [("#content", "string-match",
                                                   [draw(st.sampled_from(["*3246", "*.*"]))])])
    return NestedFilter.build("//id", [("#content", "string-match", [
        draw(st.sampled_from(["urn:com:*", "rp-3", "*"]))])])


@st.composite
def subscriptions_with_nested(draw: Any) -> list[Subscription]:
    base = draw(subscriptions())
    out = []
    for s in base:
        filters = []
        for f in s.filters:
            nested = draw(st.lists(nested_filters(), max_size=2))
            filters.append(ContentFilter(f.target, f.conditions, f.id, tuple(
                {n.key: n for n in nested}.values())))
        out.append(Subscription.build(s.receiver, filters, id=s.id))
    return out


def view(f: XmlEventFilter, msg: bytes) -> list[tuple[Any, ...]]:
    return [(r.match.subscriptions, r.match.receivers) for r in f.iter_results(msg)]


def oracle(ref: XPathReference, msg: bytes) -> list[tuple[Any, ...]]:
    return [(e.subscriptions, e.receivers) for e in ref.evaluate(msg)]


def expected_consolidated(event: Any, nested: list[NestedFilter]) -> bytes:
    """The documented view, by XPath (another reading than siftbus.xmlfilter.views):
    every element a nested filter selects and does not satisfy is removed."""
    from siftbus.xmlfilter.reference import _predicates
    from siftbus.xmlfilter.xpath import XPathWriter

    copy = etree.fromstring(etree.tostring(event))
    doomed = []
    for nf in nested:
        w = XPathWriter()
        sel = w.relpath(nf.path)
        keep = etree.XPath(f"self::node(){_predicates(nf.conditions, nf.nested, w)}",
                           namespaces=dict(w.namespaces, sb="urn:siftbus:xpath",
                                           re="http://exslt.org/regular-expressions"))
        doomed += [n for n in copy.xpath(sel, namespaces=w.namespaces) if not keep(n)]
    for n in doomed:
        parent = n.getparent()
        if parent is not None:
            # lxml's remove() takes the tail with the element: the text after it stays
            if n.tail:
                prev = n.getprevious()
                if prev is None:
                    parent.text = (parent.text or "") + n.tail
                else:
                    prev.tail = (prev.tail or "") + n.tail
            parent.remove(n)
    return c14n(copy)


def with_tails(msg: bytes, how: int) -> bytes:
    """``msg`` pretty-printed (``how`` 1), with text after every ``epc`` and ``id``
    (``how`` 2), or both (3): content a pruned element must not take with it."""
    root = etree.fromstring(msg)
    if how & 1:
        etree.indent(root)
    if how & 2:
        for i, el in enumerate(root.iter("epc", "id")):
            el.tail = f", {i}: " + (el.tail or "")
    return etree.tostring(root)


@SETTINGS
@given(subs=subscriptions_with_nested(), msg=epcis_documents(), tails=st.integers(0, 3))
def test_nested_filters_against_the_oracle_and_the_consolidated_view(
        subs: list[Subscription], msg: bytes, tails: int) -> None:
    msg = with_tails(msg, tails)
    f = XmlEventFilter(compile_min=2)
    for s in subs:
        f.subscribe(s)
    ref = XPathReference(subs, mode="xpath")
    assert view(f, msg) == oracle(ref, msg)
    assert oracle(XPathReference(subs, mode="python"), msg) == oracle(ref, msg)
    by_id = {s.id: s for s in subs}
    events = {i: e.element for i, e in enumerate(ref.evaluate(msg))}
    for r in f.iter_results(msg):
        for note in r.notifications:
            # single-filter, single-view subscriptions: the notification is their view
            for sid in note.subscriptions:
                sub = by_id[sid]
                if len(sub.filters) == 1 and sub.filters[0].nested and len(
                        note.subscriptions) == 1:
                    assert c14n(note.xml) == expected_consolidated(
                        events[r.event], list(sub.filters[0].nested)), sid


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nested=nested_filters(), msg=epcis_documents(), tails=st.integers(1, 3))
def test_consolidation_keeps_the_text_around_pruned_elements(nested: NestedFilter, msg: bytes,
                                                            tails: int) -> None:
    msg = with_tails(msg, tails)
    sub = Subscription.build(Receiver("HTTP", "http://r/"), [
        ContentFilter.build("//ObjectEvent", nested=[nested])], id="s")
    f = XmlEventFilter()
    f.subscribe(sub)
    events = {i: e.element for i, e in enumerate(XPathReference([sub]).evaluate(msg))}
    for r in f.iter_results(msg):
        for note in r.notifications:
            assert c14n(note.xml) == expected_consolidated(events[r.event], [nested])


def test_a_pruned_element_leaves_the_text_after_it() -> None:
    f = XmlEventFilter()
    f.subscribe(Subscription.build(Receiver("HTTP", "http://r/"), [ContentFilter.build(
        "//ObjectEvent", nested=[NestedFilter.build("epcList/epc", [
            ("#content", "string-match", ["keep*"])])])], id="s"))
    (note,) = f.publish(b"<r><ObjectEvent><epcList>first: <epc>drop1</epc>, second: "
                        b"<epc>keep2</epc>, third: <epc>drop3</epc>.</epcList>\n  "
                        b"</ObjectEvent></r>")
    assert note.xml == (b"<ObjectEvent><epcList>first: , second: <epc>keep2</epc>, third: ."
                        b"</epcList>\n  </ObjectEvent>")


# -- visibleAttributes -------------------------------------------------------------------------


EVENT = (b'<ObjectEvent type="A" n="1"><eventTime>t</eventTime><epcList><epc>e1</epc>'
         b"<epc>e2</epc></epcList><readPoint><id>r</id><x>y</x></readPoint>"
         b'<bizLocation ref="7"><id>b</id></bizLocation></ObjectEvent>')


@pytest.mark.parametrize(("visible", "want"), [
    ("readPoint/id", b"<ObjectEvent><readPoint><id>r</id></readPoint></ObjectEvent>"),
    ("epcList @type", b'<ObjectEvent type="A"><epcList><epc>e1</epc><epc>e2</epc></epcList>'
                      b"</ObjectEvent>"),
    ("bizLocation/@ref, eventTime", b"<ObjectEvent><eventTime>t</eventTime>"
                                    b'<bizLocation ref="7"/></ObjectEvent>'),
    ("#content", EVENT),
    ("nothere", b"<ObjectEvent/>"),
])
def test_visible_attributes_carry_only_the_selected_parts(visible: str, want: bytes) -> None:
    f = XmlEventFilter()
    f.subscribe_xml(doc(f'<aff:contentFilter target="//ObjectEvent" visibleAttributes='
                        f'"{visible}"/>'), default_method="cli", sender="x")
    (note,) = f.publish(b"<r>" + EVENT + b"</r>")
    assert c14n(note.xml) == c14n(want)


def test_views_are_per_subscription_and_unions_per_filter() -> None:
    """Two subscriptions with different views get two notifications; one matched through
    two filters gets the union; one without a view gets the whole event."""
    f = XmlEventFilter()
    rec = Receiver("HTTP", "http://r/")
    f.subscribe(Subscription.build(rec, [ContentFilter.build("//ObjectEvent",
                                                             visible=["eventTime"])], id="a"))
    f.subscribe(Subscription.build(rec, [
        ContentFilter.build("//ObjectEvent", visible=["readPoint/id"]),
        ContentFilter.build("//ObjectEvent", [("epcList/epc", "attribute-exists", [])],
                            visible=["@n"])], id="b"))
    f.subscribe(Subscription.build(Receiver("HTTP", "http://whole/"),
                                   [ContentFilter.build("//ObjectEvent")], id="c"))
    notes = f.publish(b"<r>" + EVENT + b"</r>")
    assert [(n.subscriptions, c14n(n.xml)) for n in notes] == [
        (("c",), c14n(EVENT)),
        (("a",), c14n(b"<ObjectEvent><eventTime>t</eventTime></ObjectEvent>")),
        (("b",), c14n(b'<ObjectEvent n="1"><readPoint><id>r</id></readPoint>'
                      b"</ObjectEvent>")),
    ]
    assert [n.receivers for n in notes] == [(Receiver("HTTP", "http://whole/"),), (rec,),
                                            (rec,)]


def test_visible_attributes_with_nested_filters_keep_removed_parts_out() -> None:
    f = XmlEventFilter()
    f.subscribe(Subscription.build(("HTTP", "http://r/"), [ContentFilter.build(
        "//ObjectEvent", visible=["epcList"],
        nested=[NestedFilter.build("epcList/epc", [("#content", "string-equals", ["e2"])])])],
        id="v"))
    (note,) = f.publish(b"<r>" + EVENT + b"</r>")
    assert c14n(note.xml) == c14n(b"<ObjectEvent><epcList><epc>e2</epc></epcList>"
                                  b"</ObjectEvent>")


def test_a_deep_event_is_projected_without_recursion() -> None:
    deep = b"<ObjectEvent><a>" + b"<b>" * 1500 + b"x" + b"</b>" * 1500 + b"</a></ObjectEvent>"
    f = XmlEventFilter()
    f.subscribe(Subscription.build(("HTTP", "http://r/"), [ContentFilter.build(
        "//ObjectEvent", visible=["a"])], id="d"))
    (note,) = f.publish(b"<r>" + deep + b"</r>")
    assert c14n(note.xml) == c14n(deep)


# -- event-type hierarchy ------------------------------------------------------------------------


AGGREGATION = b"<AggregationEvent><action>ADD</action></AggregationEvent>"
OBJECT = b"<ObjectEvent><action>ADD</action></ObjectEvent>"


def test_type_hierarchy_resolves_base_types_at_run_time() -> None:
    f = XmlEventFilter()
    f.subscribe_xml(doc('<aff:contentFilter target="//#EPCISEvent"><aff:condition '
                        'attribute="action" operatorId="string-equals"><aff:value>ADD'
                        "</aff:value></aff:condition></aff:contentFilter>"),
                    default_method="cli", sender="x")
    msg = b"<r>" + OBJECT + AGGREGATION + b"</r>"
    assert f.publish(msg) == []  # the type is not defined yet: it matches nothing
    f.define_type("ObjectEvent", ["//ObjectEvent"])
    f.define_type("EPCISEvent", ["#ObjectEvent", "#AggregationEvent"])
    assert [n.targets for n in f.publish(msg)] == [("//ObjectEvent",)]
    f.define_type("AggregationEvent", ["//AggregationEvent"])  # a subtype defined later
    assert [n.targets for n in f.publish(msg)] == [("//ObjectEvent",),
                                                   ("//AggregationEvent",)]
    f.define_type("ObjectEvent", ["/r/ObjectEvent[action='DELETE']"])  # redefined
    assert [n.targets for n in f.publish(msg)] == [("//AggregationEvent",)]
    f.undefine_type("AggregationEvent")
    assert f.publish(msg) == []
    f.unsubscribe("s")
    assert f.matcher.is_empty_index()


def test_type_cycles_and_bad_names_are_refused() -> None:
    h = TypeHierarchy()
    h.define("A", ["#B"])
    with pytest.raises(SubscriptionError, match="its own subtype"):
        h.define("B", ["#A"])
    with pytest.raises(SubscriptionError, match="its own subtype"):
        h.define("A", ["#A"])
    assert h.resolve("A") == ()
    with pytest.raises(SubscriptionError, match="event type name"):
        h.define("a b", ["//x"])
    with pytest.raises(XmlFilterError):
        h.define("C", ["//*"])


TYPE_NAMES = ["T0", "T1", "T2"]


@st.composite
def hierarchies(draw: Any) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for i, name in enumerate(TYPE_NAMES):
        entries = draw(st.lists(st.sampled_from(["//ObjectEvent", "//Other", "//E",
                                                 "/epcis:EPCISDocument//ObjectEvent"]),
                                max_size=2))
        entries += ["#" + t for t in draw(st.lists(st.sampled_from(TYPE_NAMES[i + 1 :]),
                                                   max_size=2))] if i < 2 else []
        out[name] = entries
    return out


@SETTINGS
@given(types=hierarchies(), subs=subscriptions(), msg=epcis_documents(),
       use=st.lists(st.sampled_from(TYPE_NAMES), min_size=1, max_size=3))
def test_type_targets_equal_the_oracle_with_the_targets_spelled_out(
        types: dict[str, list[str]], subs: list[Subscription], msg: bytes,
        use: list[str]) -> None:
    typed = list({t.digest: t for t in (Subscription.build(s.receiver, [ContentFilter(
        ContentFilter.build("#" + use[i % len(use)]).target, f.conditions, f.id)
        for f in s.filters], id=s.id) for i, s in enumerate(subs))}.values())
    f = XmlEventFilter(compile_min=2)
    for s in typed:
        f.subscribe(s)
    h = TypeHierarchy()
    for name in reversed(TYPE_NAMES):  # subtypes first (forward names are allowed too)
        f.define_type(name, types[name], NS)
        h.define(name, types[name], NS)
    assert view(f, msg) == oracle(XPathReference(typed, types=h), msg)


# -- timeoutInSeconds, renew, pause, resume --------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


MSG = b"<r>" + OBJECT + b"</r>"


def lifecycle_filter() -> tuple[XmlEventFilter, Clock]:
    clock = Clock()
    f = XmlEventFilter(clock=clock)
    f.subscribe_xml(doc('<aff:contentFilter target="//ObjectEvent"/>',
                        extra="<timeoutInSeconds>10</timeoutInSeconds>"),
                    default_method="cli", sender="x")
    return f, clock


def test_a_subscription_expires_after_its_timeout() -> None:
    f, clock = lifecycle_filter()
    clock.now += 9.5
    assert len(f.publish(MSG)) == 1
    assert f.status("s").expires_in == pytest.approx(0.5)
    clock.now += 0.5
    assert f.publish(MSG) == []
    assert len(f) == 0 and f.matcher.is_empty_index()
    with pytest.raises(UnknownSubscriptionError):
        f.status("s")


def test_renew_starts_the_time_again() -> None:
    f, clock = lifecycle_filter()
    clock.now += 8
    assert f.renew("s").expires_in == 10  # its own timeout again
    clock.now += 8
    assert len(f.publish(MSG)) == 1
    assert f.renew("s", 100).timeout_seconds == 100
    clock.now += 99
    assert len(f.publish(MSG)) == 1
    clock.now += 2
    assert f.publish(MSG) == []
    with pytest.raises(SubscriptionError, match="timeout"):
        g, _ = lifecycle_filter()
        g.renew("s", 0)


def test_pause_and_resume() -> None:
    f, clock = lifecycle_filter()
    f.pause("s")
    assert f.status("s").state == "paused"
    assert f.publish(MSG) == []
    assert [s.id for s in f.paused()] == ["s"] and len(f) == 0
    with pytest.raises(DuplicateSubscriptionError, match="paused"):
        f.subscribe_xml(doc('<aff:contentFilter target="//ObjectEvent"/>',
                            extra="<timeoutInSeconds>10</timeoutInSeconds>"),
                        default_method="cli", sender="x")
    clock.now += 5
    f.resume("s")
    assert f.status("s").state == "active"
    assert len(f.publish(MSG)) == 1
    f.pause("s")
    clock.now += 6  # the expiry kept running while paused
    assert f.expire() == ["s"]
    assert f.paused() == [] and f.matcher.is_empty_index()
    f2, _ = lifecycle_filter()
    f2.pause("s")
    f2.unsubscribe("s")  # a paused subscription can be removed
    with pytest.raises(UnknownSubscriptionError):
        f2.resume("s")


def test_timeout_round_trips_and_is_bounded() -> None:
    subs = parse_subscriptions(doc('<aff:contentFilter target="//x"/>',
                                   extra="<timeoutInSeconds>3600</timeoutInSeconds>"))
    assert subs[0].timeout_seconds == 3600
    assert parse_subscriptions(to_xml(subs))[0].timeout_seconds == 3600
    with pytest.raises(SubscriptionError, match="timeoutInSeconds"):
        parse_subscriptions(doc('<aff:contentFilter target="//x"/>',
                                extra="<timeoutInSeconds>0</timeoutInSeconds>"))
