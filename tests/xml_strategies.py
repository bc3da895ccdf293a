"""Hypothesis strategies for the XML filter: random EPCIS documents and subscriptions.

Value pools are small so that random subscriptions match often; the document shapes cover
wrappers, repeated paths (several epcs), attributes, a second namespace, numeric text,
nested candidate events and events of two types.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from siftbus.xmlfilter import ContentFilter, Receiver, Subscription

EPCIS = "urn:epcglobal:epcis:xsd:1"
EXT = "urn:example:ext"
NS = {"epcis": EPCIS, "ext": EXT}

LOCATIONS = ["urn:com:location:area-01", "urn:com:location:plant-01", "urn:org:loc:x"]
READPOINTS = ["urn:com:readpoint:entrance-01", "urn:com:readpoint:dock-02", "rp-3"]
STEPS = ["urn:com:bizstep:receiving", "urn:com:bizstep:producing", "shipping"]
DISPOSITIONS = ["active", "readyforproduction", "in_transit"]
ACTIONS = ["ADD", "OBSERVE", "DELETE"]
EPCS = ["urn:epc:id:sgtin:1000001.3246", "urn:epc:id:sgtin:1000002.1670",
        "urn:epc:id:sgtin:0614141.107346.2017", "urn:epc:id:sscc:0614141.1234567890",
        "not-an-epc"]
NUMBERS = ["1", "2.5", "-3", "10", "1e2", "abc", " 7 ", ""]
TYPES = ["A", "B"]


def _esc(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace('"', "&quot;")


@st.composite
def object_event(draw: Any, name: str = "ObjectEvent") -> str:
    parts: list[str] = []
    attrs = ""
    if draw(st.booleans()):
        attrs = f' type="{draw(st.sampled_from(TYPES))}"'
    parts.append("<eventTime>2010-04-12T14:04:05Z</eventTime>")
    if draw(st.booleans()):
        epcs = draw(st.lists(st.sampled_from(EPCS), max_size=3))
        parts.append("<epcList>" + "".join(f"<epc>{e}</epc>" for e in epcs) + "</epcList>")
    for tag, pool in (("action", ACTIONS), ("bizStep", STEPS), ("disposition", DISPOSITIONS)):
        if draw(st.integers(0, 5)) > 0:
            parts.append(f"<{tag}>{draw(st.sampled_from(pool))}</{tag}>")
    if draw(st.integers(0, 5)) > 0:
        parts.append(f"<readPoint><id>{draw(st.sampled_from(READPOINTS))}</id></readPoint>")
    for _ in range(draw(st.integers(0, 2)) if draw(st.integers(0, 4)) else 0):
        parts.append(f"<bizLocation><id>{draw(st.sampled_from(LOCATIONS))}</id></bizLocation>")
    if draw(st.booleans()):
        unit = draw(st.sampled_from(["C", "F"]))
        parts.append(f'<ext:temperature unit="{unit}">{draw(st.sampled_from(NUMBERS))}'
                     "</ext:temperature>")
    if draw(st.booleans()):
        parts.append(f"<extension><quantity>{draw(st.sampled_from(NUMBERS))}</quantity>"
                     "</extension>")
    order = draw(st.permutations(range(len(parts))))
    body = "".join(parts[i] for i in order)
    return f"<{name}{attrs}>{body}</{name}>"


@st.composite
def epcis_documents(draw: Any) -> bytes:
    events = draw(st.lists(st.one_of(object_event(), object_event("AggregationEvent")),
                           max_size=5))
    header = "<EPCISHeader><note>x</note></EPCISHeader>" if draw(st.booleans()) else ""
    lists = [events]
    if len(events) > 2 and draw(st.booleans()):
        lists = [events[:2], events[2:]]
    body = "".join("<EventList>" + "".join(ev) + "</EventList>" for ev in lists)
    return (f'<epcis:EPCISDocument xmlns:epcis="{EPCIS}" xmlns:ext="{EXT}">{header}'
            f"<EPCISBody>{body}</EPCISBody></epcis:EPCISDocument>").encode()


TARGETS = [
    "//ObjectEvent",
    "//EventList/ObjectEvent",
    "/epcis:EPCISDocument/EPCISBody/EventList/ObjectEvent",
    "//ObjectEvent[action='ADD']",
    "//ObjectEvent[@type]",
    '//ObjectEvent[@type="B"]',
    "//AggregationEvent",
    "//ObjectEvent[extension/quantity]",
    "//EventList[ObjectEvent/action='DELETE']",
    "//EventList[//epc]",
    "epcis:EPCISDocument[//bizStep='shipping']",
]

PATHS = [
    "bizLocation/id", "readPoint/id", "action", "bizStep", "disposition", "epcList/epc",
    "//epc", "ext:temperature", "ext:temperature/@unit", "@type", "extension/quantity",
    "/epcis:EPCISDocument/EPCISBody/EventList/ObjectEvent/action", "ObjectEvent/action",
    "//id", "#content",
]

STRINGS = LOCATIONS + READPOINTS + STEPS + DISPOSITIONS + ACTIONS + EPCS + TYPES + ["C", "F"]
GLOBS = ["urn:com:*", "*-01", "urn:?om:*", "*", "rp-3", "urn:epc:id:sgtin:*.3246", "*e*"]
EPC_PATTERNS = ["urn:epc:sgtin:1000001.*", "urn:epc:idpat:sgtin:*.*",
                "urn:epc:id:sgtin:[1000000-1000001].*", "urn:epc:idpat:sscc:0614141.*",
                "urn:epc:idpat:sgtin:0614141.*.*"]
NUM_OPS = ["numeric-eq", "numeric-ne", "numeric-lt", "numeric-le", "numeric-gt", "numeric-ge"]
RECEIVERS = [Receiver("HTTP", "http://r1/"), Receiver("HTTP", "http://r2/"),
             Receiver("siftbus", "r3")]


@st.composite
def conditions(draw: Any) -> tuple[Any, ...]:
    path = draw(st.sampled_from(PATHS))
    kind = draw(st.sampled_from(["exists", "equals", "in-set", "match", "epc", "num"]))
    q = draw(st.sampled_from([None, "all", "any"]))
    if kind == "exists":
        return (path, draw(st.sampled_from(["attribute-exists", "attribute-exist"])), [], q)
    if kind == "equals":
        return (path, draw(st.sampled_from(["string-equals", "string-equal"])),
                [draw(st.sampled_from(STRINGS))], q)
    if kind == "in-set":
        return (path, "string-in-set", draw(st.lists(st.sampled_from(STRINGS), min_size=1,
                                                     max_size=3)), q)
    if kind == "match":
        return (path, "string-match", [draw(st.sampled_from(GLOBS))], q)
    if kind == "epc":
        return (path, "match-epc", [draw(st.sampled_from(EPC_PATTERNS))], q)
    return (path, draw(st.sampled_from(NUM_OPS)), [draw(st.sampled_from(["1", "2.5", "5", "0",
                                                                        "100"]))], q)


@st.composite
def content_filters(draw: Any) -> ContentFilter:
    target = draw(st.sampled_from(TARGETS))
    conds = draw(st.lists(conditions(), max_size=3))
    return ContentFilter.build(target, [c if c[3] else c[:3] for c in conds], namespaces=NS)


@st.composite
def subscriptions(draw: Any, prefix: str = "s") -> list[Subscription]:
    n = draw(st.integers(1, 8))
    out: list[Subscription] = []
    seen: set[str] = set()
    for i in range(n):
        filters = draw(st.lists(content_filters(), min_size=1, max_size=3))
        sub = Subscription.build(draw(st.sampled_from(RECEIVERS)), filters, id=f"{prefix}{i}")
        if sub.digest not in seen:
            seen.add(sub.digest)
            out.append(sub)
    return out
