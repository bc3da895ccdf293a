"""Federated channels: a channel spanning 3-5 real brokers (in-process servers on
127.0.0.1) delivers to each consumer exactly what one channel with the same filters
delivers, with a broker (and its member, on a durable store) restarted mid-way.

The reference is a single in-memory channel with the same consumer admins, proxies and
filters, fed the same events in the same order; consumers are compared by the multiset
of events each one pulls.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from siftbus.broker.node import BrokerNode
from siftbus.broker.server import BrokerServer
from siftbus.channel import STRUCTURED_EVENT, EventChannel, EventChannelFactory, StructuredEvent
from siftbus.channel import qos as Q
from siftbus.channel.federation import FederationMember
from siftbus.channel.federation_type import FederatedType, interest
from siftbus.client import Client

FTYPE = FederatedType("Fed", ["a", "b", "c"])
SCHEMA = FTYPE.schema()
PERSISTENT = {Q.CONNECTION_RELIABILITY: Q.PERSISTENT, Q.EVENT_RELIABILITY: Q.PERSISTENT,
              Q.ORDER_POLICY: Q.FIFO_ORDER}

FILTERS: list[tuple[str, list[tuple[str, str]]]] = [
    ("", []), ("$a > 4", []), ("$a == 3 and $b == 'x'", []), ("$b != 'y'", []),
    ("exist $c", []), ("not exist $c", []), ("$c < 0.5", []),
    ("$a + 1 > 5", []),             # does not compile: the catch-all profile
    ("$b ~ 'x'", []),               # does not compile either
    ("$d == 1", []),                # a field the network type does not carry
    ("$a > 1000", []),              # huge ints travel unkeyed
    ("$a < 5", [("D", "T*")]),      # event types narrow it
]


# ---------------------------------------------------------------------------------------
# the workload


@st.composite
def workloads(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.integers(3, 5))
    parents = [draw(st.integers(0, i - 1)) for i in range(1, n)]
    filt = st.none() | st.integers(0, len(FILTERS) - 1)
    consumers = draw(st.lists(st.tuples(st.integers(0, n - 1), st.sampled_from(
        [Q.AND_OP, Q.OR_OP]), filt, filt), min_size=1, max_size=5))
    suppliers = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=3))
    a = st.integers(0, 9) | st.just(2**60)
    event = st.tuples(st.integers(0, len(suppliers) - 1), st.sampled_from(["D", "E"]),
                      st.sampled_from(["T1", "U"]), a, st.sampled_from(["x", "y", "z"]),
                      st.none() | st.floats(0, 1, allow_nan=False))
    events = draw(st.lists(event, max_size=16))
    return {"n": n, "parents": parents, "consumers": consumers, "suppliers": suppliers,
            "events": events, "cut": draw(st.integers(0, len(events))),
            "restart": draw(st.integers(0, n - 1))}


def make_event(k: int, spec: tuple[Any, ...]) -> StructuredEvent:
    _, d, t, a, b, c = spec
    fields: dict[str, Any] = {"k": k, "a": a, "b": b}
    if c is not None:
        fields["c"] = c
    return StructuredEvent.of(d, t, "e", filterable_data=fields)


def add_consumers(channel: EventChannel, factory: EventChannelFactory,
                  specs: list[tuple[int, str, int | None, int | None]]) -> list[tuple[int, int]]:
    """The consumers on ``channel``: (admin id, proxy id) each, a pull proxy per admin."""
    out = []
    for _, op, admin_f, proxy_f in specs:
        admin, aid = channel.new_for_consumers(op)
        proxy, pid = admin.obtain_notification_pull_supplier(STRUCTURED_EVENT)
        for node, which in ((admin, admin_f), (proxy, proxy_f)):
            if which is not None:
                f = factory.filter_factory.create_filter()
                text, types = FILTERS[which]
                f.add_constraints([(types, text)])
                node.add_filter(f)
        proxy.connect_structured_pull_consumer()  # type: ignore[attr-defined]
        out.append((aid, pid))
    return out


def drain(channel: EventChannel, ids: tuple[int, int]) -> list[int]:
    proxy: Any = channel.get_consumeradmin(ids[0]).get_proxy_supplier(ids[1])
    got = []
    while True:
        e, has = proxy.try_pull_structured_event()
        if not has:
            return sorted(got)
        got.append(dict(e.filterable_data)["k"])


def reference(w: dict[str, Any]) -> list[list[int]]:
    factory = EventChannelFactory()
    try:
        ch, _ = factory.create_channel({Q.ORDER_POLICY: Q.FIFO_ORDER})
        cons = add_consumers(ch, factory, w["consumers"])
        sups = []
        for _ in w["suppliers"]:
            p, _ = ch.default_supplier_admin.obtain_notification_push_consumer(STRUCTURED_EVENT)
            p.connect_structured_push_supplier()  # type: ignore[attr-defined]
            sups.append(p)
        for k, spec in enumerate(w["events"]):
            sups[spec[0]].push_structured_event(make_event(k, spec))
        return [drain(ch, c) for c in cons]
    finally:
        factory.close()


# ---------------------------------------------------------------------------------------
# the federated channel


class Site:
    """One broker and the federated channel's member beside it."""

    def __init__(self, name: str, store: Path) -> None:
        self.name = name
        self.store = store
        self.server: BrokerServer | None = None
        self.out_factory = EventChannelFactory()
        self.outbound, _ = self.out_factory.create_channel({Q.ORDER_POLICY: Q.FIFO_ORDER})
        self.in_factory = EventChannelFactory(str(store))
        self.inbound, self.inbound_id = self.in_factory.create_channel(PERSISTENT)
        self.member: FederationMember | None = None

    async def start_member(self) -> None:
        assert self.server is not None
        self.member = FederationMember(FTYPE, self.outbound, self.inbound, self.name)
        client = await Client.connect("127.0.0.1", self.server.port, name=f"fed-{self.name}")
        await self.member.attach(client)

    async def restart_member(self) -> None:
        """The member's process again: the durable inbound channel back from its store."""
        assert self.member is not None
        await self.member.close()
        self.in_factory.close()
        self.in_factory = EventChannelFactory(str(self.store))
        self.inbound = self.in_factory.get_event_channel(self.inbound_id)
        await self.start_member()

    async def close(self) -> None:
        if self.member is not None:
            await self.member.close()
        self.in_factory.close()
        self.out_factory.close()


