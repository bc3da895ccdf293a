"""The HTTP gateway end to end: a real 3-broker network on loopback (B1 - B2 - B3, the
gateway a client of B1), driven over REST, WebSocket and SSE as a browser or a script in
another language would."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import websockets
from prometheus_client.parser import text_string_to_metric_families

from broker.servers import settle
from broker_strategies import SCHEMA
from siftbus.client import Client
from siftbus.gateway import GatewayLimits
from siftbus.match.reference import ReferenceMatcher
from siftbus.model import Event, event_from_dict

from .servers import GatewayNetwork, start_gateway_network

WORDS = ["ab", "abc", "b", "ba", "c", ""]


@pytest.fixture
async def gn() -> AsyncIterator[GatewayNetwork]:
    net = await start_gateway_network()
    yield net
    await net.close()


def ws_url(gn: GatewayNetwork) -> str:
    return gn.url.replace("http://", "ws://") + "/api/ws"


def random_profile(rng: random.Random) -> str:
    if rng.random() < 0.25:
        return "U()" if rng.random() < 0.3 else f"U(x <= {rng.randint(0, 3)})"
    conds = []
    if rng.random() < 0.7:
        lo = rng.randint(0, 7)
        conds.append(rng.choice([f"a >= {lo}", f"a = {lo}", f"a in [{lo}, {min(7, lo + 2)}]"]))
    if rng.random() < 0.5:
        conds.append(rng.choice(["b = HI", "b != LO", "b in {LO, MID}"]))
    if rng.random() < 0.4:
        conds.append(rng.choice(['s prefix "a"', 's = "b"', "s exists"]))
    return f"T({', '.join(conds)})"


def random_event(rng: random.Random) -> dict[str, Any]:
    if rng.random() < 0.25:
        return {"type": "U", "x": rng.randint(0, 3)}
    return {"type": "T", "a": rng.randint(0, 7), "b": rng.choice(["LO", "MID", "HI"]),
            "s": rng.choice(WORDS)}


class WsReader:
    """A WebSocket client of the gateway collecting notifications and replies."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.notes: list[dict[str, Any]] = []
        self.replies: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.task = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        with contextlib.suppress(websockets.ConnectionClosed):
            async for raw in self.ws:
                self._take(json.loads(raw))

    def _take(self, msg: dict[str, Any]) -> None:
        if msg["type"] == "notifications":  # several per message, in arrival order
            assert msg["notifications"] and all(
                n["type"] == "notification" for n in msg["notifications"])
            self.notes.extend(msg["notifications"])
        elif msg["type"] != "network":
            self.replies.put_nowait(msg)

    async def request(self, **msg: Any) -> dict[str, Any]:
        await self.ws.send(json.dumps(msg))
        return await asyncio.wait_for(self.replies.get(), 10)

    async def wait_for(self, n: int, timeout: float = 15.0) -> None:
        async with asyncio.timeout(timeout):
            while len(self.notes) < n:
                await asyncio.sleep(0.01)

    async def close(self) -> None:
        await self.ws.close()
        self.task.cancel()


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_rest_and_websocket_deliver_what_the_reference_predicts(
        gn: GatewayNetwork, seed: int) -> None:
    """Profiles subscribed over the gateway's WebSocket (at B1) and natively at B3, events
    published by REST batches (JSON lines), over the WebSocket and natively at B3, with
    subscriptions added and removed between rounds: every subscriber receives exactly the
    multiset of (profile, event) the reference matcher predicts."""
    rng = random.Random(seed)
    b3 = gn.net.broker("B3")
    native = await Client.connect(b3.host, gn.brokers["B3"].port, name="native")
    reader = WsReader(await websockets.connect(ws_url(gn)))
    ref = {"ws": ReferenceMatcher(), "native": ReferenceMatcher()}
    expected: Counter[tuple[str, str, str]] = Counter()
    got_native: list[tuple[str, str]] = []
    n_ws = 0
    try:
        async with httpx.AsyncClient(base_url=gn.url, timeout=20) as http:
            for rnd in range(3):
                for i in range(4):  # interleaved subscribe / unsubscribe
                    pid = f"r{rnd}p{i}"
                    text = random_profile(rng)
                    if rng.random() < 0.6:
                        reply = await reader.request(op="subscribe", id=pid, profile=text)
                        assert reply["type"] == "subscribed", reply
                        ref["ws"].add(native.profile(text, pid))
                    else:
                        await native.subscribe(text, lambda n: got_native.append(
                            (n.profile, n.event.to_json())), id=pid)
                        ref["native"].add(native.profile(text, pid))
                if rnd and ref["ws"]._profiles:  # drop one websocket profile
                    victim = sorted(ref["ws"]._profiles)[0]
                    assert (await reader.request(op="unsubscribe", id=victim))["type"] == \
                        "unsubscribed"
                    ref["ws"].remove(victim)
                await settle(gn.brokers, [native])
                batch = [random_event(rng) for _ in range(40)]
                over_ws = [random_event(rng) for _ in range(5)]
                at_b3 = [random_event(rng) for _ in range(10)]
                body = "\n".join(json.dumps(e) for e in batch) + "\n"
                r = await http.post("/api/publish", content=body,
                                    headers={"content-type": "application/x-ndjson"})
                assert r.status_code == 200 and r.json()["published"] == 40, r.text
                reply = await reader.request(op="publish", events=over_ws)
                assert reply == {"type": "published", "count": 5}
                await native.publish_batch(at_b3, ack=True)
                for data in batch + over_ws + at_b3:
                    ev: Event = event_from_dict(data, SCHEMA)
                    for who, m in ref.items():
                        for pid in m.match(ev):
                            expected[(who, pid, ev.to_json())] += 1
                n_ws = sum(v for (w, _, _), v in expected.items() if w == "ws")
                await reader.wait_for(n_ws)
                await settle(gn.brokers, [native])
        await asyncio.sleep(0.1)  # nothing more may come
        got = Counter(("ws", n["subscription"], event_from_dict(n["event"], SCHEMA).to_json())
                      for n in reader.notes)
        got.update(("native", pid, ev) for pid, ev in got_native)
        assert got == expected
        assert sum(expected.values()) > 0
    finally:
        await reader.close()
        await native.close()


