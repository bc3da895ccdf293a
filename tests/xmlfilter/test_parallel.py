"""Worker processes sharded by message: the same notifications as one process, in order,
with subscriptions changing between messages, errors where they belong, nothing left
running."""

from __future__ import annotations

from typing import Any

import psutil
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from siftbus.errors import XmlInputError
from siftbus.xmlfilter import ContentFilter, Subscription, XmlEventFilter
from siftbus.xmlfilter.parallel import ParallelFilter
from xml_strategies import epcis_documents, subscriptions


def single(f: XmlEventFilter, msgs: list[bytes]) -> list[tuple[int, list[Any]]]:
    out = []
    for m in msgs:
        rs = list(f.iter_results(m))
        out.append((len(rs), [n for r in rs for n in r.notifications]))
    return out


@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(subs=subscriptions(), msgs=st.lists(epcis_documents(), min_size=1, max_size=6),
       workers=st.sampled_from([1, 2, 3]))
def test_workers_give_what_one_process_gives(subs: list[Subscription], msgs: list[bytes],
                                              workers: int) -> None:
    half = len(subs) // 2
    one = XmlEventFilter()
    many = XmlEventFilter()
    for s in subs[:half]:
        one.subscribe(s)
        many.subscribe(s)
    with ParallelFilter(many, workers) as pf:
        assert list(pf.publish_many(msgs)) == single(one, msgs)
        for s in subs[half:]:  # changes reach every worker before the next messages
            one.subscribe(s)
            pf.subscribe(s)
        if subs:
            one.unsubscribe(subs[0].id)
            pf.unsubscribe(subs[0].id)
        assert list(pf.publish_many(msgs)) == single(one, msgs)


def test_a_bad_message_raises_in_order_and_the_workers_go_on() -> None:
    f = XmlEventFilter()
    f.subscribe(Subscription.build(("HTTP", "http://r/"), [ContentFilter.build("//e")]))
    good = b"<r><e/><e/></r>"
    with ParallelFilter(f, 2) as pf:
        procs = [psutil.Process(p.pid) for p in pf._procs]
        results = pf.publish_many([good, b"<r><e></r>", good, good])
        assert len(next(results)[1]) == 2
        with pytest.raises(XmlInputError, match="line 1"):
            next(results)
        assert [len(n) for _, n in pf.publish_many([good] * 5)] == [2] * 5
        pf.define_type("E", ["//e"])
        pf.subscribe(Subscription.build(("HTTP", "http://t/"), [ContentFilter.build("#E")]))
        assert [len(n[0].subscriptions) for _, n in pf.publish_many([good])] == [2]
    for p in procs:  # nothing left running
        assert not p.is_running() or p.status() == psutil.STATUS_ZOMBIE


def test_large_messages_and_results_do_not_deadlock() -> None:
    """Messages and results far larger than a pipe's buffer, several workers."""
    f = XmlEventFilter()
    f.subscribe(Subscription.build(("HTTP", "http://r/"), [ContentFilter.build("//e")]))
    big = b"<r>" + b"<e>" + b"x" * 100 + b"</e>" * 1 + b"<e>y</e>" * 20_000 + b"</r>"
    with ParallelFilter(f, 2) as pf:
        out = list(pf.publish_many([big] * 5))
    assert [(n, len(notes)) for n, notes in out] == [(20_001, 20_001)] * 5
