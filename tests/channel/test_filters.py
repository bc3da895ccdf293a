"""Filter objects, mapping filters, and how admin and proxy filters combine (truth
tables for AND_OP/OR_OP), plus a differential test of the channel's index-backed
routing against the literal semantics on random workloads."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from siftbus.channel import (
    AND_OP,
    OR_OP,
    STRUCTURED_EVENT,
    CallbackNotFound,
    ClientTypeError,
    ConstraintExp,
    ConstraintNotFound,
    EventChannel,
    EventChannelFactory,
    FilterNotFound,
    InvalidConstraint,
    InvalidGrammar,
    ObjectNotExist,
    StructuredEvent,
)
from siftbus.channel import qos as Q


@pytest.fixture
def factory() -> Iterator[EventChannelFactory]:
    f = EventChannelFactory(dispatch=False)
    yield f
    f.close()


def ev(x: int = 1, domain: str = "d", tname: str = "t") -> StructuredEvent:
    return StructuredEvent.of(domain, tname, "e", filterable_data={"x": x})


def test_filter_constraint_api(factory: EventChannelFactory) -> None:
    ff = factory.filter_factory
    with pytest.raises(InvalidGrammar):
        ff.create_filter("SQL92")
    f = ff.create_filter()
    assert f.constraint_grammar == "EXTENDED_TCL"
    infos = f.add_constraints([ConstraintExp((("d", "t"),), "$x > 5"), ([("a", "*")], "")])
    assert [i.constraint_id for i in infos] == [1, 2]
    assert not f.match_structured(ev(3)) and f.match_structured(ev(6))
    assert f.match_structured(ev(0, domain="a", tname="zz"))  # empty expression is TRUE
    with pytest.raises(InvalidConstraint) as info:
        f.add_constraints([([], "$x >"), ([], "$x > 1")])
    assert info.value.constraint.constraint_expr == "$x >"
    assert len(f.get_all_constraints()) == 2  # all or nothing
    f.modify_constraints([2], [{"constraint_expression": {"event_types": [["d", "t"]],
                                                          "constraint_expr": "$x < 2"},
                                "constraint_id": 1}])
    assert [i.constraint_id for i in f.get_all_constraints()] == [1]
    assert f.match_structured(ev(1)) and not f.match_structured(ev(6))
    with pytest.raises(ConstraintNotFound):
        f.get_constraints([7])
    with pytest.raises(ConstraintNotFound):
        f.modify_constraints([7], [])
    f.remove_all_constraints()
    assert not f.match_structured(ev(1))
    f.destroy()
    with pytest.raises(ObjectNotExist):
        f.add_constraints(["TRUE"])


@pytest.mark.parametrize("pattern, domain, expected", [
    ("*", "anything", True), ("", "x", True), ("%ALL", "y", True), ("co*ba", "corba", True),
    ("co*ba", "cobalt", False), ("c*x", "cx", True), ("c*x", "cyyx", True), ("c*y", "cyyx", False),
    ("corba*", "corbaloc", True), ("corba", "corbaloc", False), ("*loc", "corbaloc", True),
    ("a*b*c", "aXbYc", True), ("a*b*c", "aXcYb", False), ("x?", "x?", True), ("x?", "xa", False),
])
def test_event_type_wildcards(factory: EventChannelFactory, pattern: str, domain: str,
                              expected: bool) -> None:
    f = factory.filter_factory.create_filter()
    f.add_constraints([([(pattern, "*")], "")])
    assert f.match_structured(ev(domain=domain)) is expected


def test_callbacks(factory: EventChannelFactory) -> None:
    seen: list[Any] = []

    class Sub:
        def subscription_change(self, added: Any, removed: Any) -> None:
            seen.append((added, removed))

    f = factory.filter_factory.create_filter()
    cb = f.attach_callback(Sub())
    f.add_constraints([([("A", "B")], "")])
    assert seen == [([("A", "B")], [])]
    f.remove_all_constraints()
    assert seen[-1] == ([], [("A", "B")])
    assert f.get_callbacks() == [cb]
    f.detach_callback(cb)
    with pytest.raises(CallbackNotFound):
        f.detach_callback(cb)


def test_filter_admin_operations(factory: EventChannelFactory) -> None:
    ch = factory.create_channel()[0]
    ca = ch.default_consumer_admin
    f = factory.filter_factory.create_filter()
    fid = ca.add_filter(f)
    assert ca.get_filter(fid) is f and ca.get_all_filters() == [fid]
    ca.remove_filter(fid)
    with pytest.raises(FilterNotFound):
        ca.remove_filter(fid)
    ca.add_filter(f)
    ca.remove_all_filters()
    assert ca.get_all_filters() == []
    with pytest.raises(ClientTypeError):
        ca.add_filter(factory.filter_factory.create_mapping_filter(default_value=0))


def test_destroyed_filter_is_detached(factory: EventChannelFactory) -> None:
    ch = factory.create_channel()[0]
    pull, _ = ch.default_consumer_admin.obtain_notification_pull_supplier(STRUCTURED_EVENT)
    pull.connect_structured_pull_consumer()
    f = factory.filter_factory.create_filter()
    f.add_constraints(["$x == 99"])
    pull.add_filter(f)
    push(ch, ev(1))
    assert pull.try_pull_structured_event() == (None, False)
    f.destroy()
    assert pull.get_all_filters() == []
    push(ch, ev(2))
    assert pull.try_pull_structured_event()[1]


def push(ch: EventChannel, *events: StructuredEvent) -> None:
    sa = ch.default_supplier_admin
    if not sa.push_consumers:
        p, _ = sa.obtain_notification_push_consumer("SEQUENCE_EVENT")
        p.connect_sequence_push_supplier()
    p = sa.get_proxy_consumer(sa.push_consumers[0])
    p.push_structured_events(list(events))


MATCH, NOMATCH, NONE = "match", "nomatch", "none"


def _attach(factory: EventChannelFactory, node: Any, state: str) -> None:
    if state == NONE:
        return
    f = factory.filter_factory.create_filter()
    f.add_constraints(["$x == 1" if state == MATCH else "$x == 2"])
    node.add_filter(f)


@pytest.mark.parametrize("op", [AND_OP, OR_OP])
@pytest.mark.parametrize("admin_state, proxy_state", list(itertools.product(
    [MATCH, NOMATCH, NONE], repeat=2)))
def test_consumer_side_truth_table(factory: EventChannelFactory, op: str, admin_state: str,
                                   proxy_state: str) -> None:
    ch = factory.create_channel()[0]
    ca, _ = ch.new_for_consumers(op)
    pull, _ = ca.obtain_notification_pull_supplier(STRUCTURED_EVENT)
    pull.connect_structured_pull_consumer()
    _attach(factory, ca, admin_state)
    _attach(factory, pull, proxy_state)
    push(ch, ev(1))
    a, p = admin_state != NOMATCH, proxy_state != NOMATCH  # no filters: everything passes
    expected = (a and p) if op == AND_OP else (a or p)
    assert pull.try_pull_structured_event()[1] is expected


@pytest.mark.parametrize("op", [AND_OP, OR_OP])
@pytest.mark.parametrize("admin_state, proxy_state", list(itertools.product(
    [MATCH, NOMATCH, NONE], repeat=2)))
def test_supplier_side_truth_table(factory: EventChannelFactory, op: str, admin_state: str,
                                   proxy_state: str) -> None:
    ch = factory.create_channel()[0]
    sa, _ = ch.new_for_suppliers(op)
    sup, _ = sa.obtain_notification_push_consumer(STRUCTURED_EVENT)
    sup.connect_structured_push_supplier()
    pull, _ = ch.default_consumer_admin.obtain_notification_pull_supplier(STRUCTURED_EVENT)
    pull.connect_structured_pull_consumer()
    _attach(factory, sa, admin_state)
    _attach(factory, sup, proxy_state)
    sup.push_structured_event(ev(1))
    a, p = admin_state != NOMATCH, proxy_state != NOMATCH
    expected = (a and p) if op == AND_OP else (a or p)
    assert pull.try_pull_structured_event()[1] is expected


def test_four_stages_in_series(factory: EventChannelFactory) -> None:
    """Blocked at any of the four stages (all AND_OP) means not delivered."""
    for blocked in range(4):
        ch = factory.create_channel()[0]
        sa, ca = ch.default_supplier_admin, ch.default_consumer_admin
        sup, _ = sa.obtain_notification_push_consumer(STRUCTURED_EVENT)
        sup.connect_structured_push_supplier()
        pull, _ = ca.obtain_notification_pull_supplier(STRUCTURED_EVENT)
        pull.connect_structured_pull_consumer()
        for i, node in enumerate([sup, sa, ca, pull]):
            _attach(factory, node, NOMATCH if i == blocked else MATCH)
        sup.push_structured_event(ev(1))
        assert pull.try_pull_structured_event() == (None, False)


def test_priority_mapping_filter(factory: EventChannelFactory) -> None:
    ch = factory.create_channel(initial_qos={Q.ORDER_POLICY: Q.PRIORITY_ORDER})[0]
    pull, _ = ch.default_consumer_admin.obtain_notification_pull_supplier("SEQUENCE_EVENT")
    pull.connect_sequence_pull_consumer()
    mf = factory.filter_factory.create_mapping_filter(default_value=-5)
    mf.add_mapping_constraints([(ConstraintExp((), "$x > 10"), 100)])
    assert mf.match_structured(ev(20)) == (True, 100)
    assert mf.match_structured(ev(1)) == (False, -5)
    pull.priority_filter = mf
    with_header = ev(2).with_header("Priority", 50)
    push(ch, ev(1), ev(20), with_header)
    got = pull.pull_structured_events(10)
    # 20 -> 100 (mapped), header Priority 50 kept, no match and no header -> default -5
    assert [e.filterable_data[0][1] for e in got] == [20, 2, 1]


def test_lifetime_mapping_filter_expires(factory: EventChannelFactory) -> None:
    import time

    ch = factory.create_channel()[0]
    pull, _ = ch.default_consumer_admin.obtain_notification_pull_supplier("SEQUENCE_EVENT")
    pull.connect_sequence_pull_consumer()
    mf = factory.filter_factory.create_mapping_filter(default_value=0)
    mf.add_mapping_constraints([("$x == 1", 500_000)])  # 50 ms
    ch.default_consumer_admin.lifetime_filter = mf
    push(ch, ev(1), ev(2))
    time.sleep(0.1)
    assert [e.filterable_data[0][1] for e in pull.pull_structured_events(10)] == [2]
    assert ch.stats().expired == 1


# -- differential: routing through the index == the literal semantics -------------------

CONSTRAINTS = ["$x == 1", "$x > 2", "$x < 3 and $y == 'a'", "$y != 'a'", "exist $y",
               "$x == 1 or $y == 'b'", "'a' ~ $y", "", "$type_name == 't2'", "$x >= 2.5"]


@st.composite
def workloads(draw: st.DrawFn) -> dict[str, Any]:
    admins = draw(st.lists(st.sampled_from([AND_OP, OR_OP]), min_size=1, max_size=3))
    nodes = []  # (admin index, proxy index or None, list of filter indices)
    n_filters = draw(st.integers(1, 5))
    filters = [draw(st.lists(st.tuples(st.sampled_from([(), (("d", "t"),), (("*", "t2"),),
                                                         (("d*", "*"),)]),
                                       st.sampled_from(CONSTRAINTS)), max_size=3))
               for _ in range(n_filters)]
    for ai in range(len(admins)):
        nodes.append((ai, None, draw(st.lists(st.integers(0, n_filters - 1), max_size=2))))
        for pi in range(draw(st.integers(0, 3))):
            nodes.append((ai, pi, draw(st.lists(st.integers(0, n_filters - 1), max_size=2))))
    events = draw(st.lists(st.builds(
        lambda x, y, t: StructuredEvent.of("d", t, "e", filterable_data={
            **({"x": x} if x is not None else {}), **({"y": y} if y is not None else {})}),
        st.sampled_from([None, 0, 1, 2, 3, 2.5]), st.sampled_from([None, "a", "b", 1]),
        st.sampled_from(["t", "t2"])), min_size=1, max_size=6))
    return {"admins": admins, "nodes": nodes, "filters": filters, "events": events}


@settings(max_examples=60, deadline=None)
@given(workloads())
def test_routing_equals_literal_semantics(w: dict[str, Any]) -> None:
    with EventChannelFactory(dispatch=False) as factory:
        ch = factory.create_channel()[0]
        filters = []
        for cons in w["filters"]:
            f = factory.filter_factory.create_filter()
            if cons:
                f.add_constraints([(list(t), c) for t, c in cons])
            filters.append(f)
        admins = [ch.new_for_consumers(op)[0] for op in w["admins"]]
        proxies: dict[tuple[int, int], Any] = {}
        for ai, pi, fis in w["nodes"]:
            if pi is None:
                node = admins[ai]
            else:
                node = admins[ai].obtain_notification_pull_supplier(STRUCTURED_EVENT)[0]
                node.connect_structured_pull_consumer()
                proxies[(ai, pi)] = node
            for fi in fis:
                node.add_filter(filters[fi])
        for e in w["events"]:
            push(ch, e)

            def passes(node: Any, e: StructuredEvent = e) -> bool:
                fs = [node.get_filter(i) for i in node.get_all_filters()]
                return not fs or any(f.match_structured(e) for f in fs)

            for (ai, _), p in proxies.items():
                a, pp = passes(admins[ai]), passes(p)
                want = (a and pp) if w["admins"][ai] == AND_OP else (a or pp)
                got = p.try_pull_structured_event()
                assert got[1] is want
                assert p.try_pull_structured_event()[1] is False


def test_proxy_keeps_its_other_filter_when_one_is_removed(factory: EventChannelFactory) -> None:
    """A proxy with two filters that loses one still filters by the other (it used to
    pass everything, as if it had none)."""
    ch = factory.create_channel()[0]
    pull, _ = ch.default_consumer_admin.obtain_notification_pull_supplier(STRUCTURED_EVENT)
    pull.connect_structured_pull_consumer()
    one, two = factory.filter_factory.create_filter(), factory.filter_factory.create_filter()
    one.add_constraints(["$x == 1"])
    two.add_constraints(["$x == 2"])
    pull.add_filter(one)
    pull.remove_filter(pull.add_filter(two))
    push(ch, ev(1), ev(2), ev(3))
    got = pull.try_pull_structured_event()[0]
    assert got is not None and got.filterable_data[0][1] == 1
    assert pull.try_pull_structured_event() == (None, False)


@st.composite
def edits(draw: st.DrawFn) -> dict[str, Any]:
    """Consumer admins and proxies, filters, and a random program of attach / detach /
    detach-all / destroy-filter / push steps."""
    admins = draw(st.lists(st.sampled_from([AND_OP, OR_OP]), min_size=1, max_size=2))
    proxies = draw(st.lists(st.integers(0, len(admins) - 1), min_size=1, max_size=3))
    n_filters = draw(st.integers(1, 4))
    filters = [draw(st.lists(st.sampled_from(CONSTRAINTS), min_size=1, max_size=2))
               for _ in range(n_filters)]
    n_nodes = len(admins) + len(proxies)
    step = st.one_of(
        st.tuples(st.just("attach"), st.integers(0, n_nodes - 1),
                  st.integers(0, n_filters - 1)),
        st.tuples(st.just("detach"), st.integers(0, n_nodes - 1), st.integers(0, 3)),
        st.tuples(st.just("detach_all"), st.integers(0, n_nodes - 1), st.just(0)),
        st.tuples(st.just("destroy"), st.just(0), st.integers(0, n_filters - 1)),
        st.tuples(st.just("push"), st.sampled_from([None, 0, 1, 2, 3]),
                  st.sampled_from([None, "a", "b"])))
    return {"admins": admins, "proxies": proxies, "filters": filters,
            "steps": draw(st.lists(step, min_size=1, max_size=25))}


@settings(max_examples=300, deadline=None)
@given(edits())
def test_routing_equals_literal_semantics_with_interleaved_edits(w: dict[str, Any]) -> None:
    with EventChannelFactory(dispatch=False) as factory:
        ch = factory.create_channel()[0]
        admins = [ch.new_for_consumers(op)[0] for op in w["admins"]]
        proxies = []
        for ai in w["proxies"]:
            p = admins[ai].obtain_notification_pull_supplier(STRUCTURED_EVENT)[0]
            p.connect_structured_pull_consumer()
            proxies.append((ai, p))
        nodes: list[Any] = [*admins, *(p for _, p in proxies)]
        filters = []
        for cons in w["filters"]:
            f = factory.filter_factory.create_filter()
            f.add_constraints(cons)
            filters.append(f)

        def passes(node: Any, e: StructuredEvent) -> bool:
            fs = [node.get_filter(i) for i in node.get_all_filters()]
            return not fs or any(f.match_structured(e) for f in fs)

        for step in w["steps"]:
            kind = step[0]
            if kind == "attach" and not filters[step[2]].destroyed:
                nodes[step[1]].add_filter(filters[step[2]])
            elif kind == "detach":
                ids = nodes[step[1]].get_all_filters()
                if ids:
                    nodes[step[1]].remove_filter(ids[step[2] % len(ids)])
            elif kind == "detach_all":
                nodes[step[1]].remove_all_filters()
            elif kind == "destroy":
                filters[step[2]].destroy()
            elif kind == "push":
                x, y = step[1], step[2]
                e = StructuredEvent.of("d", "t", "e", filterable_data={
                    **({"x": x} if x is not None else {}), **({"y": y} if y is not None else {})})
                push(ch, e)
                for ai, p in proxies:
                    a, pp = passes(admins[ai], e), passes(p, e)
                    want = (a and pp) if w["admins"][ai] == AND_OP else (a or pp)
                    assert p.try_pull_structured_event()[1] is want
                    assert p.try_pull_structured_event()[1] is False
