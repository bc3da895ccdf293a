"""siftbus's XML event filter after the ADiWa design (Suschke 2010), with its bugs fixed.

Subscriptions (XSD-validated XML or the builder API) name a receiver and a disjunction of
content filters; each filter is a target in a restricted XPath and a conjunction of
conditions. XML messages are cut into events while lxml parses them, matched by a counting
matcher over an attribute-path index, and every matched event becomes one notification
carrying the event subtree as XML.
"""

from __future__ import annotations

from siftbus.errors import require_extra

require_extra("xml", "the XML event filter", "lxml", "xmlschema")

from siftbus.xmlfilter.covering import covers, overlaps
from siftbus.xmlfilter.document import parse_subscriptions, to_xml
from siftbus.xmlfilter.engine import EventResult, XmlEventFilter
from siftbus.xmlfilter.matcher import ElementMatch, MatcherStats, XmlMatcher
from siftbus.xmlfilter.network import Delivery, XmlNetwork
from siftbus.xmlfilter.operators import operator_names
from siftbus.xmlfilter.output import (
    CallbackSink,
    ClientSink,
    Dispatcher,
    MemorySink,
    Notification,
    NotificationSink,
    SinkStats,
)
from siftbus.xmlfilter.parallel import ParallelFilter
from siftbus.xmlfilter.reference import XPathReference
from siftbus.xmlfilter.subscription import (
    FILTER_NS,
    SUBSCRIPTION_NS,
    Condition,
    ContentFilter,
    Receiver,
    Subscription,
    make_condition,
)
from siftbus.xmlfilter.xpath import RelPath, Target, compile_path, compile_target

__all__ = [
    "FILTER_NS",
    "SUBSCRIPTION_NS",
    "CallbackSink",
    "ClientSink",
    "Condition",
    "ContentFilter",
    "Delivery",
    "Dispatcher",
    "ElementMatch",
    "EventResult",
    "MatcherStats",
    "MemorySink",
    "Notification",
    "NotificationSink",
    "ParallelFilter",
    "Receiver",
    "RelPath",
    "SinkStats",
    "Subscription",
    "Target",
    "XPathReference",
    "XmlEventFilter",
    "XmlMatcher",
    "XmlNetwork",
    "compile_path",
    "compile_target",
    "covers",
    "make_condition",
    "operator_names",
    "overlaps",
    "parse_subscriptions",
    "to_xml",
]
