"""WebSocket sessions end to end: a socket attached to a broker session gets numbered
notifications, acknowledges them, goes away, and resumes after its last acknowledged
number -- against a real B1 - B2 - B3 network on loopback, every notification checked
against the reference matcher's prediction: nothing lost, nothing twice."""

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
from siftbus.match.reference import ReferenceMatcher
from siftbus.model import Event, event_from_dict

from .servers import GatewayNetwork, start_gateway_network
from .test_gateway import WsReader, random_event, random_profile, ws_url


@pytest.fixture
async def gn() -> AsyncIterator[GatewayNetwork]:
    net = await start_gateway_network()
    yield net
    await net.close()


def rows(notes: list[dict[str, Any]]) -> dict[int, str]:
    """Session number -> the event's JSON (one number per notified event)."""
    out: dict[int, str] = {}
    for n in notes:
        ev = event_from_dict(n["event"], SCHEMA).to_json()
        assert out.setdefault(n["n"], ev) == ev, "one number, two events"
    return out


@pytest.mark.parametrize(("seed", "resume"), [(1, "gateway"), (2, "client"), (3, "gateway")])
async def test_a_session_socket_resumes_after_its_last_ack(gn: GatewayNetwork, seed: int,
                                                           resume: str) -> None:
    """Round 1 arrives on socket 1, which acknowledges part of it and goes; round 2 is
    published while it is away; socket 2 attaches the same session and receives the
    unacknowledged rest of round 1 and all of round 2. ``resume="gateway"``: socket 2
    relies on the acknowledgement it sent; ``"client"``: socket 1 acknowledged less
    than it processed, and socket 2 says how far it got (``ack`` in its session op)."""
    rng = random.Random(seed)
    pubs = [await Client.connect("127.0.0.1", gn.brokers[b].port, name=f"pub{b}")
            for b in ("B1", "B3")]
    ref = ReferenceMatcher()
    first = WsReader(await websockets.connect(ws_url(gn)))
    try:
        reply = await first.request(op="session", id="phone-7")
        assert reply["type"] == "session" and reply["state"] in ("new", "arriving"), reply
        for i in range(5):
            text = random_profile(rng)
            assert (await first.request(op="subscribe", id=f"p{i}", profile=text))["type"] \
                == "subscribed"
            ref.add(pubs[0].profile(text, f"p{i}"))
        await settle(gn.brokers, pubs)

        async def publish(n: int) -> Counter[tuple[str, str]]:
            expected: Counter[tuple[str, str]] = Counter()
            for k in range(n):
                data = random_event(rng)
                await pubs[k % 2].publish_batch([data], ack=True)
                ev: Event = event_from_dict(data, SCHEMA)
                expected.update((pid, ev.to_json()) for pid in ref.match(ev))
            return expected

        round1 = await publish(60)
        await first.wait_for(sum(round1.values()))
        got1 = rows(first.notes)
        assert sorted(got1) == list(range(1, len(got1) + 1))  # numbered from 1, no gap
        processed = len(got1) // 2  # what socket 1's application finished
        sent_ack = processed if resume == "gateway" else processed // 2
        assert (await first.request(op="ack", n=sent_ack)) == {"type": "acked",
                                                               "n": sent_ack}
        await first.close()

        round2 = await publish(60)
        second = WsReader(await websockets.connect(ws_url(gn)))
        try:
            op: dict[str, Any] = {"op": "session", "id": "phone-7"}
            if resume == "client":
                op["ack"] = processed
            reply = await second.request(**op)
            assert reply["type"] == "session" and reply["state"] == "attached", reply
            assert sorted(reply["subscriptions"]) == [f"p{i}" for i in range(5)]
            assert reply["acked"] == processed and reply["lost"] == 0
            expected = round1 + round2
            kept = [n for n in first.notes if n["n"] <= processed]
            await second.wait_for(sum(expected.values()) - len(kept))
            await settle(gn.brokers, pubs)
            await asyncio.sleep(0.2)  # nothing more may come
            got2 = rows(second.notes)
            assert min(got2) == processed + 1
            assert sorted(got2) == list(range(processed + 1, processed + len(got2) + 1))
            got = Counter((n["subscription"], event_from_dict(n["event"], SCHEMA).to_json())
                          for n in kept + second.notes)
            assert got == expected  # nothing lost, nothing twice
            assert sum(expected.values()) > 20
        finally:
            await second.close()
    finally:
        await first.close()
        for p in pubs:
            await p.close()


async def test_session_errors_and_take_over(gn: GatewayNetwork) -> None:
    """An ack needs a session and a number it was sent; a session op comes first; a
    second socket of the same session takes it over (the first is closed with 4000)."""
    plain = WsReader(await websockets.connect(ws_url(gn)))
    try:
        r = await plain.request(op="ack", n=1)
        assert r["type"] == "error" and r["error"]["field"] == "session"
        assert (await plain.request(op="subscribe", id="x", profile="U()"))["type"] == \
            "subscribed"
        r = await plain.request(op="session", id="late")
        assert r["type"] == "error" and "before any subscribe" in r["error"]["message"]
    finally:
        await plain.close()
    one = await websockets.connect(ws_url(gn))
    await one.send(json.dumps({"op": "session", "id": "tab"}))
    assert json.loads(await asyncio.wait_for(one.recv(), 10))["type"] == "session"
    await one.send(json.dumps({"op": "ack", "n": 5}))
    r = json.loads(await asyncio.wait_for(one.recv(), 10))
    assert r["type"] == "error" and r["error"]["field"] == "n"  # nothing was sent yet
    two = WsReader(await websockets.connect(ws_url(gn)))
    try:
        assert (await two.request(op="session", id="tab"))["type"] == "session"
        with contextlib.suppress(websockets.ConnectionClosed):
            async with asyncio.timeout(10):
                while True:
                    await one.recv()
        assert one.close_code == 4000
        assert (await two.request(op="subscribe", id="u", profile="U()"))["type"] == \
            "subscribed"
        async with httpx.AsyncClient(base_url=gn.url) as http:
            text = (await http.get("/metrics")).text
        samples = {(s.name, s.labels.get("kind")): s.value
                   for f in text_string_to_metric_families(text) for s in f.samples}
        assert samples[("siftbus_gateway_session_sockets", None)] == 1  # one after take-over
        assert samples[("siftbus_gateway_consumers", "websocket")] == 1
        # its broker connection lost: the socket is closed, to be attached again
        _, ob = gn.gateway.gateway.attached["tab"]
        await ob.client.close()
        await asyncio.wait_for(two.task, 10)
        assert two.ws.close_code == 1012
    finally:
        await two.close()
        await one.close()
