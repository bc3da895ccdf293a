"""Retained state on real brokers on 127.0.0.1 (issue 20, item 3): late subscribers
across a line of brokers for every protocol, later changes, expiry by the brokers'
clocks, retained notifications outliving their publisher's connection, random
operations against the oracle, and bad requests answered with an error while the broker
keeps serving."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.servers import settle, start_network
from broker_strategies import SCHEMA
from siftbus.broker.config import parse_network
from siftbus.broker.node import BrokerNode
from siftbus.broker.retained import RetainedLimits
from siftbus.broker.server import BrokerServer
from siftbus.client import Client
from siftbus.client.retained import RetainedSubscription
from siftbus.errors import ConfigError, RemoteError
from siftbus.lang.profile import parse_profile
from siftbus.temporal import (
    ChangeKind,
    PersistentNotification,
    Reason,
    ReferenceTemporal,
    Semantics,
    TemporalFilter,
)
from siftbus.wire.frames import MsgType

LINE = (["B1", "B2", "B3"], [("B1", "B2"), ("B2", "B3")])


async def close(servers: dict[str, BrokerServer], clients: list[Client]) -> None:
    for c in clients:
        await c.close()
    for s in servers.values():
        await s.close()


@pytest.mark.parametrize("protocol", ["forwarding", "rendezvous", "flooding"])
async def test_late_subscriber_then_changes_across_three_brokers(protocol: str) -> None:
    servers = await start_network(*LINE, protocol,
                                  rendezvous={"T": "B2", "U": "B2"}
                                  if protocol == "rendezvous" else None)
    pub = await Client.connect(port=servers["B1"].port, name="pub")
    sub = await Client.connect(port=servers["B3"].port, name="sub")
    try:
        await pub.retain("T(a in [1, 3])", id="low")
        await pub.retain("T(a in [5, 7])", id="high")
        await pub.retain("T(a = 2)", id="short", ttl=0.6)
        await pub.retain("T(a = 2)", id="later", start=pub_time() + 3600)
        await pub.retain("U(x = 1)", id="other")
        s = await sub.subscribe_retained("T(a in [0, 2])", "overlaps")
        # complete on return: every valid notification it selects, from two hops away
        assert [n.id for n in s.items()] == ["B1/pub/low", "B1/pub/short"]
        inside = await sub.subscribe_retained("T(a in [0, 4])", Semantics.COVERED_BY)
        assert [n.id for n in inside.items()] == ["B1/pub/low", "B1/pub/short"]
        over = await sub.subscribe_retained("T(a = 6)", "covers")
        assert [n.id for n in over.items()] == ["B1/pub/high"]
        for q in (s, inside, over):
            drain(q)
        # later changes reach it: publish, update, withdraw, expiry
        await pub.retain("T(a = 0)", id="new")
        for q in (s, inside):
            ch = await q.get(timeout=5)
            assert (ch.kind, ch.notification.id, ch.reason) == \
                (ChangeKind.ADD, "B1/pub/new", Reason.PUBLISHED)
        await pub.update_retained("low", "T(a in [1, 4])")
        ch = await s.get(timeout=5)
        assert (ch.kind, ch.notification.id, ch.notification.version) == \
            (ChangeKind.UPDATE, "B1/pub/low", 1)
        ch = await inside.get(timeout=5)  # [1, 4] still lies inside [0, 4]
        assert ch.kind is ChangeKind.UPDATE
        await pub.update_retained("low", "T(a in [3, 4])")  # leaves the overlap filter
        ch = await s.get(timeout=5)
        assert (ch.kind, ch.reason) == (ChangeKind.REMOVE, Reason.UPDATED)
        assert (await inside.get(timeout=5)).kind is ChangeKind.UPDATE  # still inside
        await pub.withdraw("new")
        for q in (s, inside):
            ch = await q.get(timeout=5)
            assert (ch.kind, ch.notification.id, ch.reason) == \
                (ChangeKind.REMOVE, "B1/pub/new", Reason.WITHDRAWN)
        ch = await s.get(timeout=5)  # "short" expires by the brokers' clocks
        assert (ch.kind, ch.notification.id, ch.reason) == \
            (ChangeKind.REMOVE, "B1/pub/short", Reason.EXPIRED)
        assert s.items() == []
        stats = await sub.call("retained", "stats")
        assert stats["filters"] >= 3
    finally:
        await close(servers, [pub, sub])


def drain(sub: RetainedSubscription) -> None:
    """The iterator starts with the initial collection: take those changes."""
    while not sub.queue.empty():
        ch = sub.queue.get_nowait()
        assert (ch.kind, ch.reason) == (ChangeKind.ADD, Reason.SUBSCRIBED)


def pub_time() -> float:
    import time

    return time.time()


async def test_retained_outlive_their_publisher_and_reach_new_subscribers() -> None:
    servers = await start_network(*LINE, "forwarding")
    pub = await Client.connect(port=servers["B1"].port, name="pub")
    first = await Client.connect(port=servers["B3"].port, name="first")
    try:
        await pub.retain("T(b = MID)", id="note")
        s1 = await first.subscribe_retained("T()")
        await pub.close()  # the publisher goes; what it published stays
        await settle(servers, [first])
        assert [n.id for n in s1.items()] == ["B1/pub/note"]
        second = await Client.connect(port=servers["B2"].port, name="second")
        s2 = await second.subscribe_retained("T(b in [LO, MID])")
        assert [n.id for n in s2.items()] == ["B1/pub/note"]
        await second.close()
        # the publisher comes back under its name and withdraws it
        again = await Client.connect(port=servers["B1"].port, name="pub")
        drain(s1)
        await again.withdraw("note")
        ch = await s1.get(timeout=5)
        assert (ch.kind, ch.reason) == (ChangeKind.REMOVE, Reason.WITHDRAWN)
        await again.close()
    finally:
        await close(servers, [first])


async def test_bad_requests_get_an_error_and_the_broker_keeps_serving() -> None:
    node = BrokerNode("B1", SCHEMA)
    node.retained.limits = RetainedLimits(max_per_client=2, max_filters_per_client=1)
    async with BrokerServer(node) as srv:
        c = await Client.connect(port=srv.port, name="c")
        try:
            await c.retain("T(a = 1)", id="one")
            with pytest.raises(RemoteError, match="already published"):
                await c.retain("T(a = 2)", id="one")
            with pytest.raises(RemoteError, match="has no notification"):
                await c.update_retained("nope", "T(a = 1)")
            with pytest.raises(RemoteError, match="has no notification"):
                await c.withdraw("nope")
            with pytest.raises(RemoteError, match="expired"):
                await c.retain("T(a = 1)", id="old", start=1.0, end=2.0)
            with pytest.raises(RemoteError, match="ttl"):
                await c.retain("T(a = 1)", id="neg", ttl=-5)
            await c.retain("T(a = 1)", id="two")
            with pytest.raises(RemoteError, match="over the limit of 2"):
                await c.retain("T(a = 1)", id="three")
            with pytest.raises(RemoteError, match="op must be"):
                await c._request(MsgType.TPUB, {"op": "explode", "notes": []})
            with pytest.raises(RemoteError, match="semantics"):
                await c._request(MsgType.TSUB, {"filters": [[["f", "", "T", []], "inside"]]})
            with pytest.raises(RemoteError, match="id"):
                await c._request(MsgType.TPUB, {"op": "publish", "notes": [
                    ["bad id!", None, None, None, ["x", "", "T", []]]]})
            s = await c.subscribe_retained("T()")
            with pytest.raises(RemoteError, match="limit"):
                await c.subscribe_retained("U()")
            with pytest.raises(RemoteError, match="no temporal filter"):
                await c.unsubscribe_retained("nope")
            assert [n.id for n in s.items()] == ["B1/c/one", "B1/c/two"]
            await c.withdraw("one", "two")
            assert len(await c.call("retained", "notifications")) == 0
        finally:
            await c.close()


async def test_retained_limits_come_from_the_network_config() -> None:
    net = parse_network('[network]\n[network.retained]\nmax_per_client = 1\n'
                        'max_filters_per_client = 3\n[brokers.B1]\nport = 1\n', schema=SCHEMA)
    assert net.retained == RetainedLimits(max_per_client=1, max_filters_per_client=3)
    async with BrokerServer(net.node("B1")) as srv:
        c = await Client.connect(port=srv.port, name="c")
        try:
            await c.retain("T(a = 1)", id="one")
            with pytest.raises(RemoteError, match="over the limit of 1"):
                await c.retain("T(a = 2)", id="two")
            await c.withdraw("one")
        finally:
            await c.close()
    # without the table, the defaults
    assert parse_network('[network]\n[brokers.B1]\nport = 1\n', schema=SCHEMA).retained \
        == RetainedLimits()


@pytest.mark.parametrize(("table", "message"), [
    ("[network.retained]\nmax_total = 0", "max_total must be a positive"),
    ("[network.retained]\nmax_per_client = true", "max_per_client must be a positive"),
    ("[network.retained]\nmax_per_client = 1.5", "max_per_client must be a positive"),
    ("[network.retained]\nmax_everything = 5", "unknown retained limit 'max_everything'"),
    ("retained = 3", r"\[network.retained\] must be a table"),
])
def test_bad_retained_limits_are_refused_with_a_line(table: str, message: str) -> None:
    text = f"[network]\n{table}\n[brokers.B1]\nport = 1\n"
    with pytest.raises(ConfigError, match=message) as info:
        parse_network(text, schema=SCHEMA)
    assert info.value.line is not None and info.value.line >= 2


def _box(rng: random.Random, pid: str) -> str:
    if rng.random() < 0.2:
        return f"U(x = {rng.randint(0, 3)})"
    lo = rng.randint(0, 7)
    parts = [f"a in [{lo}, {rng.randint(lo, 7)}]"] if rng.random() < 0.8 else []
    if rng.random() < 0.4:
        parts.append(f"b = {rng.choice(['LO', 'MID', 'HI'])}")
    return f"T({', '.join(parts)})"


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**16), protocol=st.sampled_from(["forwarding", "rendezvous",
                                                               "flooding"]),
       n=st.integers(1, 3))
async def test_random_operations_equal_the_oracle(seed: int, protocol: str, n: int) -> None:
    rng = random.Random(seed)
    names = [f"B{i}" for i in range(n)]
    edges = [(names[rng.randrange(i)], names[i]) for i in range(1, n)]
    servers = await start_network(names, edges, protocol,
                                  rendezvous={"T": rng.choice(names), "U": names[0]}
                                  if protocol == "rendezvous" else None)
    clients: list[Client] = []
    where: dict[str, str] = {}
    try:
        for i in range(3):
            b = rng.choice(names)
            clients.append(await Client.connect(port=servers[b].port, name=f"c{i}"))
            where[f"c{i}"] = b
        oracle = ReferenceTemporal()
        live: list[tuple[Client, str]] = []
        subs: dict[str, Any] = {}
        for step in range(25):
            c = rng.choice(clients)
            r = rng.random()
            if r < 0.35:
                lid = f"n{step}"
                text = _box(rng, lid)
                await c.retain(text, id=lid)
                gid = f"{where[c.name]}/{c.name}/{lid}"
                oracle.publish(PersistentNotification(
                    gid, parse_profile(text, SCHEMA, id=gid), f"{where[c.name]}/{c.name}"))
                live.append((c, lid))
            elif r < 0.45 and live:
                owner, lid = rng.choice(live)
                text = _box(rng, lid)
                await owner.update_retained(lid, text)
                gid = f"{where[owner.name]}/{owner.name}/{lid}"
                oracle.update(PersistentNotification(
                    gid, parse_profile(text, SCHEMA, id=gid), f"{where[owner.name]}/"
                                                              f"{owner.name}"))
            elif r < 0.55 and live:
                owner, lid = live.pop(rng.randrange(len(live)))
                await owner.withdraw(lid)
                oracle.withdraw(f"{where[owner.name]}/{owner.name}/{lid}")
            elif r < 0.9:
                fid = f"{c.name}.f{step}"
                sem = rng.choice(list(Semantics))
                text = _box(rng, fid)
                subs[fid] = await c.subscribe_retained(text, sem, id=fid)
                oracle.subscribe(TemporalFilter(parse_profile(text, SCHEMA, id=fid), sem))
                # complete on return, even with operations of others in flight elsewhere
            elif subs:
                fid = rng.choice(sorted(subs))
                await subs.pop(fid).unsubscribe()
                oracle.unsubscribe(fid)
        await settle(servers, clients)
        want = oracle.collections()
        for fid, s in subs.items():
            assert {n.id: n.version for n in s.items()} == \
                {i: n.version for i, n in want[fid].items()}, fid
    finally:
        await close(servers, clients)


# ---- with a [security] policy ----------------------------------------------------------


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from secure import make_pki

    return make_pki(tmp_path_factory.mktemp("pki"), brokers=("B1",))


async def test_retained_requests_are_held_to_the_principals_rights(pki: Any) -> None:
    """A notification inside the publish right, a filter inside the subscribe right (not
    narrowed); anything reaching outside is refused (AccessDenied) and nothing changes."""
    from secure import close_all, connect, policy, start_secure

    rights = {"tenant": {"subscribe": ["T(a <= 3)"], "publish": ["T(a <= 3)"]},
              "admin": {"subscribe": ["*"], "publish": ["*"], "services": ["retained.*"]}}
    servers = await start_secure(["B1"], [], policy(pki, rights, brokers=("B1",)), pki)
    srv = servers["B1"]
    tenant = await connect(srv, pki, "tenant", name="tenant")
    admin = await connect(srv, pki, "admin", name="admin")
    try:
        await tenant.retain("T(a = 2)", id="inside")
        with pytest.raises(RemoteError, match="outside the publish right") as info:
            await tenant.retain("T(a in [2, 5])", id="wide")
        assert info.value.kind == "AccessDenied"
        with pytest.raises(RemoteError, match="outside the publish right"):
            await tenant.update_retained("inside", "T()")
        sub = await tenant.subscribe_retained("T(a <= 1)")
        with pytest.raises(RemoteError, match="outside the subscribe right"):
            await tenant.subscribe_retained("T(b = HI)")
        wide = await admin.subscribe_retained("T()")
        assert [n.id for n in wide.items()] == ["B1/tenant/inside"]
        assert sub.items() == []
        assert len(await admin.call("retained", "notifications")) == 1
        await tenant.withdraw("inside")
    finally:
        await close_all(servers, [tenant, admin])


async def test_max_total_counts_what_the_brokers_clients_published_there() -> None:
    """Notifications cached from a neighbour do not count against a broker's
    ``max_total``; its clients' own ones, not yet active ones included, do, exactly."""
    servers = await start_network(["B1", "B2"], [("B1", "B2")], "forwarding")
    for s in servers.values():
        s.node.retained.limits = RetainedLimits(max_total=3)
    busy = await Client.connect(port=servers["B1"].port, name="busy")
    other = await Client.connect(port=servers["B2"].port, name="other")
    try:
        for i in range(3):
            await busy.retain(f"T(a = {i})", id=f"n{i}")
        s = await other.subscribe_retained("T()")  # B2 now caches B1's three
        assert len(s.items()) == 3
        assert len(await other.call("retained", "notifications")) == 3
        await other.retain("T(a = 5)", id="mine")
        await other.retain("T(a = 6)", id="later", start=pub_time() + 3600)
        await other.retain("T(a = 7)", id="y", ttl=60)
        with pytest.raises(RemoteError, match="would hold 4 notifications published by "
                                              "its clients, over the limit of 3") as err:
            await other.retain("T(a = 4)", id="z")
        assert err.value.field == "max_total"
        stats = await other.call("retained", "stats")
        assert stats["published_here"] == 3
        with pytest.raises(RemoteError, match="over the limit of 3"):
            await busy.retain("T(a = 4)", id="n9")
    finally:
        await close(servers, [busy, other])


