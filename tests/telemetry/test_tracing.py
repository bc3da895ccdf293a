"""OpenTelemetry tracing across a 3-broker network (in-process servers, the SDK's
in-memory exporter): one event published at B1 and delivered to subscribers at B2 and B3
(one of them a session that acknowledges) is one trace whose span tree follows the
messaging conventions -- send at the publisher, process at each broker on the path,
receive at each subscriber, settle on the session's ack; and through the gateway the
HTTP caller's traceparent is the root. Tracing off, frames carry no context."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import siftbus.telemetry as telemetry
from broker.servers import settle, start_network
from gateway.servers import GatewayNetwork, start_gateway_network
from siftbus.broker.server import BrokerServer
from siftbus.client import Client
from siftbus.client.session import SessionState

EVENT = {"type": "T", "a": 3, "b": "LO", "s": "ab"}


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.enable(provider)
    try:
        yield exporter
    finally:
        telemetry.disable()
        provider.shutdown()


@pytest.fixture
async def network() -> AsyncIterator[dict[str, BrokerServer]]:
    servers = await start_network(["B1", "B2", "B3"], [("B1", "B2"), ("B2", "B3")],
                                  "forwarding")
    yield servers
    for s in reversed(list(servers.values())):
        await s.close()


def tree(finished: tuple[ReadableSpan, ...]) -> dict[str, Any]:
    """span id -> (name, parent span id, broker or client) of one trace."""
    assert len({s.context.trace_id for s in finished}) == 1, "one trace"
    return {s.context.span_id: (s.name, s.parent.span_id if s.parent else None,
                                (s.attributes or {}).get("siftbus.broker"))
            for s in finished}


async def test_one_event_is_one_trace_across_three_brokers(
        spans: InMemorySpanExporter, network: dict[str, BrokerServer]) -> None:
    b2 = await Client.connect("127.0.0.1", network["B2"].port, name="sub2")
    b3 = await Client.connect("127.0.0.1", network["B3"].port, name="sub3",
                              session=SessionState("s3", auto_ack=False))
    pub = await Client.connect("127.0.0.1", network["B1"].port, name="pub")
    try:
        s2 = await b2.subscribe("T(a >= 3)")
        s3 = await b3.subscribe("T(b = LO)")
        await settle(network, [b2, b3, pub])
        spans.clear()
        await pub.publish_batch([EVENT], ack=True)
        async with asyncio.timeout(10):
            await anext(aiter(s2))
            await anext(aiter(s3))
        await b3.ack()
        await settle(network, [b2, b3, pub])
        async with asyncio.timeout(10):
            while len(spans.get_finished_spans()) < 7:
                await asyncio.sleep(0.02)
    finally:
        for c in (pub, b2, b3):
            await c.close()
    t = tree(spans.get_finished_spans())
    by_name: dict[tuple[str, Any], Any] = {(n, b): (sid, p) for sid, (n, p, b) in t.items()}
    send, root = by_name[("send T", None)]
    assert root is None
    p1, parent1 = by_name[("process T", "B1")]
    p2, parent2 = by_name[("process T", "B2")]
    p3, parent3 = by_name[("process T", "B3")]
    assert (parent1, parent2, parent3) == (send, p1, p2)  # the path B1 -> B2 -> B3
    receives = sorted(p for sid, (n, p, _) in t.items() if n == "receive T")
    assert receives == sorted([p2, p3])  # each subscriber under its access broker
    (settle_parent,) = [p for n, p, _ in t.values() if n == "settle"]
    assert t[settle_parent][0] == "receive T" and t[settle_parent][1] == p3
    assert len(t) == 7
    kinds = {s.name: s.kind.name for s in spans.get_finished_spans()}
    assert kinds == {"send T": "PRODUCER", "process T": "CONSUMER", "receive T": "CONSUMER",
                     "settle": "CLIENT"}
    attrs = next(s.attributes for s in spans.get_finished_spans() if s.name == "send T")
    assert attrs is not None and attrs["messaging.system"] == "siftbus"
    assert attrs["messaging.operation.type"] == "send"
    assert attrs["messaging.destination.name"] == "T"


async def test_the_gateway_continues_the_callers_trace(spans: InMemorySpanExporter) -> None:
    gn: GatewayNetwork = await start_gateway_network(channels=False)
    try:
        sub = await Client.connect("127.0.0.1", gn.brokers["B3"].port, name="far")
        s = await sub.subscribe("U()")
        await settle(gn.brokers, [sub])
        spans.clear()
        trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
        async with httpx.AsyncClient(base_url=gn.url) as http:
            r = await http.post("/api/publish", json={"type": "U", "x": 1}, headers={
                "traceparent": f"00-{trace_id}-00f067aa0ba902b7-01"})
            assert r.json()["published"] == 1
        async with asyncio.timeout(10):
            await anext(aiter(s))
            while not any(x.name == "receive U" for x in spans.get_finished_spans()):
                await asyncio.sleep(0.02)
        await sub.close()
    finally:
        await gn.close()
    done = spans.get_finished_spans()
    assert {f"{x.context.trace_id:032x}" for x in done} == {trace_id}
    send = next(x for x in done if x.name == "send U")
    assert send.parent is not None and send.parent.span_id == 0x00f067aa0ba902b7
    assert [x.name for x in done].count("process U") == 3


async def test_off_no_context_in_frames(network: dict[str, BrokerServer]) -> None:
    assert telemetry.TRACER is None
    seen: list[dict[str, Any]] = []
    sub = await Client.connect("127.0.0.1", network["B3"].port)
    original = sub._notify

    def spy(body: dict[str, Any]) -> None:
        seen.append(body)
        original(body)

    sub._notify = spy  # type: ignore[method-assign]
    s = await sub.subscribe("T()")
    pub = await Client.connect("127.0.0.1", network["B1"].port)
    await settle(network, [sub, pub])
    await pub.publish_batch([EVENT], ack=True)
    async with asyncio.timeout(10):
        await anext(aiter(s))
    await pub.close()
    await sub.close()
    assert seen and all(telemetry.KEY not in b for b in seen)
