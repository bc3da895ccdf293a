"""Bulk loading of subscription documents: the collector is frozen after a start-up load
(and only then, never for a document arriving while serving), left alone on refusal, and
the index it freezes holds no reference cycles (so frozen index objects are still freed
by reference counting)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from siftbus.errors import DuplicateSubscriptionError
from siftbus.xmlfilter import ContentFilter, Subscription, XmlEventFilter, to_xml


def _subs(n: int, start: int = 0) -> list[Subscription]:
    return [Subscription.build(("HTTP", f"http://r{i % 7}.example/"),
                               [ContentFilter.build("//ObjectEvent",
                                                    [("bizStep", "string-equals", f"s{i}"),
                                                     ("readPoint/id", "attribute-exists", [])])],
                               id=f"s{i}") for i in range(start, start + n)]


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()
    assert gc.isenabled()


def test_start_up_load_freezes_a_served_document_does_not(unfrozen: None) -> None:
    f = XmlEventFilter()
    served = to_xml(_subs(1_000, 2_000))
    f.subscribe_xml(served, default_method="HTTP", sender="http://x/")
    assert gc.get_freeze_count() == 0 and gc.isenabled()
    f.subscribe_xml(to_xml(_subs(3)), default_method="HTTP", sender="http://x/", freeze=True)
    assert gc.get_freeze_count() > 0 and gc.isenabled()
    gc.unfreeze()
    big = to_xml(_subs(1_000, 10))
    ids = f.subscribe_xml(big, default_method="HTTP", sender="http://x/", freeze=True)
    assert len(ids) == 1_000 and len(f) == 2_003
    assert gc.get_freeze_count() > 0 and gc.isenabled()
    out = f.publish(b"<ObjectEvent><bizStep>s500</bizStep><readPoint><id>r</id></readPoint>"
                    b"</ObjectEvent>")
    assert [n.subscriptions for n in out] == [("s500",)]


def test_refused_bulk_document_freezes_nothing(unfrozen: None) -> None:
    f = XmlEventFilter()
    f.subscribe_xml(to_xml(_subs(1, 999)), default_method="HTTP", sender="http://x/")
    big = to_xml(_subs(1_000))  # its last subscription is a duplicate of s999
    with pytest.raises(DuplicateSubscriptionError):
        f.subscribe_xml(big, default_method="HTTP", sender="http://x/", freeze=True)
    assert len(f) == 1 and gc.get_freeze_count() == 0 and gc.isenabled()


def test_index_has_no_reference_cycles() -> None:
    """Freezing is safe only because the index is acyclic: a loaded, compiled and emptied
    filter leaves nothing for the collector (everything went by reference counting)."""
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        f = XmlEventFilter(compile_min=1)
        f.subscribe_xml(to_xml(_subs(300)), default_method="HTTP", sender="http://x/")
        f.matcher.compile()
        for i in range(0, 300, 2):
            f.unsubscribe(f"s{i}")
        f.subscribe_xml(to_xml(_subs(5, 1_000)), default_method="HTTP", sender="http://x/")
        f.matcher.compile()
        del f
        assert gc.collect() == 0
    finally:
        if was:
            gc.enable()
