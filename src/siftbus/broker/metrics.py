"""Prometheus metrics of a broker: a custom collector over the broker's own counters.

Nothing is counted twice: at each scrape :class:`BrokerCollector` reads the node's
:class:`~siftbus.broker.stats.BrokerStats` snapshot, its table and the transport's
counters, so the scraped values are exactly what ``siftbus network stats`` (the
``broker.stats`` service) reports. Names follow the Prometheus conventions
(``siftbus_broker_<thing>_<unit>``, counters end in ``_total``, base units); every
series carries the ``broker`` label, and other labels take values from bounded sets
only (event types of the schema, configured neighbours, drop reasons, limits).

=============================================  ========  ==================================
name                                           type      labels (besides ``broker``)
=============================================  ========  ==================================
siftbus_broker_info                            gauge     protocol, strategy, engine
siftbus_broker_events_received_total           counter   source (client, broker)
siftbus_broker_events_forwarded_total          counter
siftbus_broker_events_filtered_total           counter
siftbus_broker_matches_total                   counter
siftbus_broker_notifications_total             counter
siftbus_broker_notifications_dropped_total     counter   reason (offline, slow_consumer,
                                                         oversize)
siftbus_broker_table_profiles                  gauge     type, source (local, neighbour)
siftbus_broker_table_filters                   gauge
siftbus_broker_exported_profiles               gauge
siftbus_broker_advertisements                  gauge
siftbus_broker_covering_tests_total            counter
siftbus_broker_clients                         gauge
siftbus_broker_neighbour_up                    gauge     neighbour
siftbus_broker_link_frames_total               counter   link (a neighbour, or clients),
                                                         direction (in, out)
siftbus_broker_link_bytes_total                counter   link, direction
siftbus_broker_notify_latency_seconds          histogram
siftbus_broker_match_duration_seconds          histogram
siftbus_broker_client_queued_bytes             gauge
siftbus_broker_client_queued_bytes_max         gauge
siftbus_broker_connections                     gauge
siftbus_broker_connections_accepted_total      counter
siftbus_broker_connections_refused_total       counter   reason (a limit or an error class)
siftbus_broker_frames_dropped_total            counter
siftbus_broker_buffered_bytes                  gauge
=============================================  ========  ==================================

Serve them with :func:`serve_broker_metrics` (``metrics_port`` of a broker in the network
config, or ``siftbus broker --metrics-port``); the process's own ``process_*`` metrics
come with them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry

from siftbus.wire.httpserver import EmbeddedHTTPServer, metrics_registry, serve_metrics

from .inspect import profiles_by_type, queue_depths
from .server import BrokerServer
from .stats import DROP_REASONS, LATENCY_BOUNDS_MS, ROUTE_BOUNDS_S

CLIENTS_LINK = "clients"
"""The ``link`` label of traffic with local clients (summed: client names are not a
bounded set)."""


def histogram_buckets(counts: Mapping[str, int], bounds: tuple[float, ...],
                      scale: float = 1.0) -> list[tuple[str, float]]:
    """Cumulative ``(le, count)`` buckets from per-bucket counts (bounds times
    ``scale``, then ``+Inf``), as a Prometheus histogram has them."""
    values = list(counts.values())
    out: list[tuple[str, float]] = []
    acc = 0
    for bound, n in zip(bounds, values, strict=False):
        acc += n
        out.append((repr(float(bound * scale)), acc))
    out.append(("+Inf", sum(values)))
    return out


class BrokerCollector(Collector):
    """Reads one broker server's counters at every scrape (see the module docstring)."""

    def __init__(self, server: BrokerServer) -> None:
        self.server = server

    def describe(self) -> list[Metric]:
        return []  # names come from collect(); nothing is read at registration

    def collect(self) -> Iterator[Metric]:
        node = self.server.node
        s = node.stats()
        b = node.name

        def counter(name: str, doc: str, value: float, **labels: str) -> Metric:
            m = CounterMetricFamily(name, doc, labels=["broker", *labels])
            m.add_metric([b, *labels.values()], value)
            return m

        def gauge(name: str, doc: str, value: float) -> Metric:
            m = GaugeMetricFamily(name, doc, labels=["broker"])
            m.add_metric([b], value)
            return m

        info = GaugeMetricFamily("siftbus_broker_info", "The broker's routing setup.",
                                 labels=["broker", "protocol", "strategy", "engine"])
        info.add_metric([b, node.protocol, node.routing.table.strategy, node.engine], 1)
        yield info
        received = CounterMetricFamily("siftbus_broker_events_received",
                                       "Events received, from local publishers (client) "
                                       "and neighbour brokers (broker).",
                                       labels=["broker", "source"])
        received.add_metric([b, "client"], s.events_published)
        received.add_metric([b, "broker"], s.events_in - s.events_published)
        yield received
        yield counter("siftbus_broker_events_forwarded",
                      "Events sent to neighbour brokers (once per link).", s.events_out)
        yield counter("siftbus_broker_events_filtered",
                      "Events matched against the profile table.", s.filter_ops)
        yield counter("siftbus_broker_matches",
                      "(profile, event) matches, neighbours' profiles included.", s.matches)
        yield counter("siftbus_broker_notifications",
                      "(profile, event) notifications handed to local clients.",
                      s.notifications)
        dropped = CounterMetricFamily("siftbus_broker_notifications_dropped",
                                      "Notifications not delivered, by reason.",
                                      labels=["broker", "reason"])
        for reason in DROP_REASONS:
            dropped.add_metric([b, reason], s.dropped_by.get(reason, 0))
        yield dropped
        profiles = GaugeMetricFamily("siftbus_broker_table_profiles",
                                     "Profile-table entries by event type and source.",
                                     labels=["broker", "type", "source"])
        for etype, by_src in profiles_by_type(node).items():
            for src, n in by_src.items():
                profiles.add_metric([b, etype, src], n)
        yield profiles
        structure = node.routing.table.structure
        yield gauge("siftbus_broker_table_filters", "Distinct filters in the profile table.",
                    getattr(structure, "node_count", len(structure)))
        yield gauge("siftbus_broker_exported_profiles",
                    "Profiles this broker holds at its neighbours.", s.exported)
        yield gauge("siftbus_broker_advertisements", "Advertisements stored.", s.adverts)
        yield counter("siftbus_broker_covering_tests",
                      "Covering tests made while forwarding profiles.", s.covering_tests)
        yield gauge("siftbus_broker_clients", "Local clients connected now.", s.clients)
        up = GaugeMetricFamily("siftbus_broker_neighbour_up",
                               "1 while the link to a configured neighbour is up.",
                               labels=["broker", "neighbour"])
        live = node.neighbours_up()
        for z in node.neighbours:
            up.add_metric([b, z], 1 if z in live else 0)
        yield up
        yield from self._links(b, s.links)
        latency = HistogramMetricFamily(
            "siftbus_broker_notify_latency_seconds",
            "Publish-to-notify latency of notifications handed to local clients.",
            labels=["broker"])
        latency.add_metric([b], histogram_buckets(s.latency_ms, LATENCY_BOUNDS_MS, 1e-3),
                           s.latency_sum_s)
        yield latency
        route = HistogramMetricFamily(
            "siftbus_broker_match_duration_seconds",
            "Time to match one batch (a PUB or NOTIFY frame) and route it.",
            labels=["broker"])
        route.add_metric([b], histogram_buckets(s.route_s, ROUTE_BOUNDS_S), s.route_sum_s)
        yield route
        yield from self._transport(b)

    @staticmethod
    def _links(b: str, links: Mapping[str, Any]) -> Iterator[Metric]:
        frames = CounterMetricFamily("siftbus_broker_link_frames",
                                     "Frames per link (neighbours by name, local clients "
                                     "summed as 'clients').",
                                     labels=["broker", "link", "direction"])
        nbytes = CounterMetricFamily("siftbus_broker_link_bytes",
                                     "Bytes per link, length prefixes included.",
                                     labels=["broker", "link", "direction"])
        totals: dict[str, list[int]] = {}
        for name, lk in links.items():
            key = CLIENTS_LINK if name.startswith("@") else name
            t = totals.setdefault(key, [0, 0, 0, 0])
            t[0] += lk.messages_in
            t[1] += lk.messages_out
            t[2] += lk.bytes_in
            t[3] += lk.bytes_out
        totals.setdefault(CLIENTS_LINK, [0, 0, 0, 0])
        for name, (fi, fo, bi, bo) in sorted(totals.items()):
            frames.add_metric([b, name, "in"], fi)
            frames.add_metric([b, name, "out"], fo)
            nbytes.add_metric([b, name, "in"], bi)
            nbytes.add_metric([b, name, "out"], bo)
        yield frames
        yield nbytes

    def _transport(self, b: str) -> Iterator[Metric]:
        t = self.server.transport_stats()
        q = queue_depths(self.server.listener)

        def gauge(name: str, doc: str, value: float) -> Metric:
            m = GaugeMetricFamily(name, doc, labels=["broker"])
            m.add_metric([b], value)
            return m

        yield gauge("siftbus_broker_client_queued_bytes",
                    "Bytes written toward local clients and not yet sent.", q["queued_bytes"])
        yield gauge("siftbus_broker_client_queued_bytes_max",
                    "The most bytes waiting toward one local client.", q["max_queued_bytes"])
        yield gauge("siftbus_broker_connections", "Connections open now.", t.connections)
        accepted = CounterMetricFamily("siftbus_broker_connections_accepted",
                                       "Connections accepted since start.", labels=["broker"])
        accepted.add_metric([b], t.accepted)
        yield accepted
        refused = CounterMetricFamily("siftbus_broker_connections_refused",
                                      "Connections closed with an ERROR, by the limit "
                                      "exceeded or the error class.",
                                      labels=["broker", "reason"])
        for reason, n in sorted(t.refused.items()):
            refused.add_metric([b, reason], n)
        yield refused
        frames = CounterMetricFamily("siftbus_broker_frames_dropped",
                                     "Notification frames not sent: the client was too far "
                                     "behind or gone.", labels=["broker"])
        frames.add_metric([b], t.dropped_frames)
        yield frames
        yield gauge("siftbus_broker_buffered_bytes",
                    "Bytes received and not yet handled, over all connections.", t.buffered)


def broker_registry(server: BrokerServer, *, process: bool = True) -> CollectorRegistry:
    """A registry with the broker's collector (and the process's own metrics)."""
    return metrics_registry(BrokerCollector(server), process=process)


async def serve_broker_metrics(server: BrokerServer, host: str = "127.0.0.1",
                               port: int = 0) -> EmbeddedHTTPServer:
    """Serve the broker's metrics at ``http://host:port/metrics`` in its event loop."""
    return await serve_metrics(broker_registry(server), host, port,
                               name=f"broker {server.node.name} metrics listener")


__all__ = ["CLIENTS_LINK", "BrokerCollector", "broker_registry", "histogram_buckets",
           "serve_broker_metrics"]
