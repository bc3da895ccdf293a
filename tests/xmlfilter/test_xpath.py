"""The restricted XPath: what compiles, what is refused (and where), path normalisation."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from siftbus.errors import SiftbusError, XPathSubsetError
from siftbus.xmlfilter import compile_path, compile_target

NS = {"ns2": "urn:two", "epcis": "urn:epcglobal:epcis:xsd:1"}


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("//ObjectEvent", "//{*}ObjectEvent"),
        ("adiwaEvent[body/smartmeter-update/smart-meter-channel]",
         "/{*}adiwaEvent[/{*}body/{*}smartmeter-update/{*}smart-meter-channel]"),
        ("adiwaEvent[//eventType/name='SmartMeterEvent']",
         "/{*}adiwaEvent[//{*}eventType/{*}name='SmartMeterEvent']"),
        ("//Event/ObjectEvent", "//{*}Event/{*}ObjectEvent"),
        ('//Event[@Type="ObjectEvent"]', "//{*}Event[/@Type='ObjectEvent']"),
        ('//Event[Target@Type="ObjectEvent"]', "//{*}Event[/{*}Target/@Type='ObjectEvent']"),
        ('//Event[Target/Type/@id="ObjectEvent"]',
         "//{*}Event[/{*}Target/{*}Type/@id='ObjectEvent']"),
        ("/epcis:EPCISDocument//ObjectEvent",
         "/{urn:epcglobal:epcis:xsd:1}EPCISDocument//{*}ObjectEvent"),
        ("//a[b][c = 'x']", "//{*}a[/{*}b][/{*}c='x']"),
    ],
)
def test_targets_compile(text: str, canonical: str) -> None:
    assert compile_target(text, NS).canonical() == canonical


@pytest.mark.parametrize(
    ("text", "position", "fragment"),
    [
        ("//*", 3, "wildcard"),
        ("//a/*", 5, "wildcard"),
        ("//a[*='x']", 5, "wildcard"),
        ("//a/..", 5, "parent"),
        ("//a/.", 5, "self"),
        ("child::a", 1, "axis 'child::'"),
        ("//a/descendant-or-self::b", 5, "axis"),
        ("//a[contains(b, 'x')]", 5, "function"),
        ("//a[text()='x']", 5, "function or node test"),
        ("//a[b!='x']", 6, "only '='"),
        ("//a[b<3]", 6, "only '='"),
        ("//a[b=3]", 7, "quote literals"),
        ("//a | //b", 5, "union"),
        ("//x:a", 3, "prefix 'x' is not declared"),
        ("//a[b]/c", 7, "only on the last step"),
        ("//a/@b", 5, "not an attribute"),
        ("#Object Event", 2, "event type"),
        ("//#EPCISEvent[a]", 4, "event type"),
        ("//a[b='x", 7, "unterminated"),
        ("", 1, "empty"),
        ("//a[$v]", 5, "variables"),
    ],
)
def test_targets_rejected_with_position(text: str, position: int, fragment: str) -> None:
    with pytest.raises(XPathSubsetError) as info:
        compile_target(text, NS)
    assert info.value.position == position, str(info.value)
    assert fragment in str(info.value)
    assert f"position {position}" in str(info.value)
    assert info.value.field == text.strip()


@pytest.mark.parametrize(
    ("target", "path", "canonical"),
    [
        ("//ObjectEvent", "bizLocation/id", "/{*}bizLocation/{*}id"),
        ("//ObjectEvent", "/bizLocation/id", "/{*}bizLocation/{*}id"),
        ("adiwaEvent", "/body/smartmeter-update/smart-meter-channel/@smart-meter-unit-number",
         "/{*}body/{*}smartmeter-update/{*}smart-meter-channel/@smart-meter-unit-number"),
        ("adiwaEvent", "/adiwaEvent/body/x/@n", "/{*}body/{*}x/@n"),
        ("/a/b", "/a/b/c", "/{*}c"),
        ("/a/b", "/a/c", "/{*}a/{*}c"),  # not the target's own steps: relative after all
        ("//ObjectEvent", "ns2:current", "/{urn:two}current"),
        ("//ObjectEvent", "//epc", "//{*}epc"),
        ("//ObjectEvent", "@type", "/@type"),
        ("//ObjectEvent", "#content", "#content"),
        ("//ObjectEvent", "a//b/@ns2:c", "/{*}a//{*}b/@{urn:two}c"),
    ],
)
def test_attribute_paths_normalised(target: str, path: str, canonical: str) -> None:
    t = compile_target(target, NS)
    assert compile_path(path, NS, t).canonical() == canonical


@pytest.mark.parametrize(
    ("path", "fragment"),
    [("a/*", "wildcard"), ("a[b]", "predicates"), ("a/text()", "function"),
     ("a//@b", "attribute step"), ("#other", "#content"), ("../a", "parent"),
     ("a/@*", "wildcard"), ("y:a", "not declared")],
)
def test_attribute_paths_rejected(path: str, fragment: str) -> None:
    with pytest.raises(XPathSubsetError) as info:
        compile_path(path, NS)
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    ("target", "tags", "expected"),
    [
        ("//b", ["a", "b"], True),
        ("//b", ["a", "b", "c"], False),
        ("/a/b", ["a", "b"], True),
        ("/a/b", ["x", "a", "b"], False),
        ("b", ["b"], True),
        ("b", ["a", "b"], False),
        ("//a//c", ["a", "b", "c"], True),
        ("//a/c", ["a", "b", "c"], False),
        ("//a/b//c", ["r", "a", "b", "x", "y", "c"], True),
        ("//epcis:E", ["{urn:epcglobal:epcis:xsd:1}E"], True),
        ("//epcis:E", ["{urn:other}E"], False),
        ("//E", ["{urn:other}E"], True),
    ],
)
def test_ancestor_paths(target: str, tags: list[str], expected: bool) -> None:
    assert compile_target(target, NS).matches_path(tags) is expected


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="/@[]='\"ab:*.()#|$ -", max_size=20))
def test_fuzz_only_value_or_error(text: str) -> None:
    for fn in (lambda: compile_target(text, NS), lambda: compile_path(text, NS)):
        with contextlib.suppress(SiftbusError):
            fn()


def test_abstract_targets_name_an_event_type() -> None:
    for text in ("#ObjectEvent", "//#EPCISEvent"):
        t = compile_target(text, NS)
        assert t.type_name == text.lstrip("/#") and t.steps == () and t.text == text
    assert compile_target("#A").key == compile_target("//#A").key == "#A"


def test_descendant_steps_do_not_backtrack() -> None:
    """``//a`` repeated against a deep chain of ``a``: exponential for a backtracking
    search (it was), polynomial by dynamic programming; and paths are at most 64 steps."""
    t = compile_target("//a" * 30 + "//b", NS)
    chain = ["a"] * 2000
    assert not t.matches_path(chain)
    assert t.matches_path([*chain, "b"])
    assert compile_target("/r//a/a//b", NS).matches_path(["r", "x", "a", "a", "y", "b"])
    assert not compile_target("/r//a/a//b", NS).matches_path(["r", "a", "x", "a", "b"])
    with pytest.raises(XPathSubsetError, match="more than 64 steps"):
        compile_path("a/" * 64 + "a", NS)
