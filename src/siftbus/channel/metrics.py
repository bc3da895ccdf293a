"""Prometheus metrics of a channel service: a collector over the channels' own counters.

====================================================  ========  ====================
name                                                  type      labels
====================================================  ========  ====================
siftbus_channel_channels                              gauge
siftbus_channel_events_accepted_total                 counter   channel
siftbus_channel_deliveries_total                      counter   channel
siftbus_channel_events_filtered_out_total             counter   channel
siftbus_channel_events_dropped_total                  counter   channel, reason
                                                                (discarded, expired,
                                                                rejected)
siftbus_channel_queued_events                         gauge     channel
siftbus_channel_proxies                               gauge     channel, side
siftbus_channel_request_errors_total                  counter
====================================================  ========  ====================

Each scrape reads :meth:`EventChannel.stats` of every channel, the same values
``siftbus channel list`` shows. Serve them with ``siftbus channel serve --metrics-port``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from siftbus.errors import ChannelError
from siftbus.wire.httpserver import metrics_registry

from .factory import EventChannelFactory
from .stats import ChannelStats


class ChannelCollector(Collector):
    """Reads every channel of ``factory`` at each scrape; ``errors`` gives the service's
    count of requests answered with an error."""

    def __init__(self, factory: EventChannelFactory,
                 errors: Callable[[], int] | None = None) -> None:
        self.factory = factory
        self.errors = errors

    def describe(self) -> list[Metric]:
        return []

    def _stats(self) -> dict[str, ChannelStats]:
        out = {}
        for cid in self.factory.get_all_channels():
            try:
                out[str(cid)] = self.factory.get_event_channel(cid).stats()
            except ChannelError:
                continue  # destroyed since it was listed
        return out

    def collect(self) -> Iterator[Metric]:
        stats = self._stats()
        count = GaugeMetricFamily("siftbus_channel_channels", "Channels now.")
        count.add_metric([], len(stats))
        yield count

        def per(kind: type[CounterMetricFamily] | type[GaugeMetricFamily], name: str,
                doc: str, field: str) -> Metric:
            m = kind(name, doc, labels=["channel"])
            for cid, s in stats.items():
                m.add_metric([cid], getattr(s, field))
            return m

        yield per(CounterMetricFamily, "siftbus_channel_events_accepted",
                  "Events accepted from suppliers.", "accepted")
        yield per(CounterMetricFamily, "siftbus_channel_deliveries",
                  "Events delivered to consumers (one per consumer).", "delivered")
        yield per(CounterMetricFamily, "siftbus_channel_events_filtered_out",
                  "Events no consumer's filters let through.", "filtered_out")
        dropped = CounterMetricFamily("siftbus_channel_events_dropped",
                                      "Events dropped: full queue (discarded), timed out "
                                      "(expired), refused at push (rejected).",
                                      labels=["channel", "reason"])
        for cid, s in stats.items():
            for reason in ("discarded", "expired", "rejected"):
                dropped.add_metric([cid, reason], getattr(s, reason))
        yield dropped
        yield per(GaugeMetricFamily, "siftbus_channel_queued_events",
                  "Events waiting in proxy queues.", "queued")
        proxies = GaugeMetricFamily("siftbus_channel_proxies", "Proxies connected now.",
                                    labels=["channel", "side"])
        for cid, s in stats.items():
            proxies.add_metric([cid, "consumer"], s.consumers)
            proxies.add_metric([cid, "supplier"], s.suppliers)
        yield proxies
        if self.errors is not None:
            errors = CounterMetricFamily("siftbus_channel_request_errors",
                                         "Requests answered with an error.")
            errors.add_metric([], self.errors())
            yield errors


def channel_registry(factory: EventChannelFactory, errors: Callable[[], int] | None = None,
                     *, process: bool = True) -> CollectorRegistry:
    """A registry with the channels' collector (and the process's own metrics)."""
    return metrics_registry(ChannelCollector(factory, errors), process=process)


__all__ = ["ChannelCollector", "channel_registry"]