def node(name: str, nbrs: tuple[str, ...], edges: list[tuple[str, str]]) -> BrokerNode:
    return BrokerNode(name, SCHEMA, neighbours=nbrs, edges=edges)


async def settle(servers: list[BrokerServer], timeout: float = 10.0) -> None:
    """Until the brokers' message counts stay unchanged for 0.1 s (nothing in flight;
    a restarted broker counts from 0, so in and out totals need not agree)."""
    prev = None
    quiet = 0
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        snap = tuple((s.node.stats().messages_in, s.node.stats().messages_out)
                     for s in servers)
        quiet = quiet + 1 if snap == prev else 0
        if quiet >= 3:
            return
        prev = snap
        await asyncio.sleep(0.03)
    raise AssertionError("network did not settle")


async def until(pred: Callable[[], bool], timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while not pred() and time.monotonic() < end:
        await asyncio.sleep(0.01)


async def federated(w: dict[str, Any], tmp: Path, expected: list[list[int]]) -> list[list[int]]:
    names = [f"B{i + 1}" for i in range(w["n"])]
    edges = [(names[p], names[i + 1]) for i, p in enumerate(w["parents"])]
    nbrs = {b: tuple(x for e in edges if b in e for x in e if x != b) for b in names}
    sites = {b: Site(b, tmp / f"{b}.db") for b in names}
    try:
        for i, b in enumerate(names):
            dial = {x: ("127.0.0.1", sites[x].server.port) for x in nbrs[b]  # type: ignore[union-attr]
                    if names.index(x) < i}
            srv = BrokerServer(node(b, nbrs[b], edges), dial=dial)
            await srv.start()
            sites[b].server = srv
        for s in sites.values():
            assert s.server is not None
            await s.server.wait_neighbours(10)
            await s.start_member()
        # consumers at their brokers' inbound channels; the members subscribe their interest
        cons = []
        for spec in w["consumers"]:
            site = sites[names[spec[0]]]
            cons.append((site, add_consumers(site.inbound, site.in_factory, [spec])[0]))
        for s in sites.values():
            assert s.member is not None
            await s.member.refresh()
        servers = [s.server for s in sites.values() if s.server is not None]
        await settle(servers)
        sups = []
        for j in w["suppliers"]:
            site = sites[names[j]]
            p, _ = site.outbound.default_supplier_admin.obtain_notification_push_consumer(
                STRUCTURED_EVENT)
            p.connect_structured_push_supplier()  # type: ignore[attr-defined]
            sups.append(p)

        def queued() -> list[int]:
            return [site.inbound.get_consumeradmin(aid).get_proxy_supplier(pid).queue_length
                    for site, (aid, pid) in cons]

        async def publish(lo: int, hi: int) -> None:
            for k in range(lo, hi):
                spec = w["events"][k]
                sups[spec[0]].push_structured_event(make_event(k, spec))
            want = [sum(1 for x in exp if x < hi) for exp in expected]
            await until(lambda: all(q >= n for q, n in zip(queued(), want, strict=True)))
            await settle([s.server for s in sites.values() if s.server is not None])
            await asyncio.sleep(0.05)

        await publish(0, w["cut"])
        # restart one broker (and its member, from the store) while nothing is in flight
        site = sites[names[w["restart"]]]
        assert site.server is not None
        await site.server.close()
        dial = {x: ("127.0.0.1", sites[x].server.port) for x in nbrs[site.name]}  # type: ignore[union-attr]
        site.server = BrokerServer(node(site.name, nbrs[site.name], edges), dial=dial)
        await site.server.start()
        await site.server.wait_neighbours(10)
        await site.restart_member()
        cons = [(sites[s.name], ids) for s, ids in cons]
        await settle([s.server for s in sites.values() if s.server is not None])
        await publish(w["cut"], len(w["events"]))
        return [drain(s.inbound, ids) for s, ids in cons]
    finally:
        for s in sites.values():
            await s.close()
            if s.server is not None:
                await s.server.close()


@settings(max_examples=8, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.data_too_large])
@given(workloads())
def test_a_federated_channel_delivers_what_one_channel_delivers(
        tmp_path_factory: Any, w: dict[str, Any]) -> None:
    expected = reference(w)
    got = asyncio.run(federated(w, tmp_path_factory.mktemp("fed"), expected))
    assert [Counter(g) for g in got] == [Counter(e) for e in expected]


