"""Streaming event cutting against a full parse of the same document.

``splitter.cut`` must yield every element whose name is a candidate event root, in end
order, with its true ancestor chain and its complete subtree, while clearing handled
elements so that the tree held in memory stays bounded by the open events. A small
message in memory is cut from its parsed tree instead: the same output as the streaming
way (``cut_stream``), errors included.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lxml import etree

from siftbus.errors import XmlInputError
from siftbus.xmlfilter.splitter import cut, cut_stream

NS = "urn:example:n"
NAMES = ["a", "b", "ev", f"{{{NS}}}ev", "w"]


@st.composite
def trees(draw: Any, depth: int = 0) -> etree._Element:
    el = etree.Element(draw(st.sampled_from(NAMES)), nsmap={"n": NS})
    if draw(st.booleans()):
        el.text = draw(st.sampled_from(["x", " ", "1"]))
    if depth < 4:
        for child in draw(st.lists(trees(depth + 1), max_size=4)):
            el.append(child)
            if draw(st.booleans()):
                child.tail = "t"
    return el


def _end_order(root: etree._Element) -> list[etree._Element]:
    out: list[etree._Element] = []

    def visit(e: etree._Element) -> None:
        for c in e:
            visit(c)
        out.append(e)

    visit(root)
    return out


@pytest.mark.parametrize("way", [cut, cut_stream], ids=["tree", "streaming"])
@settings(max_examples=200, deadline=None)
@given(root=trees(), exact=st.sets(st.sampled_from([f"{{{NS}}}ev", "b"])),
       local=st.sets(st.sampled_from(["ev", "w"])))
def test_cut_equals_full_parse(way: Any, root: etree._Element, exact: set[str],
                               local: set[str]) -> None:
    data = etree.tostring(root)
    full = etree.fromstring(data)

    def candidate(tag: str) -> bool:
        return tag in exact or etree.QName(tag).localname in local

    want = [(
        [a.tag for a in reversed(list(e.iterancestors()))] + [e.tag],
        etree.tostring(e, method="c14n", with_tail=False),
    ) for e in _end_order(full) if candidate(e.tag)]
    got = []
    for el, tags in way(data, exact, local):
        got.append((list(tags), etree.tostring(el, method="c14n", with_tail=False)))
    assert got == want


def test_memory_is_bounded_by_the_open_event() -> None:
    """Tens of thousands of events under wrappers: the tree in memory never holds the events
    handled before, only the wrappers, the current event and what the parser has read
    ahead (lxml parses one input buffer at a time), whatever the document's length."""

    def largest_tree(events: int) -> int:
        body = "".join(f"<ev><id>{i}</id><v>{i % 7}</v></ev>" for i in range(events))
        doc = f"<doc><hdr/><body><list>{body}</list><list>{body}</list></body></doc>"
        largest = n = 0
        for el, tags in cut(doc, {"ev"}, set()):
            assert tags == ["doc", "body", "list", "ev"]
            if n % 97 == 0:  # counting the tree is linear in it: sample the events
                largest = max(largest, sum(1 for _ in el.getroottree().getroot().iter()))
            n += 1
        assert n == 2 * events
        return largest

    small, large = largest_tree(2_000), largest_tree(40_000)  # 12,000 and 240,000 elements
    assert large <= 2 * small
    assert large < 240_000 // 10


def test_nested_candidate_keeps_its_inner_events() -> None:
    """An ancestor that may itself be an event is not cleared below: it is yielded whole."""
    doc = "<doc><list><ev>1</ev><ev>2</ev></list><list><ev>3</ev></list></doc>"
    seen = []
    for el, tags in cut(doc, {"ev", "list"}, set()):
        seen.append((tags[-1], len(el), el.text))
    assert seen == [("ev", 0, "1"), ("ev", 0, "2"), ("list", 2, None), ("ev", 0, "3"),
                    ("list", 1, None)]


def test_memory_is_bounded_when_most_of_the_document_is_not_events() -> None:
    """Elements no target names were never cleared: 200 MB of them ahead of the events
    were all held (issue 13). Between input chunks the completed ones are pruned, so when
    the events come the tree holds only what the last chunks added, from a stream as from
    a large message in memory."""
    import io

    filler = "".join(f"<other><a>{i}</a><b><c/></b></other>" for i in range(60_000))
    deep = "<w1><w2>" + filler + "</w2></w1>"
    doc = f"<doc>{filler}{deep}<list><ev>1</ev><ev>2</ev></list></doc>".encode()
    for source in (doc, io.BytesIO(doc)):
        seen = []
        for el, tags in cut(source, {"ev"}, set()):
            held = sum(1 for _ in el.getroottree().getroot().iter())
            seen.append((tags, el.text, held))
        assert [(t, x) for t, x, _ in seen] == [(["doc", "list", "ev"], "1"),
                                                 (["doc", "list", "ev"], "2")]
        # 480,000 filler elements went by; a chunk holds a few thousand at most
        assert max(h for _, _, h in seen) < 20_000


def test_pruning_keeps_open_candidates_whole() -> None:
    """An element that may become an event keeps its whole subtree however long it is,
    filler included, until it ends (its predicate may look at any of it)."""
    filler = "".join(f"<other><a>{i}</a></other>" for i in range(40_000))
    doc = f"<doc>{filler}<ev><first/>{filler}<last/></ev></doc>".encode()
    seen = [(list(t), len(e), e[0].tag, e[-1].tag) for e, t in cut(doc, {"ev"}, set())]
    assert seen == [(["doc", "ev"], 40_002, "first", "last")]


def _outcome(items: Any) -> tuple[list[tuple[list[str], bytes]], str | None]:
    """What a consumer sees: each element's chain and subtree as yielded, then the error."""
    got = []
    try:
        for el, tags in items:
            got.append((list(tags), etree.tostring(el, method="c14n", with_tail=False)))
    except XmlInputError as exc:
        return got, str(exc)
    return got, None


@settings(max_examples=150, deadline=None)
@given(root=trees(), exact=st.sets(st.sampled_from([f"{{{NS}}}ev", "b"])),
       local=st.sets(st.sampled_from(["ev", "w"])), damage=st.integers(0, 400),
       how=st.sampled_from(["none", "cut", "insert", "doctype"]))
def test_tree_way_equals_streaming_way(root: etree._Element, exact: set[str],
                                       local: set[str], damage: int, how: str) -> None:
    """Events nested in events, candidates at the root, and broken input (truncated, a
    stray '<', an entity-declaring DOCTYPE): the tree way yields what the streaming way
    yields, in the same order, and fails with the same error after the same events."""
    data = etree.tostring(root)
    at = damage % (len(data) + 1)
    if how == "cut":
        data = data[:at]
    elif how == "insert":
        data = data[:at] + b"<" + data[at:]
    elif how == "doctype":
        data = b'<!DOCTYPE a [<!ENTITY e "x">]>' + data
    assert _outcome(cut(data, exact, local)) == _outcome(cut_stream(data, exact, local))
