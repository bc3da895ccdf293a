"""Real asyncio broker servers on 127.0.0.1: client API, services, bad frames, and the key
property on small networks."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker_strategies import SCHEMA, events, oracle, profiles
from siftbus.broker.node import BrokerNode
from siftbus.broker.server import BrokerServer, read_frame
from siftbus.client import Client, SyncClient
from siftbus.errors import ConnectionLostError, RemoteError, SiftbusError
from siftbus.model import Event, Profile
from siftbus.wire.frames import VERSION, Message, MsgType, encode

from .servers import close_all, delivered, settle, start_network

T = SCHEMA["T"]


@pytest.fixture
async def broker() -> Any:
    srv = BrokerServer(BrokerNode("B1", SCHEMA))
    await srv.start()
    yield srv
    await srv.close()


async def test_subscribe_publish_notify(broker: BrokerServer) -> None:
    async with await Client.connect(port=broker.port, name="sub") as sub, \
            await Client.connect(port=broker.port) as pub:
        assert sub.schema == SCHEMA and sub.broker == "B1" and pub.name.startswith("c")
        s = await sub.subscribe('T(a in [2, 4], s prefix "a")', id="mine")
        got: list[str] = []
        await sub.subscribe("cb: T(b = HI)", lambda n: got.append(n.profile))
        await pub.publish({"type": "T", "a": 3, "b": "LO", "s": "abc"})
        await pub.publish({"type": "T", "a": 5, "b": "HI", "s": "abc"})
        await pub.publish_batch([{"type": "T", "a": 2, "b": "HI", "s": "ax"}], ack=True)
        n1 = await s.get(5)
        n2 = await s.get(5)
        assert (n1.profile, n1.event["a"], n1.seq) == ("mine", 3, 0)
        assert (n2.event["a"], n2.seq, n2.src) == (2, 2, f"B1/{pub.name}")
        await sub.ping()
        assert got == ["cb", "cb"]
        stats = await pub.stats()
        assert stats["notifications"] == 4 and stats["events_published"] == 3
        await s.unsubscribe()
        assert stats["table_size"] == 2
        assert (await sub.stats())["table_size"] == 1


async def test_a_failing_callback_is_counted_and_delivery_goes_on(
        broker: BrokerServer, caplog: pytest.LogCaptureFixture) -> None:
    """A raising callback (plain, async or batch) must not stop the client's reader: the
    other subscriptions of the same client keep receiving everything."""
    async def async_boom(n: Any) -> None:
        raise ValueError("async boom")

    def boom(n: Any) -> None:
        raise ValueError("boom")

    async with await Client.connect(port=broker.port, name="sub") as sub, \
            await Client.connect(port=broker.port) as pub:
        await sub.subscribe("bad: T(b = HI)", boom)
        await sub.subscribe("bad2: T(b = HI)", async_boom)
        await sub.subscribe("bad3: T(b = HI)", batch_callback=boom)
        good = await sub.subscribe("good: T(b = HI)")
        for a in range(3):
            await pub.publish({"type": "T", "a": a, "b": "HI", "s": "x"})
        got = [(await good.get(5)).event["a"] for _ in range(3)]
        await sub.ping()
        await asyncio.sleep(0.05)  # let the async callbacks run
        assert got == [0, 1, 2]
        # 3 events x 2 per-notification callbacks, plus one batch call per NOTIFY frame
        # (the broker may carry several of these events in one frame)
        assert 6 + 1 <= sub.callback_errors <= 6 + 3
        assert "notification callback" in caplog.text


async def test_batched_notifications_keep_order_ids_and_types(broker: BrokerServer) -> None:
    """One PUB of mixed types travels as several blocks; the subscriber decodes each
    NOTIFY block into notifications in publication order, with every matching id."""
    U = SCHEMA["U"]
    async with await Client.connect(port=broker.port, name="sub") as sub, \
            await Client.connect(port=broker.port, name="pub") as pub:
        got: list[tuple[str, str, int, int]] = []
        await sub.subscribe_many(["p1: T(a <= 3)", "p2: T(a >= 2)", "p3: U(x = 1)"],
                                 lambda n: got.append((n.profile, n.event.type_name,
                                                       n.seq, n.event.keys[0])))
        evs = [Event(T, (a, 0, "w")) for a in range(5)] + [Event(U, (1,)), Event(U, (2,))]
        evs += [Event(T, (3, 1, "v"))]
        await pub.publish_batch(evs, ack=True)
        legacy = {"events": [["U", [1], "ignored", 99, 0.0], ["T", [0, 2, "z"], "x", 98, 0.0]]}
        await pub._request(MsgType.PUB, legacy)  # the envelope-list form is accepted too
        await sub.ping()
        want = []
        for seq, e in enumerate(evs):
            for p in sub.subscriptions.values():
                if p.profile.matches(e):
                    want.append((p.id, e.type_name, seq, e.keys[0]))
        want += [("p3", "U", 99, 1), ("p1", "T", 98, 0)]
        assert got == want
        assert [g[0] for g in got[2:6]] == ["p1", "p2", "p1", "p2"]  # ids sorted per event


async def test_oversized_notifications_are_split_not_lost() -> None:
    """A NOTIFY over the frame limit is cut into blocks and rows; every row arrives."""
    srv = BrokerServer(BrokerNode("B1", SCHEMA), max_frame=2000)
    await srv.start()
    try:
        async with await Client.connect(port=srv.port, name="sub") as sub, \
                await Client.connect(port=srv.port, name="pub") as pub:
            seen: list[int] = []
            await sub.subscribe_many([f"q{i:02}: T(a >= 0)" for i in range(60)],
                                     lambda n: seen.append(n.seq))
            sent = srv.node.counters.links["@sub"].messages_out
            evs = [Event(T, (i % 8, 0, "word")) for i in range(30)]
            for i in range(0, 30, 10):
                await pub.publish_batch(evs[i:i + 10], ack=True)
            await sub.ping()
            assert seen == [s for s in range(30) for _ in range(60)]
            assert srv.node.stats().dropped == 0
            # each 10-row NOTIFY (60 ids a row, ~2,400 bytes) was cut in two; + the ACK
            assert srv.node.counters.links["@sub"].messages_out - sent == 3 * 2 + 1
    finally:
        await srv.close()


async def test_bad_requests_get_errors_and_others_keep_being_served(
        broker: BrokerServer) -> None:
    async with await Client.connect(port=broker.port, name="good") as good:
        with pytest.raises(RemoteError) as info:
            await good._request(MsgType.SUB, {"texts": ["x: T(a > 5, b = NOPE)"]})
        assert info.value.column == 13 and info.value.kind in ("ProfileError", "DomainError")
        with pytest.raises(SiftbusError):  # parsed locally against the distributed schema
            await good.subscribe("T(zz = 1)")
        with pytest.raises(RemoteError, match="outside"):
            await good._request(MsgType.PUB, {"events": [["T", [99, 0, "x"], "s", 0, 0.0]]})
        for bad in (b"\x00\x00\x00\x02\x09\x01",  # wrong version
                    struct.pack(">IBB", 2, VERSION, 77),  # unknown type
                    struct.pack(">I", 1 << 30),  # oversized
                    struct.pack(">IBB", 3, VERSION, int(MsgType.PUB)) + b"\xc1"):  # bad body
            r, w = await asyncio.open_connection("127.0.0.1", broker.port)
            w.write(encode(Message(MsgType.HELLO, {"role": "client"})))
            await read_frame(r)
            await read_frame(r)
            w.write(bad)
            msg, _ = await read_frame(r)
            assert msg.type is MsgType.ERROR
            assert await r.read() == b""  # closed
            w.close()
        # a connection that does not start with HELLO
        r, w = await asyncio.open_connection("127.0.0.1", broker.port)
        w.write(encode(Message(MsgType.PING, {})))
        msg, _ = await read_frame(r)
        assert msg.type is MsgType.ERROR and "HELLO" in msg.body["message"]
        w.close()
        with pytest.raises(RemoteError, match="already connected"):
            await Client.connect(port=broker.port, name="good")
        await good.subscribe("T(a = 1)")
        assert (await good.stats())["table_size"] == 1


async def test_services_call_reply_and_push(broker: BrokerServer) -> None:
    calls: list[tuple[str, dict[str, Any], str]] = []

    def echo(method: str, args: dict[str, Any], caller: str) -> Any:
        calls.append((method, args, caller))
        if method == "fail":
            raise RemoteError("no such thing", field="x")
        return {"method": method, **args}

    async def slow(method: str, args: dict[str, Any], caller: str) -> Any:
        await asyncio.sleep(0.01)
        broker.push(caller, "slow", {"pushed": args["n"]})
        return args["n"] * 2

    broker.register_service("echo", echo)
    broker.register_service("slow", slow)
    with pytest.raises(SiftbusError):
        broker.register_service("echo", echo)
    async with await Client.connect(port=broker.port, name="cl") as c:
        assert await c.call("echo", "hi", x=[1, 2]) == {"method": "hi", "x": [1, 2]}
        assert calls == [("hi", {"x": [1, 2]}, "cl")]
        with pytest.raises(RemoteError, match="no such thing"):
            await c.call("echo", "fail")
        with pytest.raises(RemoteError, match="no service"):
            await c.call("nope", "x")
        assert await asyncio.gather(c.call("slow", "x", n=1), c.call("slow", "x", n=2)) == [2, 4]
        assert await asyncio.wait_for(c.service_events["slow"].get(), 5) == {"pushed": 1}
        assert (await c.call("broker", "schema")) == SCHEMA.to_dict()


async def test_durable_subscriptions_survive_a_restart(tmp_path: Any) -> None:
    from siftbus.broker.store import ProfileStore

    path = tmp_path / "b1.sqlite"
    srv = BrokerServer(BrokerNode("B1", SCHEMA, store=ProfileStore(path)))
    await srv.start()
    async with await Client.connect(port=srv.port, name="dur") as c:
        await c.subscribe("keep: T(a = 1)")
        await c.subscribe("drop: T(a = 2)")
        await c.unsubscribe("drop")
    await srv.close()
    import sqlite3

    rows = sqlite3.connect(path).execute("SELECT id, subscriber, type, text FROM profiles")
    assert list(rows) == [("dur/keep", "dur", "T", "dur/keep@dur: T(a = 1)")]
    srv = BrokerServer(BrokerNode("B1", SCHEMA, store=ProfileStore(path)))
    await srv.start()
    try:
        async with await Client.connect(port=srv.port, name="dur") as c, \
                await Client.connect(port=srv.port) as pub:
            assert c.restored == ["keep"]
            await pub.publish_batch([Event(T, (1, 0, "x"))], ack=True)
            n = await asyncio.wait_for(c.notifications().__anext__(), 5)
            assert n.profile == "keep"
    finally:
        await srv.close()


def test_sync_client() -> None:
    async def serve(ready: asyncio.Queue[int], stop: asyncio.Event) -> None:
        srv = BrokerServer(BrokerNode("B1", SCHEMA))
        await srv.start()
        await ready.put(srv.port)
        await stop.wait()
        await srv.close()

    import threading

    loop = asyncio.new_event_loop()
    ready: asyncio.Queue[int] = asyncio.Queue()
    stop = asyncio.Event()
    th = threading.Thread(target=loop.run_until_complete, args=(serve(ready, stop),))
    th.start()
    try:
        port = asyncio.run_coroutine_threadsafe(ready.get(), loop).result(10)
        with SyncClient.connect(port=port) as c:
            pid = c.subscribe("T(a = 4)").id
            c.publish_batch([{"type": "T", "a": 4, "b": "MID", "s": "q"}], ack=True)
            n = c.receive(timeout=5)
            assert n.profile == pid and n.event["b"] == "MID"
            assert c.call("broker", "stats")["notifications"] == 1
            batches: list[Any] = []
            bid = c.subscribe("T(b = HI)", batch_callback=batches.append).id
            c.publish_batch([{"type": "T", "a": a, "b": "HI", "s": "q"} for a in range(3)],
                            ack=True)
            c.ping()
            assert [(x.profile, x.event["a"]) for b in batches for x in b] == [
                (bid, 0), (bid, 1), (bid, 2)]
    finally:
        loop.call_soon_threadsafe(stop.set)
        th.join(10)
        loop.close()


async def test_client_sees_a_lost_connection(broker: BrokerServer) -> None:
    c = await Client.connect(port=broker.port, reconnect=False)
    sub = await c.subscribe("T(a = 1)")
    await broker.close()
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(sub.__anext__(), 5)
    with pytest.raises(ConnectionLostError, match="lost"):
        await sub.get(5)
    with pytest.raises(ConnectionLostError):
        await c.ping()
    await c.close()


async def test_a_closing_connection_gets_nothing_written(broker: BrokerServer) -> None:
    """A step that sends to a peer whose transport is already closing (it went while
    the step runs) counts the notifications as dropped instead of writing (uvloop
    raises on such a write)."""
    async with await Client.connect(port=broker.port, name="gone") as c:
        await c.subscribe("p: T(a = 1)")
        conn = broker._conns["@gone"]
        assert conn.transport is not None
        conn.transport.close()
        assert conn.transport.is_closing() and "@gone" in broker._conns
        counters = broker.node.counters
        before, sent = counters.dropped, counters.links["@gone"].bytes_out
        broker._send("@gone", Message(MsgType.NOTIFY, {"blocks": [{"p": ["p", "p"]}]}))
        assert counters.dropped == before + 2
        assert counters.links["@gone"].bytes_out == sent


async def run_network_case(data: st.DataObject, protocol: str, strategy: str) -> None:
    n = data.draw(st.integers(1, 4), label="brokers")
    names = [f"B{i}" for i in range(n)]
    edges = [(names[data.draw(st.integers(0, i - 1))], names[i]) for i in range(1, n)]
    rn = {t: data.draw(st.sampled_from(names)) for t in SCHEMA.names} \
        if protocol == "rendezvous" else None
    servers = await start_network(names, edges, protocol, strategy, rn)
    clients: list[Client] = []
    try:
        for i in range(data.draw(st.integers(1, 3))):
            b = data.draw(st.sampled_from(names))
            clients.append(await Client.connect(port=servers[b].port, name=f"k{i}"))
        active: dict[tuple[str, str], Profile] = {}
        for j in range(data.draw(st.integers(1, 8))):
            c = data.draw(st.sampled_from(clients))
            mine = [pid for (cl, pid) in active if cl == c.name]
            if mine and data.draw(st.booleans()):
                pid = data.draw(st.sampled_from(sorted(mine)))
                await c.unsubscribe(pid)
                del active[(c.name, pid)]
            else:
                p = data.draw(profiles(f"p{j}"))
                sub = await c.subscribe(p)
                active[(c.name, p.id)] = p
                assert sub.id == p.id
        await settle(servers, clients)
        published: list[tuple[tuple[str, int], Event]] = []
        for c in clients:
            evs = data.draw(st.lists(events(), max_size=5))
            seq0 = c._seq
            await c.publish_batch(evs, ack=True)
            published += [((f"{c.broker}/{c.name}", seq0 + i), e) for i, e in enumerate(evs)]
        await settle(servers, clients)
        got = delivered(clients)
        assert got == oracle(active, published)
        for c in clients:
            if c.subscriptions:
                await c.unsubscribe(*c.subscriptions)
        await settle(servers, clients)
        assert {b: s.node.stats().table_size for b, s in servers.items()} == \
            {b: 0 for b in names}
    finally:
        await close_all(servers, clients)


@pytest.mark.parametrize(("protocol", "strategy"), [
    ("flooding", "simple"), ("forwarding", "covering"), ("forwarding", "merging"),
    ("rendezvous", "covering")])
@settings(max_examples=6, deadline=None)
@given(data=st.data())
def test_real_network_delivers_exactly_the_oracle(protocol: str, strategy: str,
                                                  data: st.DataObject) -> None:
    asyncio.run(run_network_case(data, protocol, strategy))


def test_frames_are_msgpack_maps() -> None:
    frame = encode(Message(MsgType.PING, {"corr": 1}))
    assert msgpack.unpackb(frame[6:]) == {"corr": 1}


# ---- limits, atomic subscriptions, a handler bug (issue 13) ----------------------------

from siftbus.errors import DuplicateProfileError, EnvironmentProblem  # noqa: E402
from siftbus.wire.frames import decode_error  # noqa: E402
from siftbus.wire.limits import Limits  # noqa: E402


async def _hello(port: int, name: str | None = None
                 ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(encode(Message(MsgType.HELLO, {"role": "client", **({"name": name} if name
                                                                  else {})})))
    assert (await read_frame(r))[0].type is MsgType.ACK
    assert (await read_frame(r))[0].type is MsgType.SCHEMA
    return r, w


async def _error_then_close(r: asyncio.StreamReader, timeout: float = 5.0) -> Any:
    """The ERROR a refused connection gets, after which the server closes it."""
    msg, _ = await asyncio.wait_for(read_frame(r), timeout)
    assert msg.type is MsgType.ERROR, msg
    assert await asyncio.wait_for(r.read(), timeout) == b""
    return decode_error(msg.body)


async def _connections(srv: BrokerServer, n: int) -> None:
    """Wait until the server holds ``n`` connections (refused ones linger a moment)."""
    for _ in range(250):
        if srv.transport_stats().connections == n:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{srv.transport_stats().connections} connections, not {n}")


async def _request(r: asyncio.StreamReader, w: asyncio.StreamWriter, t: MsgType,
                   body: dict[str, Any]) -> Message:
    w.write(encode(Message(t, {**body, "corr": 77})))
    msg, _ = await asyncio.wait_for(read_frame(r), 5)
    return msg


async def test_each_limit_is_answered_with_one_error_and_counted() -> None:
    lim = Limits(frame_timeout=0.6, hello_timeout=0.3, max_connections=3, max_frame=4096,
                 max_buffered=8192, max_string=100, max_profiles=2, max_conditions=3,
                 max_profile_text=50)
    srv = BrokerServer(BrokerNode("B1", SCHEMA), limits=lim)
    await srv.start()
    try:
        async with await Client.connect(port=srv.port, name="good") as good, \
                await Client.connect(port=srv.port, name="pub") as pub:
            sub = await good.subscribe("T(a = 1)")
            # the handshake: nothing, or half a HELLO
            for first in (b"", encode(Message(MsgType.HELLO, {"role": "client"}))[:7]):
                r, w = await asyncio.open_connection("127.0.0.1", srv.port)
                w.write(first)
                assert (await _error_then_close(r)).field == "hello_timeout"
                w.close()
                await _connections(srv, 2)
            # frame-level limits close only that connection
            ping = encode(Message(MsgType.PING, {"corr": 1}))
            for data, limit in ((ping[:5], "frame_timeout"),
                                (struct.pack(">I", 5000), "max_frame"),
                                (encode(Message(MsgType.SUB, {"texts": ["x" * 101]})),
                                 "max_string")):
                r, w = await _hello(srv.port)
                w.write(data)
                assert (await _error_then_close(r)).field == limit
                w.close()
                await _connections(srv, 2)
            # request-level limits: an ERROR answers the request, the connection stays
            r, w = await _hello(srv.port, "req")
            three = [f"p{i}: T(a = 1)" for i in range(3)]
            for t, body, limit in (
                    (MsgType.SUB, {"texts": three}, "max_profiles"),
                    (MsgType.UNSUB, {"ids": ["a", "b", "c"]}, "max_profiles"),
                    (MsgType.SUB, {"texts": ["p: T(a in {1, 3, 5, 7})"]}, "max_conditions"),
                    (MsgType.SUB, {"texts": ["p: T(s = \"" + "y" * 50 + "\")"]},
                     "max_profile_text")):
                msg = await _request(r, w, t, body)
                err = decode_error(msg.body)
                assert (msg.type, err.field, err.corr) == (MsgType.ERROR, limit, 77), err
            assert (await _request(r, w, MsgType.PING, {})).type is MsgType.ACK
            # one connection over max_connections (good, pub, req are open)
            r2, w2 = await asyncio.open_connection("127.0.0.1", srv.port)
            assert (await _error_then_close(r2)).field == "max_connections"
            w2.close()
            w.close()
            await _connections(srv, 2)  # "req" is gone: there is room again
            _, w3 = await _hello(srv.port)
            w3.close()
            # everyone else was served throughout
            await pub.publish_batch([Event(T, (1, 0, "x"))], ack=True)
            assert (await sub.get(5)).event["a"] == 1
            refused = srv.transport_stats().refused
            assert refused == {"hello_timeout": 2, "frame_timeout": 1, "max_frame": 1,
                               "max_string": 1, "max_connections": 1}, refused
            assert srv.errors_sent == 6
            info = await good.call("broker", "transport")
            assert info["limits"]["max_profiles"] == 2 and info["refused"] == refused
    finally:
        await srv.close()


async def test_held_partial_frames_share_one_memory_budget() -> None:
    """Connections holding partial frames stop being read once max_buffered bytes are
    held over all of them, and are refused when their frames time out."""
    lim = Limits(max_frame=64 * 1024, max_buffered=100 * 1024, frame_timeout=1.0)
    srv = BrokerServer(BrokerNode("B1", SCHEMA), limits=lim)
    await srv.start()
    try:
        conns = [await _hello(srv.port) for _ in range(4)]
        part = struct.pack(">IBB", 60 * 1024, VERSION, int(MsgType.PING)) + b"\x80" * 49_994
        for i in range(0, len(part), 5000):  # 4 x 50 KB of partial frames, in 5 KB steps
            for _, w in conns:
                w.write(part[i:i + 5000])
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.2)
        stats = srv.transport_stats()
        # over the budget by at most the chunks in flight when it was crossed
        assert lim.max_buffered <= stats.buffered <= lim.max_buffered + 4 * 5000, stats
        for r, w in conns:
            assert (await _error_then_close(r)).field == "frame_timeout"
            w.close()
        async with await Client.connect(port=srv.port) as c:
            await c.ping()
        assert srv.transport_stats().buffered == 0
    finally:
        await srv.close()


async def test_a_lone_surrogate_leaves_store_and_memory_agreeing(tmp_path: Any) -> None:
    """Issue 13: a profile holding "\\ud800" sent to a broker with a durable store used
    to raise UnicodeEncodeError, drop the connection and stay in memory only."""
    from siftbus.broker.store import ProfileStore

    path = tmp_path / "b1.sqlite"
    srv = BrokerServer(BrokerNode("B1", SCHEMA, store=ProfileStore(path)))
    await srv.start()
    try:
        async with await Client.connect(port=srv.port, name="dur") as c:
            await c.subscribe("ok: T(a = 1)")
            with pytest.raises(RemoteError, match="lone UTF-16 surrogate") as info:
                await c._request(MsgType.SUB, {"texts": ['ok2: T(a = 2)',
                                                         'bad: T(s = "\\ud800")']})
            assert info.value.kind == "ProfileSyntaxError" and info.value.source is None
            await c.ping()  # the connection stays
            assert (await c.stats())["table_size"] == 1
            assert [p["id"] for p in await c.call("broker", "profiles")] == ["B1/dur/ok"]
    finally:
        await srv.close()
    srv = BrokerServer(BrokerNode("B1", SCHEMA, store=ProfileStore(path)))
    await srv.start()
    try:
        async with await Client.connect(port=srv.port, name="dur") as c:
            assert c.restored == ["ok"]
    finally:
        await srv.close()


class FailingStore:
    """A store whose ``fail`` operation raises (a disk error) once armed."""

    def __init__(self, path: Any, fail: str) -> None:
        from siftbus.broker.store import ProfileStore

        self.inner = ProfileStore(path)
        self.fail = fail
        self.armed = False

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name != self.fail:
            return attr

        def failing(*args: Any) -> Any:
            if self.armed:
                raise EnvironmentProblem(f"disk full during {name}")
            return attr(*args)

        return failing


@pytest.mark.parametrize("fail", ["insert", "commit", "delete"])
async def test_subscribe_and_unsubscribe_are_atomic_on_store_failures(
        tmp_path: Any, fail: str) -> None:
    store = FailingStore(tmp_path / "s.sqlite", fail)
    srv = BrokerServer(BrokerNode("B1", SCHEMA, store=store))  # type: ignore[arg-type]
    await srv.start()
    try:
        async with await Client.connect(port=srv.port, name="k") as c:
            await c.subscribe_many(["a: T(a = 1)", "b: T(a = 2)"])
            store.armed = True
            with pytest.raises(RemoteError, match="disk full"):
                if fail == "delete":
                    await c.unsubscribe("a", "b")
                else:
                    await c.subscribe_many(["x: T(a = 3)", "y: T(a = 4)"])
            store.armed = False
            await c.ping()
            ids = sorted(p["id"] for p in await c.call("broker", "profiles"))
            assert ids == ["B1/k/a", "B1/k/b"]
            assert sorted(p.id for _, p in store.inner.load(SCHEMA)) == ["a", "b"]
            # re-subscribing a stored id is refused and replaces nothing
            with pytest.raises(RemoteError) as info:
                await c._request(MsgType.SUB, {"texts": ["a: T(a = 7)"]})
            assert info.value.kind == DuplicateProfileError.__name__
            assert next(p for _, p in store.inner.load(SCHEMA) if p.id == "a").matches(
                Event(T, (1, 0, "x")))
    finally:
        await srv.close()


async def test_a_failing_handler_is_answered_and_the_connection_stays(
        broker: BrokerServer, caplog: pytest.LogCaptureFixture) -> None:
    def buggy(method: str, args: dict[str, Any], caller: str) -> Any:
        return {}["missing"]

    broker.register_service("buggy", buggy)
    async with await Client.connect(port=broker.port) as c:
        with pytest.raises(RemoteError) as info:
            await c.call("buggy", "x")
        assert info.value.kind == "KeyError"
        await c.ping()
    assert "handling CALL" in caplog.text


async def test_a_subscription_needs_only_its_owners_public_surface() -> None:
    from siftbus.client.notifications import Notification
    from siftbus.client.subscription import Subscription

    class Owner:
        def __init__(self) -> None:
            self.subscriptions: dict[str, Subscription] = {}
            self.ended = asyncio.Event()
            self.called: list[Any] = []
            self.gone: list[Any] = []

        def run_callback(self, fn: Any, arg: Any) -> None:
            self.called.append(arg)

        async def unsubscribe(self, *ids: Any) -> None:
            self.gone.extend(ids)

    owner = Owner()
    p = Profile.build("p", T, [])
    sub = Subscription(owner, p, None, 2)
    owner.subscriptions["p"] = sub
    notes = [Notification("p", Event(T, (i, 0, "x")), "B/c", i, 0.0) for i in range(3)]
    for n in notes:
        sub.deliver(n)
    assert (sub.received, sub.dropped) == (3, 1)
    assert await sub.get(1) == notes[0]
    owner.ended.set()
    assert [n async for n in sub] == [notes[1]]  # what came before the end, then stop
    async with sub:
        pass
    assert owner.gone == ["p"]
    cb = Subscription(owner, p, owner.called.append, 2)
    cb.deliver(notes[2])
    assert owner.called == [notes[2]]
