"""Rights and quotas of principals at a real broker, on every path of its protocol.

Content-based rights are checked against the reference semantics with hypothesis: on
small finite domains every event is published, and each subscriber receives exactly
the events its subscriptions select inside its right (never one outside it), while a
subscription its right covers is never refused.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections import Counter
from typing import Any

import jwt
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from broker_strategies import SCHEMA
from secure import Pki, close_all, connect, eventually, make_pki, policy, start_secure
from siftbus.broker.server import read_frame
from siftbus.client import Client
from siftbus.errors import ConfigError, RemoteError
from siftbus.model import Event, Profile, Schema, parse_schema
from siftbus.security.policy import Grant, SecurityPolicy
from siftbus.security.rights import EVERYTHING, RightSet, covered_by_union
from siftbus.wire.frames import Message, MsgType, decode_error, encode
from strategies import profiles

from .events import every_event

PRINCIPALS = {
    "admin": {"subscribe": ["*"], "publish": ["*"], "advertise": ["*"],
              "services": ["broker.*"]},
    "tenant": {"subscribe": ["T(a <= 3)", "U"], "publish": ["T(a <= 3)"],
               "advertise": ["T(a <= 3)"], "services": ["broker.stats"]},
    "split": {"subscribe": ["T(a <= 3)", "T(b = HI)"]},
    "quota": {"subscribe": ["*"], "publish": ["*"], "advertise": ["*"], "max_profiles": 2,
              "publish_rate": 50.0, "publish_burst": 20.0},
    "slow": {"subscribe": ["*"], "max_queued_bytes": 4096},
}


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"), brokers=("B1", "B2"))


def _t(a: int, b: str = "LO", s: str = "x") -> dict[str, Any]:
    return {"type": "T", "a": a, "b": b, "s": s}


async def _kind(coro: Any) -> str:
    """The remote error kind a request is answered with."""
    with pytest.raises(RemoteError) as info:
        await coro
    return info.value.kind


async def test_subscribe_rights_are_exact_covering_on_every_request(pki: Pki) -> None:
    servers = await start_secure(["B1"], [], policy(pki, PRINCIPALS), pki)
    srv = servers["B1"]
    tenant = await connect(srv, pki, "tenant")
    admin = await connect(srv, pki, "admin")
    try:
        inside = await tenant.subscribe("T(a in [1, 2], s prefix \"x\")")
        await tenant.subscribe("U(x = 1)")  # a right on the whole type
        for outside in ("T(a <= 4)", "T(b = HI)", "T(a >= 3)"):
            assert await _kind(tenant.subscribe(outside)) == "AccessDenied"
        # one refused profile refuses the whole request: nothing of it is registered
        assert await _kind(tenant.subscribe_many(["T(a = 0)", "T(a = 7)"])) == \
            "AccessDenied"
        assert set(tenant.subscriptions) == {inside.id, "s2"}
        await admin.publish_batch([_t(a) for a in range(8)], ack=True)
        got = [(await inside.get(5)).event["a"] for _ in range(2)]
        assert got == [1, 2]
        await tenant.ping()
        assert inside.queue.empty()
        stats = await tenant.stats()  # tenant has broker.stats
        assert stats["denials"]["access/subscribe"] == 4
        assert stats["local_profiles"] == 2
    finally:
        await close_all(servers, [tenant, admin])


async def test_narrowing_delivers_each_event_of_the_intersection_once(pki: Pki) -> None:
    servers = await start_secure(["B1"], [], policy(pki, PRINCIPALS, narrow=True), pki)
    srv = servers["B1"]
    split = await connect(srv, pki, "split")
    admin = await connect(srv, pki, "admin")
    try:
        sub = await split.subscribe("wide: T(a >= 2)")  # right: a <= 3 or b = HI
        assert sub.id == "wide" and split.restored == []
        assert srv.node.stats().table_size == 2  # two disjoint pieces
        events = [_t(a, b) for a in range(8) for b in ("LO", "HI")]
        await admin.publish_batch(events, ack=True)
        await split.ping()
        got = Counter((n.profile, n.event["a"], n.event["b"])
                      for n in [sub.queue.get_nowait() for _ in range(sub.queue.qsize())])
        want = Counter(("wide", a, b) for a in range(2, 8) for b in ("LO", "HI")
                       if a <= 3 or b == "HI")
        assert got == want
        await split.unsubscribe("wide")
        assert srv.node.stats().table_size == 0
        assert await _kind(split.subscribe("T(a = 6, b = LO)")) == "AccessDenied"
    finally:
        await close_all(servers, [split, admin])


async def test_publish_rights_refuse_the_whole_publication(pki: Pki) -> None:
    servers = await start_secure(["B1"], [], policy(pki, PRINCIPALS), pki)
    srv = servers["B1"]
    tenant = await connect(srv, pki, "tenant")
    admin = await connect(srv, pki, "admin")
    try:
        sub = await admin.subscribe("T(a >= 0)")
        await tenant.publish_batch([_t(1), _t(3)], ack=True)
        assert await _kind(tenant.publish_batch([_t(2), _t(5)], ack=True)) == "AccessDenied"
        assert await _kind(tenant.publish_batch([{"type": "U", "x": 1}], ack=True)) == \
            "AccessDenied"
        await tenant.publish(_t(6))  # fire and forget: the error still comes back
        await tenant.ping()
        assert [e.kind for e in tenant.errors] == ["AccessDenied"]
        await admin.ping()
        assert [n.event["a"] for n in [sub.queue.get_nowait()
                                       for _ in range(sub.queue.qsize())]] == [1, 3]
        assert srv.node.stats().events_published == 2
    finally:
        await close_all(servers, [tenant, admin])


async def test_advertise_and_service_rights(pki: Pki) -> None:
    servers = await start_secure(["B1"], [], policy(pki, PRINCIPALS), pki)
    srv = servers["B1"]
    tenant = await connect(srv, pki, "tenant")
    admin = await connect(srv, pki, "admin")
    try:
        await tenant.advertise("T(a = 2)")
        assert await _kind(tenant.advertise("T(a = 5)")) == "AccessDenied"
        for method in ("profiles", "transport"):
            assert await _kind(tenant.call("broker", method)) == "AccessDenied"
        assert await tenant.call("broker", "schema") == SCHEMA.to_dict()
        assert await tenant.stats()
        assert len(await admin.call("broker", "profiles")) == 0
        assert "limits" in await admin.call("broker", "transport")
        denials = srv.node.stats().denials
        assert denials["access/advertise"] == 1 and denials["access/call"] == 2
    finally:
        await close_all(servers, [tenant, admin])


async def test_profile_and_rate_quotas_are_clear_errors(pki: Pki) -> None:
    servers = await start_secure(["B1"], [], policy(pki, PRINCIPALS), pki)
    srv = servers["B1"]
    one = await connect(srv, pki, "quota")
    two = await connect(srv, pki, "quota")  # the same principal: one quota
    try:
        await one.subscribe("p1: T(a = 1)")
        await two.advertise("T(a = 2)")
        with pytest.raises(RemoteError) as info:
            await one.subscribe("p2: T(a = 2)")
        assert info.value.kind == "QuotaExceeded" and "max_profiles" in str(info.value)
        await one.unsubscribe("p1")
        await two.subscribe("p2: T(a = 2)")  # freed by the other connection
        await two.close()  # its profile and advertisement go, and with them their count
        await one.subscribe_many(["p3: T(a = 3)", "p4: T(a = 4)"])
        # rate: a burst of 20, then 50 a second; a refused batch is refused whole
        await one.publish_batch([_t(1)] * 15, ack=True)
        with pytest.raises(RemoteError) as info:
            await one.publish_batch([_t(1)] * 15, ack=True)
        assert info.value.kind == "QuotaExceeded" and "publish_rate" in str(info.value)
        assert info.value.retriable
        await asyncio.sleep(0.4)
        await one.publish_batch([_t(1)] * 15, ack=True)
        stats = srv.node.stats()
        assert stats.events_published == 30
        assert stats.denials["quota/subscribe"] == 1 and stats.denials["quota/publish"] == 1
    finally:
        await close_all(servers, [one, two])


async def test_queued_bytes_over_the_quota_are_dropped_counted_and_reported(
        pki: Pki) -> None:
    servers = await start_secure(["B1"], [], policy(pki, PRINCIPALS), pki)
    srv = servers["B1"]
    admin = await connect(srv, pki, "admin")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", srv.port))
    r, w = await asyncio.open_connection(sock=sock, ssl=pki.client_tls(),
                                         server_hostname="localhost")
    try:
        w.write(encode(Message(MsgType.HELLO, {"role": "client", "name": "lazy",
                                               "token": pki.token("slow")})))
        assert (await read_frame(r))[0].type is MsgType.ACK
        assert (await read_frame(r))[0].type is MsgType.SCHEMA
        w.write(encode(Message(MsgType.SUB, {"corr": 1, "texts": ["all: U(x >= 0)"]})))
        assert (await read_frame(r))[0].type is MsgType.ACK
        server_side = srv._conns["@lazy"].transport.get_extra_info("socket")
        server_side.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        batch = [{"type": "U", "x": i % 4} for i in range(2000)]
        for _ in range(100):  # the lazy client reads nothing meanwhile
            await admin.publish_batch(batch, ack=True)
            if srv.node.stats().denials.get("quota/notify"):
                break
        stats = srv.node.stats()
        assert stats.denials["quota/notify"] >= 1 and stats.dropped >= 2000
        for _ in range(10_000):  # it catches up: notifications, then the one ERROR
            msg, _ = await asyncio.wait_for(read_frame(r), 10)
            if msg.type is MsgType.ERROR:
                err = decode_error(msg.body)
                assert err.kind == "QuotaExceeded" and "max_queued_bytes" in err.message
                break
            assert msg.type is MsgType.NOTIFY
        else:
            raise AssertionError("no quota ERROR")
        assert srv.node.stats().clients == 2  # dropped, reported, still connected
    finally:
        w.close()
        await close_all(servers, [admin])


# ---- content-based rights against the reference semantics ------------------------------

ORDERED = parse_schema('[R]\na = "int[0,5]"\nb = "enum[LO,MID,HI]"\n[V]\nx = "int[0,3]"\n')


@st.composite
def access_cases(draw: st.DrawFn, schema: Schema) -> tuple[list[Profile], list[Profile], bool]:
    etypes = [schema[n] for n in schema.names]
    right = [draw(profiles(draw(st.sampled_from(etypes)), f"r{i}", max_conditions=2))
             for i in range(draw(st.integers(0, 3)))]
    subs = [draw(profiles(draw(st.sampled_from(etypes)), f"q{i}", max_conditions=2))
            for i in range(draw(st.integers(1, 4)))]
    return right, subs, draw(st.booleans())


async def run_access_case(schema: Schema, right: list[Profile], subs: list[Profile],
                          narrow: bool, exact: bool) -> None:
    """One broker whose anonymous clients may subscribe within ``right``: subscribe
    each profile, publish every event, compare with the reference semantics."""
    pol = SecurityPolicy(anonymous=True, narrow=narrow, open=False, default=Grant(
        publish=EVERYTHING, subscribe=RightSet(tuple(right))))
    servers = await start_secure(["B1"], [], pol, None, schema=schema)
    port = servers["B1"].port
    sub = await Client.connect(port=port)
    pub = await Client.connect(port=port)
    try:
        everything = [e for n in schema.names for e in every_event(schema[n])]

        def in_right(e: Event) -> bool:
            return any(r.matches(e) for r in right)

        accepted: list[Profile] = []
        for q in subs:
            covered = all(in_right(e) for e in everything if q.matches(e))
            meets = any(in_right(e) for e in everything if q.matches(e))
            try:
                await sub.subscribe(q)
                accepted.append(q)
                assert covered or narrow, f"{q} accepted outside the right"
                event("accepted" if covered else "narrowed")
            except RemoteError as exc:
                assert exc.kind == "AccessDenied", exc
                event("refused")
                if exact:  # never refused what the right covers (or meets, narrowing)
                    assert not (narrow and meets) and not covered, f"{q} refused"
                elif not narrow:  # strings: exact covering is decided by covered_by_union
                    assert not covered_by_union(q, right)
        await pub.publish_batch(everything, ack=True)
        await sub.ping()
        got: Counter[tuple[str, int]] = Counter()
        index = {e: i for i, e in enumerate(everything)}
        for s in sub.subscriptions.values():
            while not s.queue.empty():
                n = s.queue.get_nowait()
                got[(n.profile, index[n.event])] += 1
        want = Counter((q.id, i) for q in accepted for i, e in enumerate(everything)
                       if q.matches(e) and in_right(e))
        assert got == want
    finally:
        await close_all(servers, [sub, pub])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(access_cases(ORDERED))
def test_content_rights_on_finite_domains_match_the_reference(case: Any) -> None:
    right, subs, narrow = case
    asyncio.run(run_access_case(ORDERED, right, subs, narrow, exact=True))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(access_cases(SCHEMA))
def test_content_rights_with_strings_never_deliver_outside_the_right(case: Any) -> None:
    right, subs, narrow = case
    asyncio.run(run_access_case(SCHEMA, right, subs, narrow, exact=False))


async def test_rights_hold_for_durable_profiles_after_a_restart(pki: Pki,
                                                                tmp_path: Any) -> None:
    """A durable profile is restored under its owner's rights of now: the config may
    have taken the right away since."""
    stores = {"B1": tmp_path / "b1.sqlite"}
    servers = await start_secure(["B1"], [], policy(pki, PRINCIPALS), pki, stores=stores)
    c = await connect(servers["B1"], pki, "tenant", name="t1")
    await c.subscribe_many(["keep: T(a = 1)", "lose: T(a = 3)"])
    await close_all(servers, [c])
    narrower = {**PRINCIPALS, "tenant": {"subscribe": ["T(a <= 2)"]}}
    servers = await start_secure(["B1"], [], policy(pki, narrower), pki, stores=stores)
    try:
        async with await connect(servers["B1"], pki, "tenant", name="t1") as back:
            assert back.restored == ["keep"]
        await eventually(lambda: servers["B1"].node.stats().clients == 0)
    finally:
        await close_all(servers)


async def test_a_tokens_scopes_narrow_what_its_connection_may_do(pki: Pki) -> None:
    """A token carrying scopes gives its connection only those actions of the
    principal's rights (a device's read-only token); no scopes: all of them."""
    servers = await start_secure(["B1"], [], policy(pki, PRINCIPALS), pki)
    srv = servers["B1"]
    reader = await Client.connect(port=srv.port, tls=pki.client_tls(),
                                  server_hostname="localhost",
                                  token=pki.signer.issue("admin", scopes=["subscribe"]))
    try:
        await reader.subscribe("T(a = 1)")
        assert await _kind(reader.publish_batch([_t(1)], ack=True)) == "AccessDenied"
        assert await _kind(reader.advertise("T(a = 1)")) == "AccessDenied"
        assert await _kind(reader.call("broker", "stats")) == "AccessDenied"
        async with await connect(srv, pki, "admin") as full:  # the same principal
            await full.publish_batch([_t(1)], ack=True)
            assert await full.call("broker", "stats")
        with pytest.raises(ConfigError, match="unknown scope"):
            pki.signer.issue("admin", scopes=["root"])
        rooted = jwt.encode({"sub": "admin", "aud": "siftbus", "exp": time.time() + 60,
                             "scope": "subscribe root"}, (pki.dir / "token.key").read_bytes(),
                            algorithm="HS256")
        with pytest.raises(RemoteError, match="unknown scope"):
            await Client.connect(port=srv.port, tls=pki.client_tls(),
                                 server_hostname="localhost", token=rooted)
    finally:
        await close_all(servers, [reader])


async def test_another_principals_name_is_refused_alike_online_or_not(pki: Pki) -> None:
    """A name held by another principal's live client is refused with the same counted
    AccessDenied as after that client left: the refusal never tells whether it is
    online (issue 30, item 8)."""
    servers = await start_secure(["B1"], [], policy(pki, PRINCIPALS), pki)
    srv = servers["B1"]
    try:
        holder = await connect(srv, pki, "tenant", name="t9")
        answers = []
        for _ in range(2):
            with pytest.raises(RemoteError) as refused:
                await connect(srv, pki, "admin", name="t9")
            answers.append((refused.value.kind, refused.value.message))
            if holder is not None:
                await holder.close()
                holder = None
                await eventually(lambda: srv.node.stats().clients == 0)
        assert answers[0] == answers[1], answers
        assert answers[0][0] == "AccessDenied" and "another principal" in answers[0][1]
        assert srv.node.guard.stats()["denied_by_principal"]["admin"] == 2
    finally:
        await close_all(servers)


async def test_quotas_hold_at_each_broker_over_all_its_connections_there(pki: Pki) -> None:
    """The documented scope of a quota (docs/security.md, "Quotas"): a principal's
    connections to one broker share it; another broker counts on its own (issue 30,
    item 8: the documentation said "over all its connections" without saying so)."""
    servers = await start_secure(["B1", "B2"], [("B1", "B2")], policy(pki, PRINCIPALS), pki)
    try:
        one = await connect(servers["B1"], pki, "quota")
        two = await connect(servers["B1"], pki, "quota")
        far = await connect(servers["B2"], pki, "quota")
        await one.subscribe("T(a = 1)")
        await two.subscribe("T(a = 2)")
        with pytest.raises(RemoteError, match="max_profiles quota of 2"):
            await one.subscribe("T(a = 3)")  # the third at B1, from either connection
        await far.subscribe_many(["T(a = 4)", "T(a = 5)"])  # B2's own two
        with pytest.raises(RemoteError, match="max_profiles quota of 2"):
            await far.subscribe("T(a = 6)")
        for c in (one, two, far):
            await c.close()
    finally:
        await close_all(servers)