async def test_the_iterator_goes_on_after_items_without_the_initial_answer() -> None:
    node = BrokerNode("B1", SCHEMA)
    async with BrokerServer(node) as srv, await Client.connect(port=srv.port, name="c") as c:
        await c.retain("T(a = 1)", id="one")
        await c.retain("T(a = 2)", id="two")
        fresh = await c.subscribe_retained("T()")
        first = [await fresh.get(timeout=5) for _ in range(2)]  # no items(): the answer
        assert [(ch.kind, ch.notification.id) for ch in first] == \
            [(ChangeKind.ADD, "B1/c/one"), (ChangeKind.ADD, "B1/c/two")]
        s = await c.subscribe_retained("T(a in [0, 3])")
        assert [n.id for n in s.items()] == ["B1/c/one", "B1/c/two"]
        await c.retain("T(a = 3)", id="three")
        ch = await s.get(timeout=5)
        assert (ch.kind, ch.notification.id, ch.reason) == \
            (ChangeKind.ADD, "B1/c/three", Reason.PUBLISHED)


@pytest.mark.parametrize(("conds", "message"), [
    ([[0, [0, 5, 2]]], "inverted interval [5, 2]"),
    ([[9, [0, 1, 1]]], "position 9 is no attribute of T"),
    ([[True, [0, 1, 1]]], "position True is no attribute of T"),
    (["a"], "a condition must be [position, constraint]"),
])
async def test_bad_subspaces_over_the_wire_are_named(conds: list[Any], message: str) -> None:
    node = BrokerNode("B1", SCHEMA)
    async with BrokerServer(node) as srv, await Client.connect(port=srv.port, name="c") as c:
        for mtype, body in [
            (MsgType.TPUB, {"op": "publish", "notes": [["n", None, None, None,
                                                        ["x", "", "T", conds]]]}),
            (MsgType.TSUB, {"filters": [[["f", "", "T", conds], "overlaps"]]})]:
            with pytest.raises(RemoteError) as err:
                await c._request(mtype, body)
            assert message in str(err.value)
            assert "outside" not in str(err.value) and "leaves" not in str(err.value)
            assert err.value.field == ("a" if conds[0] == [0, [0, 5, 2]] else "conditions")
        await c.retain("T(a = 1)", id="ok")  # and it keeps serving


