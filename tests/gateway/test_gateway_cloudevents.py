"""CloudEvents at the gateway, end to end on a real B1 - B2 - B3 network: events published
in structured, batch and binary mode (written by the ``cloudevents`` SDK), refused ones
reported by position; notifications on a ``?format=cloudevents`` WebSocket and SSE stream
read back by the SDK's parser, and exactly those the reference matcher predicts."""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import websockets
from cloudevents.core.bindings.http import to_binary
from cloudevents.core.formats.json import JSONFormat
from cloudevents.core.v1.event import CloudEvent

from broker_strategies import SCHEMA
from siftbus.lang.profile import parse_profile
from siftbus.match.reference import ReferenceMatcher
from siftbus.model import event_from_dict

from .servers import GatewayNetwork, start_gateway_network

FORMAT = JSONFormat()


@pytest.fixture
async def gn() -> AsyncIterator[GatewayNetwork]:
    net = await start_gateway_network()
    yield net
    await net.close()


def cloudevent(ev: dict[str, Any], i: int) -> CloudEvent:
    data = {k: v for k, v in ev.items() if k != "type"}
    return CloudEvent({"type": f"org.example.{ev['type']}", "source": "/test", "id": str(i),
                       "specversion": "1.0", "datacontenttype": "application/json"}, data)


def random_event(rng: random.Random) -> dict[str, Any]:
    if rng.random() < 0.3:
        return {"type": "U", "x": rng.randint(0, 3)}
    return {"type": "T", "a": rng.randint(0, 7), "b": rng.choice(["LO", "MID", "HI"]),
            "s": rng.choice(["ab", "b"])}


def event_of(ce_json: dict[str, Any]) -> str:
    """The event a notification CloudEvent carries, read by the SDK."""
    ce = FORMAT.read(None, json.dumps(ce_json).encode())
    assert ce.get_specversion() == "1.0" and ce.get_source().startswith("/siftbus/")
    data = ce.get_data()
    assert isinstance(data, dict)
    return event_from_dict({"type": ce.get_type(), **data}, SCHEMA).to_json()


async def test_cloudevents_in_and_out(gn: GatewayNetwork) -> None:
    rng = random.Random(5)
    profiles = {"hot": "T(a >= 4)", "u": "U(x <= 1)", "all": "T()"}
    ref = ReferenceMatcher()
    for sid, text in profiles.items():
        ref.add(parse_profile(text, SCHEMA, id=sid))
    ws = await websockets.connect(gn.url.replace("http://", "ws://") +
                                  "/api/ws?format=cloudevents")
    notes: list[dict[str, Any]] = []
    try:
        for sid, text in profiles.items():
            await ws.send(json.dumps({"op": "subscribe", "id": sid, "profile": text}))
            assert json.loads(await ws.recv())["type"] == "subscribed"
        evs = [random_event(rng) for _ in range(30)]
        ces = [cloudevent(e, i) for i, e in enumerate(evs)]
        async with httpx.AsyncClient(base_url=gn.url, timeout=20) as http:
            r = await http.post("/api/publish", content=FORMAT.write(ces[0]),
                                headers={"content-type": "application/cloudevents+json"})
            assert r.json() == {"published": 1, "rejected": 0, "errors": []}
            binary = to_binary(ces[1], FORMAT)
            r = await http.post("/api/publish", content=binary.body, headers=binary.headers)
            assert r.json()["published"] == 1
            bad = CloudEvent({"type": "T", "source": "/t", "id": "x", "specversion": "1.0"},
                             {"a": 99, "b": "LO", "s": ""})
            batch = b"[" + b",".join(FORMAT.write(c) for c in [*ces[2:10], bad, *ces[10:]]) \
                + b"]"
            r = await http.post("/api/publish", content=batch,
                                headers={"content-type": "application/cloudevents-batch+json"})
            body = r.json()
            assert body["published"] == 28 and body["rejected"] == 1
            assert body["errors"][0]["line"] == 9 and "T.a" in body["errors"][0]["message"]
            r = await http.post("/api/publish", content=b"{}",
                                headers={"content-type": "application/cloudevents+json"})
            assert r.status_code == 400 and r.json()["rejected"] == 1
        expect = Counter((pid, event_from_dict(e, SCHEMA).to_json()) for e in evs
                         for pid in ref.match(event_from_dict(e, SCHEMA)))
        async with asyncio.timeout(15):
            while len(notes) < sum(expect.values()):
                msg = json.loads(await ws.recv())
                if msg["type"] == "notifications":
                    notes.extend(msg["notifications"])
        assert Counter((n["subject"], event_of(n)) for n in notes) == expect
    finally:
        await ws.close()


async def test_sse_notifications_as_cloudevents(gn: GatewayNetwork) -> None:
    async with httpx.AsyncClient(base_url=gn.url, timeout=20) as http:
        r = await http.get("/api/sse", params={"profile": "U(x = 2)", "format": "xml"})
        assert r.status_code == 422
        async with http.stream("GET", "/api/sse", params={"profile": ["U(x = 2)"],
                                                          "format": "cloudevents"}) as stream:
            lines = stream.aiter_lines()
            assert await anext(lines) == "event: subscribed"
            await anext(lines)
            await http.post("/api/publish", json=[{"type": "U", "x": 1}, {"type": "U", "x": 2}])
            got = []
            async with asyncio.timeout(10):
                async for line in lines:
                    if line.startswith("data: "):
                        got.append(json.loads(line[6:]))
                        break
        assert [event_of(g) for g in got] == ['{"type": "U", "x": 2}']
        assert got[0]["subject"] == "s1"
