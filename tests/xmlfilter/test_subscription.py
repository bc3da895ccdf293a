"""Subscription documents: XSD validation, defaults, duplicates, operators, errors."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from siftbus.errors import (
    DuplicateSubscriptionError,
    SiftbusError,
    SubscriptionError,
    UnknownSubscriptionError,
    XmlInputError,
    XPathSubsetError,
)
from siftbus.xmlfilter import (
    ContentFilter,
    Receiver,
    Subscription,
    XmlEventFilter,
    parse_subscriptions,
    to_xml,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "xml"
APPENDIX6 = (DATA / "appendix6_subscriptions.xml").read_bytes()


def doc(body: str, extra_ns: str = "") -> str:
    return (
        '<subscriptionList xmlns="http://www.adiwa.net/subscription/1.0" '
        f'xmlns:f="http://www.adiwa.net/filter/1.0" {extra_ns}>{body}</subscriptionList>'
    )


def _deep_nested(levels: int) -> str:
    return '<f:contentFilter target="a">' * levels + "</f:contentFilter>" * levels


def sub(cond: str = '<f:condition operatorId="attribute-exists" attribute="a"/>',
        target: str = "//E", method: str = "HTTP", address: str = "http://x/",
        attrs: str = "") -> str:
    return (
        f"<subscription {attrs}><receiver><callbackMethod>{method}</callbackMethod>"
        f"<callbackAddress>{address}</callbackAddress></receiver><filterList>"
        f'<f:contentFilter target="{target}">{cond}</f:contentFilter></filterList></subscription>'
    )


def test_appendix6_parses_with_defaults_and_aliases() -> None:
    subs = parse_subscriptions(APPENDIX6)
    assert len(subs) == 3
    s1, s2, s3 = subs
    assert s1.receiver == Receiver("HTTP", "http://localhost:4001/submit")
    assert s2.receiver == s3.receiver == Receiver("HTTPS", "http://localhost:4002/submit")
    c = s1.filters[0].conditions
    assert [x.operator.name for x in c] == ["string-equals", "attribute-exists", "string-match"]
    assert all(x.quantifier == "all" for x in c)  # the default, "for safety"
    assert s3.filters[0].conditions[0].path.canonical() == (
        "/{http://www.adiwa.net/adiwaevent/1.0}current")
    assert len({s.digest for s in subs}) == 3


def test_duplicates_rejected_and_all_or_none() -> None:
    f = XmlEventFilter()
    ids = f.subscribe_xml(APPENDIX6)
    assert len(f) == 3
    # the generator's three fixed subscriptions, sent again: each is an error
    with pytest.raises(DuplicateSubscriptionError):
        f.subscribe_xml(APPENDIX6)
    assert len(f) == 3
    # a document with one new and one duplicate subscription registers nothing
    new_and_dup = doc(sub() + sub(
        '<f:condition operatorId="string-equal" attribute="bizLocation/id">'
        "<f:value>urn:com:location:area-01</f:value></f:condition>"
        '<f:condition operatorId="attribute-exist" attribute="readPoint/id"/>',
        target="//ObjectEvent", method="HTTPS", address="http://localhost:4002/submit"))
    with pytest.raises(DuplicateSubscriptionError):
        f.subscribe_xml(new_and_dup)
    assert len(f) == 3
    # the same id with other content is refused as well
    with pytest.raises(DuplicateSubscriptionError):
        f.subscribe_xml(doc(sub(attrs=f'id="{ids[0]}"')))
    for i in ids:
        f.unsubscribe(i)
    with pytest.raises(UnknownSubscriptionError):
        f.unsubscribe(ids[0])
    assert f.matcher.is_empty_index()


def test_duplicate_is_semantic_not_textual() -> None:
    a = parse_subscriptions(doc(sub('<f:condition operatorId="string-in-set" attribute="/a">'
                                    "<f:value>y</f:value><f:value>x</f:value></f:condition>")))
    b = parse_subscriptions(doc(sub('<f:condition quantifier="all" operatorId="string-in" '
                                    'attribute="a"><f:value>x</f:value><f:value>y</f:value>'
                                    "<f:value>x</f:value></f:condition>")))
    assert a[0].digest == b[0].digest


def test_receiver_defaults() -> None:
    text = doc(sub(method="", address=""))
    s = parse_subscriptions(text, default_method="HTTP POST", sender="http://10.0.0.1:9/")
    assert s[0].receiver == Receiver("HTTP POST", "http://10.0.0.1:9/")
    with pytest.raises(SubscriptionError, match="callbackMethod"):
        parse_subscriptions(text, sender="x")
    with pytest.raises(SubscriptionError, match="callbackAddress"):
        parse_subscriptions(text, default_method="HTTP")


@pytest.mark.parametrize(
    ("text", "error", "fragment"),
    [
        (doc("<subscription><filterList/></subscription>"), SubscriptionError, "schema"),
        (doc(sub('<f:condition operatorId="x" attribute="a" quantifier="some"/>')),
         SubscriptionError, "schema"),
        (doc(sub('<f:condition operator="match-epc" attribute="a"/>')), SubscriptionError,
         "schema"),
        ("<subscriptionList", XmlInputError, "well-formed"),
        ('<subscriptionList xmlns="urn:other"/>', SubscriptionError, "schema"),
        (doc(sub('<f:condition operatorId="string-like" attribute="a"/>')), SubscriptionError,
         "unknown operatorId"),
        (doc(sub('<f:condition operatorId="string-equals" attribute="a"/>')),
         SubscriptionError, "exactly 1"),
        (doc(sub('<f:condition operatorId="numeric-gt" attribute="a"><f:value>x</f:value>'
                 "</f:condition>")), SubscriptionError, "decimal number"),
        (doc(sub('<f:condition operatorId="match-epc" attribute="a"><f:value>urn:x</f:value>'
                 "</f:condition>")), SubscriptionError, "EPC pattern"),
        (doc(sub(target="//E/*")), XPathSubsetError, "wildcard"),
        (doc(sub('<f:condition operatorId="attribute-exists" attribute="a/text()"/>')),
         XPathSubsetError, "function"),
        (doc(sub('<f:contentFilter target="@x"/>')), SubscriptionError, "select elements"),
        (doc(sub('<f:contentFilter target="a[b]"/>')), XPathSubsetError, "predicates"),
        (doc(sub('<f:contentFilter target="a" visibleAttributes="b"/>')), SubscriptionError,
         "top-level"),
        (doc(sub(_deep_nested(10))), SubscriptionError, "max_nesting"),
        (doc(sub(target='//E" visibleAttributes="a/*')), XPathSubsetError, "wildcard"),
        (doc("<subscription><receiver><callbackMethod>a</callbackMethod><callbackAddress>b"
             "</callbackAddress></receiver><filterList/></subscription>"), SubscriptionError,
         "at least one contentFilter"),
    ],
)
def test_bad_documents(text: str, error: type[Exception], fragment: str) -> None:
    with pytest.raises(error, match=fragment) as info:
        parse_subscriptions(text, source="s.xml")
    assert isinstance(info.value, SiftbusError)
    assert info.value.line is not None
    assert info.value.source == "s.xml" or isinstance(info.value, XmlInputError)


def test_error_line_points_at_the_condition() -> None:
    text = doc("\n" + sub('\n<f:condition operatorId="nope" attribute="a"/>'))
    with pytest.raises(SubscriptionError) as info:
        parse_subscriptions(text)
    assert info.value.line == 3


def test_builder_and_xml_round_trip() -> None:
    s = Subscription.build(
        ("HTTP", "http://r/"),
        [ContentFilter.build("//ObjectEvent", [("bizStep", "string-equals", "x"),
                                               ("epcList/epc", "match-epc",
                                                ["urn:epc:idpat:sgtin:1.*"], "any"),
                                               ("ext:t", "numeric-ge", ["2.50"])],
                             namespaces={"ext": "urn:ext"}),
         ContentFilter.build("adiwaEvent[head]", [])],
        id="mine")
    again = parse_subscriptions(to_xml([s], {"ext": "urn:ext"}))
    assert again[0].digest == s.digest
    assert again[0].id == "mine"


@settings(max_examples=100, deadline=None)
@given(st.one_of(st.binary(max_size=200), st.text(max_size=200).map(lambda t: doc(t))))
def test_fuzz_subscription_documents(data: bytes | str) -> None:
    with contextlib.suppress(SiftbusError):
        parse_subscriptions(data)
