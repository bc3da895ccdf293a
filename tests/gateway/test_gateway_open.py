"""The gateway on an extended schema (issue 31): JSON events with nested, array, optional
and open-kind fields published over REST and the WebSocket, subscriptions with the new
operators and ``or`` over the WebSocket and natively at the far broker; each subscriber
receives exactly what the reference predicts, the events as nested JSON."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import AsyncIterator

import httpx
import pytest
import websockets

from broker.servers import settle
from open_orders import ORDERS_SCHEMA
from siftbus.client import Client
from siftbus.lang.profile import parse_profile
from siftbus.match.reference import ReferenceMatcher
from siftbus.model import event_from_dict, parse_schema

from .servers import GatewayNetwork, start_gateway_network
from .test_gateway import WsReader, ws_url

SCHEMA = parse_schema(ORDERS_SCHEMA)

WS_PROFILES = {
    "gold": "Order(customer.tier = GOLD)",
    "anyvip": 'Order(tags = "vip" or customer.name prefix "an" ignorecase)',
    "v6": 'Order(client cidr "2001:db8::/32", price > 10.25)',
    "nopaid": "Order(paid not exists)",
    "likes": 'Order(customer.name like "*o*", at >= "2024-01-01T00:00:00Z")',
}
NATIVE = {"re": 'Order(customer.name matches "[a-z]+", tags not in {"old"})'}

EVENTS = [
    {"type": "Order", "id": 1, "price": 12.5, "tags": ["vip"], "client": "2001:db8::7",
     "customer": {"tier": "GOLD", "name": "Anna"}},
    {"type": "Order", "id": 2, "price": 3, "paid": True, "tags": ["old", "new"],
     "customer": {"tier": "BRONZE", "name": "bob"}, "extra": {"ignored": [1, 2]}},
    {"type": "Order", "id": -3, "price": 99.75, "paid": False, "tags": "old",
     "at": "2024-05-01T12:00:00+02:00", "customer": {"tier": "SILVER", "name": "Tom"}},
    {"type": "Order", "id": 4, "price": 10.25, "tags": ["x"], "client": "10.0.0.1",
     "customer": {"tier": "GOLD"}},
]


@pytest.fixture
async def gn() -> AsyncIterator[GatewayNetwork]:
    net = await start_gateway_network(SCHEMA, channels=False)
    yield net
    await net.close()


async def test_extended_events_and_operators_over_rest_and_websocket(
        gn: GatewayNetwork) -> None:
    ref = {"ws": ReferenceMatcher(), "native": ReferenceMatcher()}
    for who, profiles in (("ws", WS_PROFILES), ("native", NATIVE)):
        for pid, text in profiles.items():
            ref[who].add(parse_profile(f"{pid}: {text}", SCHEMA))
    native = await Client.connect("127.0.0.1", gn.brokers["B3"].port, name="native",
                                  reconnect=False)
    got_native: list[tuple[str, str]] = []
    reader = WsReader(await websockets.connect(ws_url(gn)))
    try:
        for pid, text in WS_PROFILES.items():
            reply = await reader.request(op="subscribe", id=pid, profile=text)
            assert reply["type"] == "subscribed", reply
        for pid, text in NATIVE.items():
            await native.subscribe(text, lambda n: got_native.append(
                (n.profile, n.event.to_json())), id=pid)
        await settle(gn.brokers, [native])
        async with httpx.AsyncClient(base_url=gn.url, timeout=20) as http:
            body = "".join(json.dumps(e) + "\n" for e in EVENTS[:3])
            r = await http.post("/api/publish", content=body,
                                headers={"content-type": "application/x-ndjson"})
            assert r.json() == {"published": 3, "rejected": 0, "errors": []}, r.text
            bad = {**EVENTS[0], "client": "not-an-ip"}
            r = await http.post("/api/publish", json=bad)
            assert r.status_code == 400 and "client" in r.json()["errors"][0]["message"]
        assert await reader.request(op="publish", events=EVENTS[3:]) == {
            "type": "published", "count": 1}
        want: Counter[tuple[str, str, str]] = Counter()
        for data in EVENTS:
            ev = event_from_dict(data, SCHEMA)
            for who, m in ref.items():
                want.update((who, pid, ev.to_json()) for pid in m.match(ev))
        await reader.wait_for(sum(v for (w, _, _), v in want.items() if w == "ws"))
        await settle(gn.brokers, [native])
        got = Counter(("ws", n["subscription"], event_from_dict(n["event"], SCHEMA).to_json())
                      for n in reader.notes)
        got.update(("native", pid, ev) for pid, ev in got_native)
        assert got == want
        assert {pid for _, pid, _ in want} == {*WS_PROFILES, *NATIVE}  # each one matched
        gold = next(n["event"] for n in reader.notes if n["subscription"] == "gold")
        assert gold["customer"]["tier"] == "GOLD" and isinstance(gold["tags"], list)
        reply = await reader.request(op="subscribe", id="bad",
                                     profile='Order(customer.name matches "(a)\\\\1")')
        assert reply["type"] == "error" and "RE2" in reply["error"]["message"], reply
    finally:
        await reader.close()
        await native.close()
