"""Notifications: canonical-XML round trip of the event subtree, sinks and dispatching."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from lxml import etree

from siftbus.errors import SiftbusError, XmlInputError
from siftbus.xmlfilter import (
    CallbackSink,
    ContentFilter,
    Dispatcher,
    MemorySink,
    Notification,
    NotificationSink,
    Receiver,
    Subscription,
    XmlEventFilter,
    XPathReference,
)
from xml_strategies import TARGETS, epcis_documents

DATA = Path(__file__).resolve().parents[1] / "data" / "xml"
NS = {"epcis": "urn:epcglobal:epcis:xsd:1"}


def c14n(el: etree._Element) -> bytes:
    return etree.tostring(el, method="c14n", with_tail=False)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=epcis_documents())
def test_notification_is_the_canonical_subtree(doc: bytes) -> None:
    """Every notification's XML, parsed alone, is C14N-equal to the event subtree of the
    input, in-scope namespaces included."""
    subs = [Subscription.build(("HTTP", f"http://r{i}/"), [ContentFilter.build(t, [],
                                                                                namespaces=NS)])
            for i, t in enumerate(TARGETS)]
    f = XmlEventFilter()
    for s in subs:
        f.subscribe(s)
    ref = XPathReference(subs)
    want = ref.located(ref.parse(doc))
    notes = f.publish(doc)
    assert len(notes) == len(want)
    for note, el in zip(notes, want, strict=True):
        assert c14n(etree.fromstring(note.xml)) == c14n(el)


def test_namespaces_preserved_on_the_appendix_message() -> None:
    f = XmlEventFilter()
    f.subscribe(Subscription.build(("HTTP", "http://r/"), [ContentFilter.build(
        "/epcis:EPCISDocument/EPCISBody/EventList/ObjectEvent", [], namespaces=NS)]))
    notes = f.publish((DATA / "appendix7_message.xml").read_bytes())
    assert len(notes) == 3
    root = etree.fromstring(notes[0].xml)
    assert root.nsmap["epcis"] == NS["epcis"]
    assert root.nsmap["xsi"] == "http://www.w3.org/2001/XMLSchema-instance"


def test_malformed_input_reports_line_and_keeps_earlier_events() -> None:
    f = XmlEventFilter()
    f.subscribe(Subscription.build(("HTTP", "http://r/"), [ContentFilter.build("//e", [])]))
    seen = []
    with pytest.raises(XmlInputError) as info:
        for r in f.iter_results(b"<d>\n<e/>\n<e>\n</d>", name="m.xml"):
            seen.append(r.event)
    assert seen == [0]
    assert info.value.line == 4 and info.value.source == "m.xml"
    assert isinstance(info.value, SiftbusError)


async def test_dispatcher_routes_by_method_and_survives_failures() -> None:
    memory = MemorySink()
    calls: list[str] = []

    async def boom(r: Receiver, n: Notification) -> None:
        calls.append(r.address)
        raise RuntimeError("receiver down")

    failing = CallbackSink(boom)
    assert isinstance(memory, NotificationSink) and isinstance(failing, NotificationSink)
    d = Dispatcher({"http": memory, "broken": failing})
    rs = (Receiver("HTTP", "a"), Receiver("broken", "b"), Receiver("smoke-signal", "c"))
    note = Notification(0, ("//x",), ("s1",), rs, b"<x/>")
    await d.dispatch(note)
    assert memory.deliveries == [(rs[0], note)]
    assert calls == ["b"]
    assert d.undeliverable == 1
    assert d.failures and "receiver down" in d.failures[0][1]
    assert failing.stats().failed == 1
    await d.aclose()


async def test_publish_to_dispatcher() -> None:
    f = XmlEventFilter()
    f.subscribe(Subscription.build(("HTTP", "http://r/"), [ContentFilter.build("//e", [
        ("@k", "numeric-ge", ["2"])])]))
    sink = MemorySink()
    notes = await f.publish_to(b"<d><e k='1'/><e k='2.0'/><e k='x'/></d>",
                               Dispatcher(default=sink))
    assert [n.event for n in notes] == [1]
    assert [n.xml for _, n in sink.deliveries] == [b'<e k="2.0"/>']
