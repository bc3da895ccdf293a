"""bench/xmlgen.py: the EPCIS ObjectEvent generator and the subscription generator."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from lxml import etree

from siftbus.errors import DuplicateSubscriptionError
from siftbus.xmlfilter import XmlEventFilter, XPathReference, parse_subscriptions, to_xml

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import xmlgen  # noqa: E402


def test_object_events_fixed_first_then_random() -> None:
    # the events are fragments: the ext prefix is declared on the message around them
    msg = etree.fromstring(next(xmlgen.epcis_messages(500, per_message=500)))
    events = msg.findall("EPCISBody/EventList/ObjectEvent")
    assert len(events) == 500
    assert [e.findtext("bizLocation/id") for e in events[:3]] == [
        f[6] for f in xmlgen.FIXED_EVENTS]
    for e in events[3:]:
        assert e.tag == "ObjectEvent"
        assert 1 <= len(e.findall("epcList/epc")) <= 3
        assert e.findtext("action") in xmlgen.ACTIONS
        assert e.findtext("bizStep") in xmlgen.BIZSTEPS
        assert e.findtext("readPoint/id").startswith("urn:epc:id:sgln:")
    temps = [e.find(f"{{{xmlgen.EXT_NS}}}temperature") for e in events[3:]]
    assert 0 < sum(t is not None for t in temps) < len(temps)  # optional extension
    assert xmlgen.object_events(50, seed=3) == xmlgen.object_events(50, seed=3)
    assert xmlgen.object_events(50, seed=3) != xmlgen.object_events(50, seed=4)


def test_messages_split_at_per_message() -> None:
    msgs = list(xmlgen.epcis_messages(25, per_message=10))
    assert len(msgs) == 3
    counts = []
    for m in msgs:
        doc = etree.fromstring(m)
        assert doc.tag == f"{{{xmlgen.EPCIS_NS}}}EPCISDocument"
        counts.append(len(doc.findall("EPCISBody/EventList/ObjectEvent")))
    assert counts == [10, 10, 5]


def test_subscriptions_distinct_valid_and_round_trip() -> None:
    subs = xmlgen.subscriptions(400)
    assert len(subs) == 400
    assert [s.id for s in subs[:3]] == ["fixed0", "fixed1", "fixed2"]
    assert len({s.id for s in subs}) == len({s.digest for s in subs}) == 400
    two = sum(len(s.filters) == 2 for s in subs)
    assert 0.03 * 400 < two < 0.2 * 400  # one in ten has a disjunction of two filters
    # the document form is valid against the shipped XSDs and reads back to the same set
    back = parse_subscriptions(to_xml(subs, {"ext": xmlgen.EXT_NS}))
    assert [s.digest for s in back] == [s.digest for s in subs]


def test_resent_fixed_subscriptions_are_duplicates() -> None:
    """The thesis's generator re-sends its three fixed subscriptions on a second run."""
    f = XmlEventFilter()
    doc = to_xml(xmlgen.subscriptions(3))
    assert len(f.subscribe_xml(doc)) == 3
    with pytest.raises(DuplicateSubscriptionError):
        f.subscribe_xml(doc)
    assert len(f) == 3


def test_fixed_workload_outcome_and_random_workload_against_xpath() -> None:
    subs = xmlgen.subscriptions(300)
    f = XmlEventFilter()
    for s in subs:
        f.subscribe(s)
    msg = next(xmlgen.epcis_messages(200, per_message=200))
    got = [r.match.subscriptions for r in f.iter_results(msg)]
    fixed = [tuple(x for x in g if x.startswith("fixed")) for g in got[:3]]
    # appendix 7 under appendix 6: area-01 goes to both fixed receivers, plant-01's read
    # point matches the glob of the third subscription, warehouse-01 matches nothing fixed
    assert fixed == [(), ("fixed0", "fixed1"), ("fixed2",)]
    want = [e.subscriptions for e in XPathReference(subs, mode="xpath").evaluate(msg)]
    assert got == want
    assert sum(map(len, got)) > 3  # the random subscriptions match some random events


def test_command_line_feeds_the_filter(tmp_path: Path) -> None:
    events, subs = tmp_path / "events.xml", tmp_path / "subs.xml"
    gen = [sys.executable, str(BENCH / "xmlgen.py")]
    subprocess.run([*gen, "events", "--count", "30", "--per-message", "30", "--out",
                    str(events)], check=True, timeout=120)
    subprocess.run([*gen, "subscriptions", "--count", "50", "--out", str(subs)], check=True,
                   timeout=120)
    r = subprocess.run([sys.executable, "-m", "siftbus", "xml-filter", "-s", str(subs), "-i",
                        str(events)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert lines[0]["event"] == 1 and lines[0]["subscriptions"][:2] == ["fixed0", "fixed1"]
