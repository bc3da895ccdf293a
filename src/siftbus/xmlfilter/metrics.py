"""Prometheus metrics of the XML filter's HTTP endpoint (``GET /metrics``).

==============================================  ========  ==============================
name                                            type      meaning
==============================================  ========  ==============================
siftbus_xmlfilter_subscriptions                 gauge     subscriptions registered now
siftbus_xmlfilter_elements_total                counter   elements the splitter offered
siftbus_xmlfilter_events_total                  counter   elements located as events
siftbus_xmlfilter_matched_events_total          counter   events with a receiver
siftbus_xmlfilter_precheck_skipped_total        counter   (event, target) evaluations the
                                                          pre-check skipped
siftbus_xmlfilter_constraints_satisfied_total   counter   satisfied constraints
siftbus_xmlfilter_filter_counters_total         counter   filter counters touched
siftbus_xmlfilter_undeliverable_total           counter   notifications no sink took
==============================================  ========  ==============================

The values are :meth:`XmlMatcher.stats` and the dispatcher's counters at scrape time
(what ``GET /stats`` answers).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from siftbus.wire.httpserver import metrics_registry

from .engine import XmlEventFilter
from .output import Dispatcher

_COUNTERS = (
    ("elements", "siftbus_xmlfilter_elements", "Elements offered by the splitter."),
    ("events", "siftbus_xmlfilter_events", "Elements located as events."),
    ("matched_events", "siftbus_xmlfilter_matched_events", "Events with a receiver."),
    ("precheck_dropped", "siftbus_xmlfilter_precheck_skipped",
     "(event, target) evaluations skipped by the pre-check."),
    ("constraints_satisfied", "siftbus_xmlfilter_constraints_satisfied",
     "Satisfied constraints summed over events."),
    ("counters", "siftbus_xmlfilter_filter_counters", "Filter counters touched."),
)


class XmlFilterCollector(Collector):
    """Reads an XML filter and its dispatcher at each scrape."""

    def __init__(self, filt: XmlEventFilter, dispatcher: Dispatcher | None = None) -> None:
        self.filt = filt
        self.dispatcher = dispatcher

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        subs = GaugeMetricFamily("siftbus_xmlfilter_subscriptions",
                                 "Subscriptions registered now.")
        subs.add_metric([], len(self.filt))
        yield subs
        stats = self.filt.matcher.stats()
        for field, name, doc in _COUNTERS:
            m = CounterMetricFamily(name, doc)
            m.add_metric([], getattr(stats, field))
            yield m
        if self.dispatcher is not None:
            m = CounterMetricFamily("siftbus_xmlfilter_undeliverable",
                                    "Notifications no sink took.")
            m.add_metric([], self.dispatcher.undeliverable)
            yield m


def xmlfilter_registry(filt: XmlEventFilter, dispatcher: Dispatcher | None = None
                       ) -> CollectorRegistry:
    """A registry with the filter's collector."""
    return metrics_registry(XmlFilterCollector(filt, dispatcher), process=False)


__all__ = ["XmlFilterCollector", "xmlfilter_registry"]
