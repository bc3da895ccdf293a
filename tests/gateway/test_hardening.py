"""The gateway's answers to what acceptance testing found wrong (issue 30, items 6 and
7): consumers after their broker restarts, health during the outage, strict UTF-8 and a
BOM in bodies and queries, binary WebSocket messages, one error shape for every refusal
(bounded), a clean session start, and resent session rows not counted as dropped."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import websockets
from prometheus_client.parser import text_string_to_metric_families

from siftbus.broker.server import BrokerServer

from .servers import GatewayNetwork, start_gateway_network


@pytest.fixture
async def gn() -> AsyncIterator[GatewayNetwork]:
    net = await start_gateway_network(channels=False)
    yield net
    await net.close()


def ws_url(gn: GatewayNetwork) -> str:
    return gn.url.replace("http://", "ws://") + "/api/ws"


async def ask(ws: Any, **msg: Any) -> dict[str, Any]:
    await ws.send(json.dumps(msg))
    while True:
        reply: dict[str, Any] = json.loads(await asyncio.wait_for(ws.recv(), 10))
        if reply["type"] not in ("notifications", "dropped"):
            return reply


# ---- item 6: a broker restart -----------------------------------------------------------

async def _stop_b1(gn: GatewayNetwork) -> int:
    port = gn.brokers["B1"].port
    await gn.brokers["B1"].close()
    return port


async def _start_b1(gn: GatewayNetwork, port: int) -> None:
    srv = BrokerServer(gn.net.node("B1"), "127.0.0.1", port)
    await srv.start()
    gn.brokers["B1"] = srv
    await srv.wait_neighbours(10)


async def test_a_broker_restart_closes_plain_consumers_and_health_says_so(
        gn: GatewayNetwork) -> None:
    async with httpx.AsyncClient(base_url=gn.url, timeout=20) as http:
        health = (await http.get("/api/health")).json()
        assert health["status"] == "ok" and health["client"]  # the documented key
        ws = await websockets.connect(ws_url(gn))
        assert (await ask(ws, op="subscribe", profile="T(a >= 0)"))["type"] == "subscribed"
        r = await http.post("/api/subscriptions", json={"profile": "U()", "id": "pulled"})
        assert r.status_code == 201
        async with http.stream("GET", "/api/sse", params={"profile": "T(a >= 0)"}) as sse:
            lines = sse.aiter_lines()
            assert (await asyncio.wait_for(lines.__anext__(), 10)) == "event: subscribed"
            port = await _stop_b1(gn)
            # the plain socket is closed with 1012, the SSE stream ends with an error
            with pytest.raises(websockets.ConnectionClosed) as closed:
                while True:
                    await asyncio.wait_for(ws.recv(), 10)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1012
            rest = [ln async for ln in lines]
            assert "event: error" in rest and "retry: 5000" in rest, rest
            r = await http.get("/api/health")
            assert r.status_code == 503 and r.json()["status"] == "unavailable"
            with pytest.raises(websockets.InvalidStatus) as refused:
                await websockets.connect(ws_url(gn))
            assert refused.value.response.status_code == 503
        await _start_b1(gn, port)
        r = await http.get("/api/health")
        assert r.status_code == 200 and r.json()["status"] == "ok"
        # the pull subscription says once that it ended, then it is gone
        r = await http.get("/api/subscriptions/pulled/notifications")
        assert r.status_code == 503 and "subscribe again" in r.json()["error"]["message"]
        assert (await http.get("/api/subscriptions/pulled/notifications")).status_code == 404
        # connecting again and subscribing again delivers again
        ws = await websockets.connect(ws_url(gn))
        await ask(ws, op="subscribe", profile="T(a >= 0)", id="x")
        await asyncio.sleep(0.3)
        r = await http.post("/api/publish", json={"type": "T", "a": 1, "b": "LO", "s": "x"})
        assert r.json()["published"] == 1
        msg = json.loads(await asyncio.wait_for(ws.recv(), 10))
        assert msg["type"] == "notifications" and msg["notifications"][0]["event"]["a"] == 1
        await ws.close()


# ---- item 7: strict input, one error shape ------------------------------------------------

BAD_UTF8 = b'{"type": "T", "a": 1, "b": "LO", "s": "\xff\xfe"}'


async def test_bodies_and_queries_are_strict_utf8_and_a_bom_is_skipped(
        gn: GatewayNetwork) -> None:
    async with httpx.AsyncClient(base_url=gn.url, timeout=20) as http:
        for ctype in ("application/json", "application/x-ndjson"):
            r = await http.post("/api/publish", content=BAD_UTF8,
                                headers={"content-type": ctype})
            assert r.status_code == 400, r.text
            err = r.json()["error"]
            assert err["type"] == "EventError" and "not UTF-8" in err["message"]
            assert (err["line"], err["column"]) == (1, 40)
        good = b'{"type": "T", "a": 1, "b": "LO", "s": "x"}'
        for ctype in ("application/json", "application/x-ndjson"):
            r = await http.post("/api/publish", content=b"\xef\xbb\xbf" + good,
                                headers={"content-type": ctype})
            assert r.status_code == 200 and r.json()["published"] == 1, r.text
        r = await http.post("/api/subscriptions", content=b'\xef\xbb\xbf{"profile": "U()"}',
                            headers={"content-type": "application/json"})
        assert r.status_code == 201, r.text
        r = await http.get("/api/sse?profile=T(s%20%3D%20%22%FF%22)")
        assert r.status_code == 400, r.text
        assert r.json()["error"]["field"] == "profile"
        assert "not UTF-8" in r.json()["error"]["message"]
        assert gn.gateway.gateway.counters.published == 2


async def test_every_refusal_has_the_documented_shape_and_a_bounded_excerpt(
        gn: GatewayNetwork) -> None:
    async with httpx.AsyncClient(base_url=gn.url, timeout=20) as http:
        huge = "x" * 70_000
        answers = [
            await http.post("/api/subscriptions", json={"profile": huge}),  # over max_length
            await http.post("/api/subscriptions", content=b"{not json",
                            headers={"content-type": "application/json"}),
            await http.post("/api/explain", json={"profile": "T()"}),  # event missing
            await http.get("/api/subscriptions/x/notifications?max=0"),
            await http.get("/api/no-such-route"),
            await http.delete("/api/health"),
        ]
        for r in answers:
            body = r.json()
            assert set(body) == {"error"}, (r.status_code, r.text[:200])
            assert {"type", "message"} <= set(body["error"])
            assert len(r.content) < 1000, (r.status_code, len(r.content))
        assert [r.status_code for r in answers] == [422, 422, 422, 422, 404, 405]
        assert answers[0].json()["error"]["field"] == "profile"


async def test_a_binary_websocket_message_gets_an_error_and_the_socket_stays(
        gn: GatewayNetwork) -> None:
    ws = await websockets.connect(ws_url(gn))
    await ws.send(b'{"op": "ping"}')
    reply = json.loads(await asyncio.wait_for(ws.recv(), 10))
    assert reply["type"] == "error" and "binary" in reply["error"]["message"]
    assert (await ask(ws, op="ping"))["type"] == "pong"
    await ws.close()


# ---- item 7: sessions -------------------------------------------------------------------

async def test_a_clean_session_start_leaves_no_stale_subscription(gn: GatewayNetwork) -> None:
    ws = await websockets.connect(ws_url(gn))
    assert (await ask(ws, op="session", id="tab-1"))["state"] == "new"
    assert (await ask(ws, op="subscribe", profile="T(a >= 0)", id="old"))["type"] == \
        "subscribed"
    await ws.close()
    await asyncio.sleep(0.2)
    ws = await websockets.connect(ws_url(gn))
    reply = await ask(ws, op="session", id="tab-1", clean=True)
    assert reply["subscriptions"] == [], reply
    # the old id is free again, and what it now subscribes delivers
    assert (await ask(ws, op="subscribe", profile="U()", id="old"))["type"] == "subscribed"
    await asyncio.sleep(0.3)
    async with httpx.AsyncClient(base_url=gn.url, timeout=20) as http:
        await http.post("/api/publish", json=[{"type": "T", "a": 1, "b": "LO", "s": "x"},
                                              {"type": "U", "x": 2}])
    msg = json.loads(await asyncio.wait_for(ws.recv(), 10))
    assert [n["event"]["type"] for n in msg["notifications"]] == ["U"]
    await ws.close()


async def test_resent_session_rows_are_not_counted_as_dropped(gn: GatewayNetwork) -> None:
    ws = await websockets.connect(ws_url(gn))
    await ask(ws, op="session", id="tab-2")
    await ask(ws, op="subscribe", profile="U()", id="u")
    await asyncio.sleep(0.3)
    async with httpx.AsyncClient(base_url=gn.url, timeout=20) as http:
        events = [{"type": "U", "x": i % 4} for i in range(69)]
        for i in range(0, 69, 10):
            await http.post("/api/publish", json=events[i:i + 10])
        got: list[int] = []
        while len(got) < 69:
            msg = json.loads(await asyncio.wait_for(ws.recv(), 10))
            got += [n["n"] for n in msg.get("notifications", ())]
        await ws.close()  # nothing acknowledged: all 69 are resent to the next socket
        ws = await websockets.connect(ws_url(gn))
        await ask(ws, op="session", id="tab-2")
        again: list[int] = []
        while len(again) < 69:
            msg = json.loads(await asyncio.wait_for(ws.recv(), 10))
            again += [n["n"] for n in msg.get("notifications", ())]
        assert again == got == list(range(1, 70))
        await ws.close()
        stats = gn.brokers["B1"].node.counters
        assert stats.dropped_by.get("slow_consumer", 0) == 0, stats.dropped_by
        text = (await http.get("/metrics")).text
    dropped = [s.value for f in text_string_to_metric_families(text) for s in f.samples
               if s.name == "siftbus_gateway_notifications_dropped_total"]
    assert dropped == [0.0]
