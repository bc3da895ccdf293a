"""Prometheus metrics scraped over HTTP and read with prometheus_client's text parser:
the values are the servers' own counters (broker, gateway)."""

from __future__ import annotations

import json
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from broker.servers import settle
from siftbus.broker.metrics import serve_broker_metrics
from siftbus.client import Client

from .servers import start_gateway_network


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of an exposition by (name, sorted labels)."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(scraped: dict[Any, float], name: str, **labels: str) -> float:
    return scraped[(name, tuple(sorted(labels.items())))]


async def test_broker_and_gateway_metrics_match_their_counters() -> None:
    gn = await start_gateway_network()
    listeners = {n: await serve_broker_metrics(s) for n, s in gn.brokers.items()}
    native = await Client.connect(port=gn.brokers["B3"].port, name="far")
    try:
        await native.subscribe("T(a >= 4)")
        await native.subscribe("U()")
        await settle(gn.brokers, [native])
        async with httpx.AsyncClient(timeout=20) as http:
            events = [{"type": "T", "a": a, "b": "LO", "s": ""} for a in range(8)] + \
                [{"type": "U", "x": 1}, {"type": "U", "x": 5}]  # the last one is bad
            r = await http.post(gn.url + "/api/publish", content="\n".join(
                json.dumps(e) for e in events), headers={"content-type": "application/x-ndjson"})
            assert r.json()["published"] == 9
            await native.publish_batch([{"type": "U", "x": 0}], ack=True)
            await settle(gn.brokers, [native])
            scraped = {n: samples((await http.get(lst.url + "/metrics")).text)
                       for n, lst in listeners.items()}
            gw = samples((await http.get(gn.url + "/metrics")).text)
        for name, srv in gn.brokers.items():
            s, m = srv.node.stats(), scraped[name]
            b = {"broker": name}
            assert value(m, "siftbus_broker_events_received_total", source="client", **b) == \
                s.events_published
            assert value(m, "siftbus_broker_events_received_total", source="broker", **b) == \
                s.events_in - s.events_published
            assert value(m, "siftbus_broker_events_forwarded_total", **b) == s.events_out
            assert value(m, "siftbus_broker_notifications_total", **b) == s.notifications
            assert value(m, "siftbus_broker_notify_latency_seconds_count", **b) == \
                sum(s.latency_ms.values())
            for z, lk in s.links.items():
                if not z.startswith("@"):
                    assert value(m, "siftbus_broker_link_bytes_total", link=z,
                                 direction="out", **b) == lk.bytes_out
            for z in srv.node.neighbours:
                assert value(m, "siftbus_broker_neighbour_up", neighbour=z, **b) == 1
        far = scraped["B3"]
        # the user's view: B3 notified 4 T events (a >= 4) and 2 U events to its client
        assert value(far, "siftbus_broker_notifications_total", broker="B3") == 6
        assert value(far, "siftbus_broker_table_profiles", broker="B3", type="T",
                     source="local") == 1
        assert value(scraped["B1"], "siftbus_broker_events_received_total", broker="B1",
                     source="client") == 9
        assert value(gw, "siftbus_gateway_events_published_total", gateway="B1") == 9
        assert value(gw, "siftbus_gateway_events_rejected_total", gateway="B1") == 1
        assert value(gw, "siftbus_gateway_http_responses_total", gateway="B1", code="2xx") >= 1
        assert value(gw, "siftbus_gateway_broker_sessions", gateway="B1") == 1
    finally:
        await native.close()
        for lst in listeners.values():
            await lst.close()
        await gn.close()


async def test_channel_service_metrics_match_the_channels() -> None:
    from siftbus.channel.factory import EventChannelFactory
    from siftbus.channel.metrics import channel_registry
    from siftbus.wire.httpserver import serve_metrics

    factory = EventChannelFactory(None)
    channel, cid = factory.create_channel({}, {})
    consumer = channel.default_consumer_admin.obtain_pull_supplier()
    consumer.connect_any_pull_consumer()
    push = channel.default_supplier_admin.obtain_push_consumer()
    push.connect_any_push_supplier()
    for v in range(5):
        push.push(v)
    assert consumer.try_pull() == (0, True)
    listener = await serve_metrics(channel_registry(factory, lambda: 3))
    try:
        async with httpx.AsyncClient() as http:
            m = samples((await http.get(listener.url + "/metrics")).text)
    finally:
        await listener.close()
        factory.close()
    s = channel.stats()
    c = {"channel": str(cid)}
    assert value(m, "siftbus_channel_channels") == 1
    assert value(m, "siftbus_channel_events_accepted_total", **c) == s.accepted == 5
    assert value(m, "siftbus_channel_deliveries_total", **c) == s.delivered
    assert value(m, "siftbus_channel_queued_events", **c) == s.queued == 4
    assert value(m, "siftbus_channel_proxies", side="consumer", **c) == s.consumers == 1
    assert value(m, "siftbus_channel_request_errors_total") == 3


async def test_xml_filter_metrics_match_its_stats() -> None:
    import dataclasses
    from pathlib import Path

    from siftbus.wire.httpserver import EmbeddedHTTPServer
    from siftbus.xmlfilter import XmlEventFilter
    from siftbus.xmlfilter.http import create_app
    from siftbus.xmlfilter.output import Dispatcher

    data = Path(__file__).resolve().parents[1] / "data" / "xml"
    filt = XmlEventFilter()
    async with EmbeddedHTTPServer(create_app(filt, Dispatcher({}))) as srv, \
            httpx.AsyncClient(base_url=srv.url, timeout=10) as http:
        r = await http.post("/subscriptions",
                            content=(data / "appendix6_subscriptions.xml").read_bytes())
        assert r.status_code == 201
        r = await http.post("/publish", content=(data / "appendix7_message.xml").read_bytes())
        assert r.json()["events"] == 3
        m = samples((await http.get("/metrics")).text)
        stats = (await http.get("/stats")).json()
    assert value(m, "siftbus_xmlfilter_subscriptions") == stats["subscriptions"] == 3
    assert value(m, "siftbus_xmlfilter_events_total") == stats["matcher"]["events"] == 3
    assert value(m, "siftbus_xmlfilter_matched_events_total") == \
        stats["matcher"]["matched_events"] == 1
    assert value(m, "siftbus_xmlfilter_undeliverable_total") == stats["undeliverable"] > 0
    assert dataclasses.asdict(filt.matcher.stats())["elements"] == \
        value(m, "siftbus_xmlfilter_elements_total")


def test_the_grafana_dashboard_charts_only_series_that_exist() -> None:
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    dash = json.loads((root / "examples/grafana/siftbus.json").read_text())
    used = {re.sub(r"_(bucket|total)$", "", name) for p in dash["panels"]
            for t in p["targets"] for name in re.findall(r"siftbus_\w+", t["expr"])}
    sources = "".join((root / "src/siftbus" / m).read_text() for m in (
        "broker/metrics.py", "gateway/metrics.py", "channel/metrics.py", "xmlfilter/metrics.py"))
    assert len(used) > 15
    missing = {n for n in used if f'"{n}"' not in sources}
    assert not missing