# ---------------------------------------------------------------------------------------
# the interest a member forwards


def test_the_interest_is_compiled_profiles_or_the_catch_all() -> None:
    factory = EventChannelFactory()
    try:
        ch, _ = factory.create_channel()

        def interest_of(specs: list[tuple[int, str, int | None, int | None]]) -> set[str]:
            for aid in ch.get_all_consumeradmins():
                if aid != 0:
                    ch.get_consumeradmin(aid).destroy()
            add_consumers(ch, factory, specs)
            nodes = [(a.op, a, p) for a in (ch.get_consumeradmin(i)
                                             for i in ch.get_all_consumeradmins())
                     for p in a.proxies()]
            return {p.id.split(".", 2)[-1] if "." in p.id else p.id
                    for p in interest(FTYPE, "m.", nodes).values()}

        # a compiled proxy filter: its profile(s) and the unkeyed profile
        assert interest_of([(0, Q.AND_OP, None, 1)]) == {"0.0", "unkeyed"}
        # AND_OP: a proxy filter that does not compile falls back to the admin's
        assert interest_of([(0, Q.AND_OP, 1, 7)]) == {"0.0", "unkeyed"}
        # nothing compiles, or OR_OP with a side without filters: everything
        assert interest_of([(0, Q.AND_OP, 7, 8)]) == {"all"}
        assert interest_of([(0, Q.OR_OP, None, 1)]) == {"all"}
        assert interest_of([(0, Q.AND_OP, None, 9)]) == {"all"}
    finally:
        factory.close()


# ---------------------------------------------------------------------------------------
# QoS at the consumer's broker, and a member that watches for new consumers


async def _qos_case(federate: bool) -> list[int]:
    """Priorities pulled by a consumer whose queue keeps 3 events (the lowest priority
    discarded), events pushed at another broker (or, as the reference, into one
    channel)."""
    qos = {Q.ORDER_POLICY: Q.PRIORITY_ORDER, Q.DISCARD_POLICY: Q.PRIORITY_ORDER,
           Q.MAX_EVENTS_PER_CONSUMER: 3}
    factory = EventChannelFactory()
    servers: list[BrokerServer] = []
    members: list[FederationMember] = []
    try:
        if federate:
            edges = [("A", "B")]
            a = BrokerServer(node("A", ("B",), edges))
            await a.start()
            b = BrokerServer(node("B", ("A",), edges), dial={"A": ("127.0.0.1", a.port)})
            await b.start()
            servers = [a, b]
            for s in servers:
                await s.wait_neighbours(10)
            for s in servers:
                out, _ = factory.create_channel()
                inb, _ = factory.create_channel(qos)
                m = FederationMember(FTYPE, out, inb, s.node.name)
                await m.attach(await Client.connect("127.0.0.1", s.port, name="fed"),
                               watch=0.05)
                members.append(m)
            supply_into, consume_from = members[0].outbound, members[1].inbound
        else:
            ch, _ = factory.create_channel(qos)
            supply_into = consume_from = ch
        # the consumer comes after the member attached: the watch subscribes for it
        proxy: Any
        proxy, _ = consume_from.default_consumer_admin.obtain_notification_pull_supplier(
            STRUCTURED_EVENT)
        proxy.connect_structured_pull_consumer()
        if federate:
            await until(lambda: servers[0].node.stats().table_size > 0)
            await settle(servers)
        sup: Any
        sup, _ = supply_into.default_supplier_admin.obtain_notification_push_consumer(
            STRUCTURED_EVENT)
        sup.connect_structured_push_supplier()
        for k, prio in enumerate([1, 5, 3, 2]):
            sup.push_structured_event(StructuredEvent.of(
                "D", "T1", "e", variable_header={"Priority": prio},
                filterable_data={"k": k, "a": k}))
        await until(lambda: proxy.queue_length >= 3)
        await asyncio.sleep(0.1)
        got = []
        while True:
            e, has = proxy.try_pull_structured_event()
            if not has:
                return got
            got.append(e.header_value("Priority"))
    finally:
        for m in members:
            await m.close()
        factory.close()
        for s in servers:
            await s.close()


def test_qos_applies_at_the_consumers_broker_and_watch_subscribes_new_consumers() -> None:
    expected = asyncio.run(_qos_case(False))
    assert expected == [5, 3, 2]
    assert asyncio.run(_qos_case(True)) == expected