async def test_publish_reports_bad_lines_and_publishes_the_rest(gn: GatewayNetwork) -> None:
    reader = WsReader(await websockets.connect(ws_url(gn)))
    await reader.request(op="subscribe", id="all", profile="T()")
    lines = ['{"type": "T", "a": 1, "b": "LO", "s": "x"}', "not json", "",
             '{"type": "T", "a": 9, "b": "LO", "s": "x"}', '{"type": "Nope"}',
             '{"type": "T", "a": 2, "b": "HI", "s": "y"}']
    async with httpx.AsyncClient(base_url=gn.url) as http:
        r = await http.post("/api/publish", content="\n".join(lines),
                            headers={"content-type": "application/x-ndjson"})
        assert r.status_code == 200
        out = r.json()
        assert out["published"] == 2 and out["rejected"] == 3
        assert [e["line"] for e in out["errors"]] == [2, 4, 5]
        assert "a" in out["errors"][1]["message"] and "Nope" in out["errors"][2]["message"]
        # an array: positions from 1; a single object; nothing valid: 400
        r = await http.post("/api/publish", json=[{"type": "U", "x": 1}, {"type": "U"}])
        assert (r.status_code, r.json()["published"], r.json()["errors"][0]["line"]) == \
            (200, 1, 2)
        r = await http.post("/api/publish", json={"type": "U", "x": 3})
        assert r.json() == {"published": 1, "rejected": 0, "errors": []}
        r = await http.post("/api/publish", json={"type": "U", "x": 4})
        assert r.status_code == 400 and r.json()["rejected"] == 1
        r = await http.post("/api/publish", content=b"{", headers={
            "content-type": "application/json"})
        assert r.status_code == 400 and r.json()["error"]["type"] == "EventError"
    await reader.wait_for(2)
    assert [n["event"]["a"] for n in reader.notes] == [1, 2]
    await reader.close()