async def test_a_late_subscriber_never_sees_what_was_withdrawn_before_it_subscribed() -> None:
    """The withdrawal is acknowledged at the publisher's broker while its drop is still on
    the way to the subscriber's broker, which caches the notification (the middle broker
    is made slow to hand on what comes from the home broker, in order): the new
    subscription's answer must not hold it, and no removal may follow."""
    import asyncio

    servers = await start_network(*LINE, "forwarding")
    pub = await Client.connect(port=servers["B1"].port, name="pub")
    early = await Client.connect(port=servers["B3"].port, name="early")
    late = await Client.connect(port=servers["B3"].port, name="late")
    middle = servers["B2"].node
    handle = middle.handle
    loop = asyncio.get_running_loop()

    def slow(link: str, msg: Any) -> None:
        if link == "B1":
            loop.call_later(0.3, handle, link, msg)
        else:
            handle(link, msg)

    try:
        cache = await early.subscribe_retained("T()")  # B3 now caches T notifications
        for i in range(3):
            await pub.retain(f"T(a = {i})", id=f"n{i}")
            ch = await cache.get(timeout=5)
            assert ch.notification.id == f"B1/pub/n{i}"
            middle.handle = slow  # type: ignore[method-assign]
            await pub.withdraw(f"n{i}")
            s = await late.subscribe_retained("T()", id=f"late{i}")
            middle.handle = handle  # type: ignore[method-assign]
            assert s.items() == []
            ch = await cache.get(timeout=5)  # the cache's own subscriber sees it go
            assert (ch.kind, ch.notification.id) == (ChangeKind.REMOVE, f"B1/pub/n{i}")
            await settle(servers, [pub, early, late])
            assert s.queue.empty(), s.queue.get_nowait()
            await s.unsubscribe()
    finally:
        await close(servers, [pub, early, late])
