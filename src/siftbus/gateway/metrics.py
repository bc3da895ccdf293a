"""Prometheus metrics of the gateway: a collector over its own counters.

=============================================  ========  ==============================
name                                           type      labels (besides ``gateway``)
=============================================  ========  ==============================
siftbus_gateway_events_published_total         counter
siftbus_gateway_events_rejected_total          counter
siftbus_gateway_http_responses_total           counter   code (2xx, 4xx, 5xx ...)
siftbus_gateway_connections_total              counter   kind (websocket, sse)
siftbus_gateway_consumers                      gauge     kind (websocket, sse, pull)
siftbus_gateway_subscriptions                  gauge
siftbus_gateway_notifications_total            counter
siftbus_gateway_notifications_dropped_total    counter   reason (slow_consumer)
siftbus_gateway_queued_messages                gauge
siftbus_gateway_queued_messages_max            gauge
siftbus_gateway_broker_sessions                gauge
siftbus_gateway_session_sockets                gauge
=============================================  ========  ==============================

``queued_messages`` counts notifications (the name is kept for existing dashboards).

``gateway`` is the name of the broker the gateway is a client of. The gateway's
``/metrics`` also carries the process's own ``process_*`` metrics.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from siftbus.wire.httpserver import metrics_registry

from .hub import Gateway

KINDS = {"w": "websocket", "e": "sse", "p": "pull"}


class GatewayCollector(Collector):
    """Reads one gateway's counters at every scrape."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        g = self.gateway
        c = g.counters
        name = g.broker

        def family(kind: type[CounterMetricFamily] | type[GaugeMetricFamily], metric: str,
                   doc: str, value: float, **labels: str) -> Metric:
            m = kind(metric, doc, labels=["gateway", *labels])
            m.add_metric([name, *labels.values()], value)
            return m

        yield family(CounterMetricFamily, "siftbus_gateway_events_published",
                     "Events published to the broker through the gateway.", c.published)
        yield family(CounterMetricFamily, "siftbus_gateway_events_rejected",
                     "Publish lines or items refused (bad JSON, not in the schema).",
                     c.rejected)
        codes = CounterMetricFamily("siftbus_gateway_http_responses",
                                    "HTTP responses by status class.",
                                    labels=["gateway", "code"])
        for code, n in sorted(c.requests.items()):
            codes.add_metric([name, code], n)
        yield codes
        conns = CounterMetricFamily("siftbus_gateway_connections",
                                    "Streaming connections accepted, by kind.",
                                    labels=["gateway", "kind"])
        for kind, n in sorted(c.connections.items()):
            conns.add_metric([name, kind], n)
        yield conns
        live = list(g.outboxes.values())
        by_kind = Counter(KINDS.get(o.key[0], "other") for o in live)
        consumers = GaugeMetricFamily("siftbus_gateway_consumers",
                                      "Consumers open now, by kind.",
                                      labels=["gateway", "kind"])
        for kind in KINDS.values():
            consumers.add_metric([name, kind], by_kind[kind])
        yield consumers
        yield family(GaugeMetricFamily, "siftbus_gateway_subscriptions",
                     "Profiles subscribed through the gateway now.",
                     sum(len(o.subscriptions) for o in live))
        delivered, dropped = g.totals()
        yield family(CounterMetricFamily, "siftbus_gateway_notifications",
                     "Notifications queued toward gateway consumers.", delivered)
        yield family(CounterMetricFamily, "siftbus_gateway_notifications_dropped",
                     "Notifications dropped: the consumer's queue was full.", dropped,
                     reason="slow_consumer")
        depths = [o.queued for o in live]
        yield family(GaugeMetricFamily, "siftbus_gateway_queued_messages",
                     "Notifications waiting toward consumers, summed.", sum(depths))
        yield family(GaugeMetricFamily, "siftbus_gateway_queued_messages_max",
                     "The most notifications waiting toward one consumer.",
                     max(depths, default=0))
        yield family(GaugeMetricFamily, "siftbus_gateway_broker_sessions",
                     "Broker connections open (one per distinct token and broker).",
                     g.session_count)
        yield family(GaugeMetricFamily, "siftbus_gateway_session_sockets",
                     "WebSockets attached to a broker session (each with its own broker "
                     "connection).", len(g.attached))


def gateway_registry(gateway: Gateway, *, process: bool = True) -> CollectorRegistry:
    """A registry with the gateway's collector (and the process's own metrics)."""
    return metrics_registry(GatewayCollector(gateway), process=process)


__all__ = ["GatewayCollector", "gateway_registry"]