async def test_request_limits_give_one_clear_error() -> None:
    limits = GatewayLimits(max_body=2000, max_batch=5, max_subscriptions=2,
                           request_timeout=0.5)
    gn = await start_gateway_network(limits=limits)
    try:
        async with httpx.AsyncClient(base_url=gn.url) as http:
            big = "\n".join(json.dumps({"type": "U", "x": 1}) for _ in range(200))
            r = await http.post("/api/publish", content=big,
                                headers={"content-type": "application/x-ndjson"})
            assert r.status_code == 413 and "2000 bytes" in r.json()["error"]["message"]

            async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted
                for _ in range(100):
                    yield b'{"type": "U", "x": 1}\n'
            r = await http.post("/api/publish", content=chunks(),
                                headers={"content-type": "application/x-ndjson"})
            assert r.status_code == 413
            r = await http.post("/api/publish", json=[{"type": "U", "x": 1}] * 6)
            assert r.status_code == 413 and "at most 5" in r.json()["error"]["message"]
            r = await http.post("/api/subscriptions", json={"profile": "U()", "id": "w"})
            assert r.status_code == 201
            r = await http.get("/api/subscriptions/w/notifications", params={"wait": 5})
            assert r.status_code == 504 and "0.5 s" in r.json()["error"]["message"]
            r = await http.get("/api/health")
            assert r.status_code == 200  # and it keeps serving
        reader = WsReader(await websockets.connect(ws_url(gn)))
        for i in range(2):
            assert (await reader.request(op="subscribe", profile="U()"))["id"] == f"s{i + 1}"
        r3 = await reader.request(op="subscribe", profile="U()")
        assert r3["type"] == "error" and r3["error"]["type"] == "QuotaExceeded"
        await reader.close()
    finally:
        await gn.close()


async def test_errors_are_json_and_the_socket_stays_open(gn: GatewayNetwork) -> None:
    async with httpx.AsyncClient(base_url=gn.url) as http:
        r = await http.post("/api/subscriptions", json={"profile": "T(a > )"})
        err = r.json()["error"]
        assert r.status_code == 400 and err["type"] == "ProfileSyntaxError"
        assert err["column"] is not None
        r = await http.delete("/api/subscriptions/none")
        assert r.status_code == 404
        r = await http.get("/api/brokers/B9/table")
        assert r.status_code == 400 and "B9" in r.json()["error"]["message"]
    reader = WsReader(await websockets.connect(ws_url(gn)))
    for bad in ["[1]", "{", '{"op": "fly"}', '{"op": "subscribe", "profile": "X()"}',
                '{"op": "unsubscribe", "id": "ghost"}', '{"op": "watch", "interval": -1}',
                '{"op": "publish", "events": [{"type": "T"}]}']:
        await reader.ws.send(bad)
        reply = await asyncio.wait_for(reader.replies.get(), 10)
        assert reply["type"] == "error" and reply["error"]["message"], (bad, reply)
    assert (await reader.request(op="ping", ref=7)) == {"type": "pong", "ref": 7}
    await reader.close()


async def test_sse_and_pull_subscriptions(gn: GatewayNetwork) -> None:
    async with httpx.AsyncClient(base_url=gn.url, timeout=20) as http:
        r = await http.post("/api/subscriptions", json={"profile": "hot: T(a >= 6)"})
        assert r.status_code == 201 and r.json() == {"id": "hot", "profile": "T(a > 5)"}
        assert (await http.post("/api/subscriptions", json={
            "profile": "T()", "id": "hot"})).status_code == 409
        async with http.stream("GET", "/api/sse", params={"profile": ["U(x = 2)", "T(a = 7)"]}
                               ) as stream:
            lines = stream.aiter_lines()
            assert await anext(lines) == "event: subscribed"
            first = json.loads((await anext(lines))[len("data: "):])
            assert [s["id"] for s in first["subscriptions"]] == ["s1", "s2"]
            await http.post("/api/publish", json=[
                {"type": "U", "x": 2}, {"type": "T", "a": 7, "b": "LO", "s": ""},
                {"type": "U", "x": 1}])
            got = []
            async with asyncio.timeout(10):
                async for line in lines:
                    if line.startswith("data: "):
                        got.append(json.loads(line[6:]))
                    if len(got) == 2:
                        break
        assert [(g["subscription"], g["event"]["type"]) for g in got] == [("s1", "U"),
                                                                         ("s2", "T")]
        r = await http.get("/api/subscriptions/hot/notifications", params={"wait": 5})
        assert [n["event"]["a"] for n in r.json()["notifications"]] == [7]
        r = await http.get("/api/subscriptions")
        assert r.json() == [{"id": "hot", "profile": "T(a > 5)", "queued": 0, "dropped": 0}]
        assert (await http.delete("/api/subscriptions/hot")).status_code == 204
    async with asyncio.timeout(5):  # the SSE stream's profiles leave with it
        while gn.brokers["B1"].node.stats().local_profiles:
            await asyncio.sleep(0.02)


