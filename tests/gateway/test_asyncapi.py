"""``/asyncapi.json``: the AsyncAPI 3.0 document of the gateway's streams.

The document validates against the official AsyncAPI 3.0.0 JSON Schema (from the
``@asyncapi/specs`` npm package, which ``make test`` fetches into ``.cache/``; no PyPI
package ships it). Beyond it this checks the structure a reader relies on -- version,
info, servers, channels with addresses and messages, operations whose action is send or
receive, every ``$ref`` resolving -- checks every payload is a valid JSON Schema
(jsonschema's meta-schema check), and, the part that can fail in practice, that what a
live gateway really sends and accepts on its WebSocket and SSE streams validates against
the document's payload schemas. The OpenAPI document lists the same schemas."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets
from jsonschema import Draft202012Validator
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from siftbus.gateway.asyncapi import asyncapi_document

from .servers import GatewayNetwork, start_gateway_network

OFFICIAL_SCHEMA = Path(__file__).resolve().parents[2] / ".cache" / "asyncapi-3.0.0.json"
"""The official AsyncAPI 3.0.0 schema (``make test`` fetches it: ``make
.cache/asyncapi-3.0.0.json``)."""


def test_the_document_validates_against_the_official_asyncapi_3_schema() -> None:
    from jsonschema import Draft7Validator

    if not OFFICIAL_SCHEMA.is_file():
        pytest.skip("the official AsyncAPI schema is fetched by `make test` "
                    "(make .cache/asyncapi-3.0.0.json)")
    validator = Draft7Validator(json.loads(OFFICIAL_SCHEMA.read_text()))
    doc = asyncapi_document("0.1.0")
    assert [e.message for e in validator.iter_errors(doc)] == []
    # the check can fail: an operation with an action AsyncAPI 3 does not have
    broken = json.loads(json.dumps(doc))
    next(iter(broken["operations"].values()))["action"] = "publish"
    assert list(validator.iter_errors(broken))


@pytest.fixture
async def gn() -> AsyncIterator[GatewayNetwork]:
    net = await start_gateway_network(channels=False)
    yield net
    await net.close()


def resolve(doc: dict[str, Any], ref: str) -> Any:
    assert ref.startswith("#/"), ref
    node: Any = doc
    for part in ref[2:].split("/"):
        assert isinstance(node, dict) and part in node, f"{ref} does not resolve"
        node = node[part]
    return node


def refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        out = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return out + [r for v in node.values() for r in refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in refs(v)]
    return []


class Payloads:
    """Validates messages against the document's payload schemas."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc
        root = DRAFT202012.create_resource({"components": doc["components"]})
        self.registry: Registry[Any] = Registry().with_resource("urn:doc", root)

    def names(self, channel: str) -> list[str]:
        return list(self.doc["channels"][channel]["messages"])

    def check(self, channel: str, msg: Any) -> str:
        """The name of the channel's message that ``msg`` validates against (exactly one
        of the names for its ``type``/``op`` must accept it)."""
        ok = []
        for name in self.names(channel):
            schema = {"$ref": f"urn:doc#/components/schemas/{name}"}
            v = Draft202012Validator(schema, registry=self.registry)
            if v.is_valid(msg):
                ok.append(name)
        assert ok, f"no message of {channel} describes {msg}"
        return ok[0]


async def test_the_document_is_asyncapi_3_and_describes_what_the_gateway_says(
        gn: GatewayNetwork) -> None:
    async with httpx.AsyncClient(base_url=gn.url, timeout=20) as http:
        doc = (await http.get("/asyncapi.json")).json()
        openapi = (await http.get("/openapi.json")).json()
    # structure (the AsyncAPI 3.0 rules a reader relies on)
    assert doc["asyncapi"] == "3.0.0"
    assert doc["info"]["title"] and doc["info"]["version"]
    assert {s["protocol"] for s in doc["servers"].values()} == {"ws", "http"}
    assert {c["address"] for c in doc["channels"].values()} == {"/api/ws", "/api/sse"}
    for op in doc["operations"].values():
        assert op["action"] in ("send", "receive")
        channel = resolve(doc, op["channel"]["$ref"])
        for m in op["messages"]:  # an operation's messages are its channel's
            assert m["$ref"].startswith(op["channel"]["$ref"] + "/messages/")
        assert channel["messages"]
    for ref in refs(doc):
        resolve(doc, ref)
    for name, schema in doc["components"]["schemas"].items():
        Draft202012Validator.check_schema(schema)
        assert openapi["components"]["schemas"][name] == schema  # the same models
    sent = {op["messages"][0]["$ref"].rsplit("/", 1)[1] for k, op in doc["operations"].items()
            if op["action"] == "send"}
    assert sent == {"SubscribeOp", "UnsubscribeOp", "PublishOp", "WatchOp", "PingOp",
                    "SessionOp", "AckOp"}

    # what a live gateway sends and accepts validates against the payload schemas
    payloads = Payloads(doc)
    seen: list[str] = []
    ops = [{"op": "subscribe", "profile": "T(a > 2)", "id": "hot", "ref": 1},
           {"op": "publish", "events": [{"type": "T", "a": 5, "b": "LO", "s": "x"}]},
           {"op": "ping"}, {"op": "subscribe", "profile": "T(nope = 1)"},
           {"op": "unsubscribe", "id": "hot"}, {"op": "watch", "interval": 0}]
    async with websockets.connect(gn.url.replace("http://", "ws://") + "/api/ws") as ws:
        for op in ops:
            assert payloads.check("ws", op).endswith("Op")
            await ws.send(json.dumps(op))
        async with asyncio.timeout(10):
            while len(seen) < len(ops) + 1:  # every reply and one notifications message
                seen.append(payloads.check("ws", json.loads(await ws.recv())))
    assert sorted(seen) == sorted(["SubscribedReply", "PublishedReply", "PongReply",
                                   "ErrorReply", "UnsubscribedReply", "WatchingReply",
                                   "NotificationsMessage"])
    session_ops = [{"op": "session", "id": "phone-1"}, {"op": "subscribe", "profile": "U()"},
                   {"op": "publish", "event": {"type": "U", "x": 1}}]
    async with websockets.connect(gn.url.replace("http://", "ws://") +
                                  "/api/ws?format=cloudevents") as ws:
        got = []
        for op in session_ops:
            await ws.send(json.dumps(op))
        async with asyncio.timeout(10):
            while "NotificationsMessage" not in got:
                got.append(payloads.check("ws", json.loads(await ws.recv())))
        await ws.send(json.dumps({"op": "ack", "n": 1}))
        async with asyncio.timeout(10):
            while got[-1] not in ("AckedReply", "ErrorReply"):
                got.append(payloads.check("ws", json.loads(await ws.recv())))
    assert {"SessionReply", "NotificationsMessage", "AckedReply"} <= set(got)

    async with httpx.AsyncClient(base_url=gn.url, timeout=20) as http, \
            http.stream("GET", "/api/sse", params={"profile": "U()"}) as stream:
        events = []
        await http.post("/api/publish", json={"type": "U", "x": 2})
        async with asyncio.timeout(10):
            async for line in stream.aiter_lines():
                if line.startswith("data: "):
                    events.append(payloads.check("sse", json.loads(line[6:])))
                if len(events) == 2:
                    break
    assert events == ["SseSubscribed", "Notification"]