async def test_explain_schema_network_and_tables(gn: GatewayNetwork) -> None:
    native = await Client.connect(port=gn.brokers["B3"].port)
    await native.subscribe("T(a > 3)")
    await native.subscribe("T(a > 5)")
    await settle(gn.brokers, [native])
    async with httpx.AsyncClient(base_url=gn.url) as http:
        r = await http.post("/api/explain", json={
            "profile": "T(a > 5, b = HI)", "event": {"type": "T", "a": 3, "b": "HI", "s": ""}})
        out = r.json()
        assert out["matches"] is False
        assert [(c["condition"], c["holds"]) for c in out["conditions"]] == [
            ("a > 5", False), ("b = HI", True)]
        assert (await http.get("/api/schema")).json()["U"] == {"x": "int[0,3]"}
        net = (await http.get("/api/network")).json()
        assert net["edges"] == [["B1", "B2"], ["B2", "B3"]] or \
            sorted(map(sorted, net["edges"])) == [["B1", "B2"], ["B2", "B3"]]
        assert net["stats"]["B3"]["by_type"]["T"] == {"local": 2, "neighbour": 0}
        assert net["stats"]["B3"]["stats"]["local_profiles"] == 2
        table = (await http.get("/api/brokers/B2/table")).json()
        # covering: B3 forwards only the root T(a > 3) toward B2
        assert [root["filter"] for root in table["roots"]] == ["T(a > 3)"]
        assert table["roots"][0]["subscribers"] == ["B3"]
    await native.close()


async def test_a_slow_websocket_client_cannot_stall_the_gateway() -> None:
    """A client that never reads: its outbox fills and the rest is dropped and counted,
    while a reading client of the same gateway receives everything and REST answers."""
    gn = await start_gateway_network(limits=GatewayLimits(queue_size=400))
    try:
        slow = await websockets.connect(ws_url(gn), max_queue=1, compression=None)
        await slow.send(json.dumps({"op": "subscribe", "id": "all", "profile": "T()"}))
        await asyncio.wait_for(slow.recv(), 10)
        fast = WsReader(await websockets.connect(ws_url(gn)))
        await fast.request(op="subscribe", id="all", profile="T()")
        blob = "x" * 10_000  # 20 MB in all: more than the socket buffers hold
        n = 0
        async with httpx.AsyncClient(base_url=gn.url, timeout=30) as http:
            for _ in range(10):
                batch = [{"type": "T", "a": 1, "b": "LO", "s": blob} for _ in range(200)]
                r = await http.post("/api/publish", json=batch)
                assert r.json()["published"] == 200
                n += 200
                assert (await http.get("/api/health")).status_code == 200
                await fast.wait_for(n, 30)  # a burst fits the reader's queue
            families = {f.name: f for f in text_string_to_metric_families(
                (await http.get("/metrics")).text)}
        dropped = families["siftbus_gateway_notifications_dropped"].samples[0].value
        assert dropped > 0
        assert len(fast.notes) == n
        await fast.close()
        await slow.close()
    finally:
        await gn.close()


async def test_channel_administration(gn: GatewayNetwork) -> None:
    async with httpx.AsyncClient(base_url=gn.url) as http:
        assert (await http.get("/api/channels")).json() == []
        r = await http.post("/api/channels", json={})
        assert r.status_code == 201
        cid = r.json()["id"]
        listed = (await http.get("/api/channels")).json()
        assert [c["id"] for c in listed] == [cid]
        assert (await http.delete(f"/api/channels/{cid}")).status_code == 204
        assert (await http.get("/api/channels")).json() == []
        r = await http.delete(f"/api/channels/{cid}")
        assert r.status_code == 404, r.text
