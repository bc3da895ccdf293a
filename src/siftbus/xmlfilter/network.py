"""XML subscriptions routed across a network of brokers (thesis §5.1.2, Fig. 20/21).

Every broker has an XML filter. Brokers form an acyclic network; subscribers and
publishers attach to one broker each. A subscription travels from its broker towards the
publishers, and at every hop the broker registers it with itself as the receiver of the
next one down (reverse-path routing: "each broker overwrites the receiver address with
its own name"). An event travels from its publisher's broker along the links whose
broker holds a matching subscription, and every broker delivers it to its own matching
subscribers. Two strategies decide where a subscription goes:

* ``flooding`` (the thesis's prototype): to every broker;
* ``advertisements`` (Siena): a publisher first advertises the events it will send (content
  filters every one of its events matches); advertisements are flooded, and a
  subscription only goes towards brokers from which an advertisement came that it
  overlaps (:func:`~siftbus.xmlfilter.covering.overlaps`). An advertisement that arrives
  later pulls the subscriptions that overlap it along.

With ``covering=True`` a broker does not forward a subscription on a link over which it
has already forwarded one that covers it (:func:`~siftbus.xmlfilter.covering.covers`);
when that one is withdrawn, the subscriptions it covered are forwarded then.

:class:`XmlNetwork` runs the network in one process, counting every message between
brokers and its bytes (subscriptions as ADiWa XML, events as their XML, advertisements
as subscription documents, withdrawals as the id), so that the strategies can be
compared on the same workload; ``tests/xmlfilter/test_xml_network.py`` checks that every strategy
delivers exactly what one XML filter holding every subscription delivers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Literal

from siftbus.errors import ConfigError, UnknownSubscriptionError
from siftbus.xmlfilter.covering import covers, overlaps
from siftbus.xmlfilter.document import to_xml
from siftbus.xmlfilter.engine import XmlEventFilter
from siftbus.xmlfilter.limits import quoted
from siftbus.xmlfilter.subscription import ContentFilter, Receiver, Subscription

Strategy = Literal["flooding", "advertisements"]
#: the callback method of a subscription that a broker forwarded
BROKER = "broker"


@dataclass(frozen=True, slots=True)
class Delivery:
    """One notification handed to a subscriber: which, for which subscription, which
    event (publication number), at which broker."""

    broker: str
    receiver: Receiver
    subscription: str
    event: int


@dataclass(slots=True)
class Traffic:
    """Messages and bytes between brokers, by kind."""

    messages: Counter[str] = field(default_factory=Counter)
    bytes: Counter[str] = field(default_factory=Counter)

    def count(self, kind: str, size: int) -> None:
        self.messages[kind] += 1
        self.bytes[kind] += size


class _Broker:
    """One broker: its filters and what it has sent over each link."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.links: list[str] = []
        #: its own subscribers' subscriptions (their views apply)
        self.local = XmlEventFilter(compile_min=8)
        #: subscriptions received over links; receivers are the link's broker, and views
        #: are dropped (an event is forwarded whole; views apply where it is delivered)
        self.routing = XmlEventFilter(compile_min=8)
        #: id -> (the subscription as its subscriber made it, where it came from: a link
        #: or None for a subscriber of this broker)
        self.subs: dict[str, tuple[Subscription, str | None]] = {}
        #: advertisement id -> (filters, the link it came over or None)
        self.ads: dict[str, tuple[tuple[ContentFilter, ...], str | None]] = {}
        #: per link: subscriptions forwarded over it, and those held back (covered)
        self.sent: dict[str, dict[str, Subscription]] = {}
        self.held: dict[str, dict[str, Subscription]] = {}


class XmlNetwork:
    """Brokers joined by links into a tree, one XML filter each (module docstring)."""

    def __init__(self, links: Iterable[tuple[str, str]], *, brokers: Iterable[str] = (),
                 strategy: Strategy = "flooding", covering: bool = True) -> None:
        """``links`` join the brokers into a tree; ``brokers`` names any more (a network
        of one broker has no link)."""
        if strategy not in ("flooding", "advertisements"):
            raise ConfigError(f"unknown routing strategy {quoted(strategy)}")
        self.strategy = strategy
        self.covering = covering
        self.traffic = Traffic()
        self.brokers: dict[str, _Broker] = {}
        edges = list(links)
        for n in brokers:
            if n not in self.brokers:
                self.brokers[n] = _Broker(n)
        for a, b in edges:
            for n in (a, b):
                if n not in self.brokers:
                    self.brokers[n] = _Broker(n)
            self.brokers[a].links.append(b)
            self.brokers[b].links.append(a)
            for x, y in ((a, b), (b, a)):
                self.brokers[x].sent[y] = {}
                self.brokers[x].held[y] = {}
        if len(edges) != len(self.brokers) - 1 or not self._connected():
            raise ConfigError("the brokers must form a tree (connected, without cycles)")
        self._events = 0

    def _connected(self) -> bool:
        if not self.brokers:
            return True
        start = next(iter(self.brokers))
        seen = {start}
        stack = [start]
        while stack:
            for n in self.brokers[stack.pop()].links:
                if n not in seen:
                    seen.add(n)
                    stack.append(n)
        return len(seen) == len(self.brokers)

    # -- subscriptions ------------------------------------------------------------------
    def subscribe(self, broker: str, sub: Subscription) -> None:
        """A subscriber of ``broker`` subscribes."""
        b = self.brokers[broker]
        b.local.subscribe(sub)
        b.subs[sub.id] = (sub, None)
        self._spread(b, sub)

    def unsubscribe(self, broker: str, sub_id: str) -> None:
        b = self.brokers[broker]
        sub, source = b.subs.get(sub_id, (None, None))
        if sub is None or source is not None:
            raise UnknownSubscriptionError(f"no subscription {quoted(sub_id)} at {broker}")
        b.local.unsubscribe(sub_id)
        self._withdraw(b, sub_id)

    def _spread(self, b: _Broker, sub: Subscription) -> None:
        """Offer a subscription known at ``b`` to every link but the one it came over."""
        source = b.subs[sub.id][1]
        for link in b.links:
            if link != source and sub.id not in b.sent[link] and self._wanted(b, link, sub):
                self._offer(b, link, sub)

    def _wanted(self, b: _Broker, link: str, sub: Subscription) -> bool:
        if self.strategy == "flooding":
            return True
        return any(src == link and any(overlaps(f, sub) for f in filters)
                   for filters, src in b.ads.values())

    def _offer(self, b: _Broker, link: str, sub: Subscription) -> None:
        if self.covering:
            for other in b.sent[link].values():
                if covers(other, sub):
                    b.held[link][sub.id] = sub
                    return
        b.sent[link][sub.id] = sub
        self.traffic.count("subscribe", len(to_xml([sub])))
        self._receive_sub(self.brokers[link], b.name, sub)

    def _receive_sub(self, b: _Broker, source: str, sub: Subscription) -> None:
        routed = Subscription.build(
            Receiver(BROKER, source),
            [replace(f, visible=None, visible_text=None) for f in sub.filters],
            id=sub.id, subscriber_id=sub.id)
        b.routing.subscribe(routed)
        b.subs[sub.id] = (sub, source)
        self._spread(b, sub)

    def _withdraw(self, b: _Broker, sub_id: str) -> None:
        """``sub_id`` is gone at ``b``: withdraw it wherever ``b`` sent it, and forward
        what it covered."""
        del b.subs[sub_id]
        for link in b.links:
            b.held[link].pop(sub_id, None)
            if b.sent[link].pop(sub_id, None) is None:
                continue
            self.traffic.count("unsubscribe", len(sub_id.encode()))
            nb = self.brokers[link]
            nb.routing.unsubscribe(sub_id)
            self._withdraw(nb, sub_id)
            for held in list(b.held[link].values()):  # no longer covered by it?
                if not any(covers(o, held) for o in b.sent[link].values()):
                    del b.held[link][held.id]
                    self._offer(b, link, held)

    # -- advertisements -------------------------------------------------------------------
    def advertise(self, broker: str, ad_id: str, filters: Iterable[ContentFilter]) -> None:
        """A publisher of ``broker`` announces that each of its events matches one of
        ``filters`` (only the advertisement strategy uses them)."""
        if self.strategy != "advertisements":
            return
        fs = tuple(filters)
        self._receive_ad(self.brokers[broker], ad_id, fs, None)

    def _receive_ad(self, b: _Broker, ad_id: str, fs: tuple[ContentFilter, ...],
                    source: str | None) -> None:
        b.ads[ad_id] = (fs, source)
        size = len(to_xml([Subscription.build(("ad", ad_id), fs, id=ad_id)]))
        for link in b.links:
            if link != source:
                self.traffic.count("advertise", size)
                self._receive_ad(self.brokers[link], ad_id, fs, b.name)
        if source is not None:  # subscriptions that overlap it now go towards it
            for sub, _ in list(b.subs.values()):
                if sub.id in b.subs:
                    self._spread(b, sub)

    # -- events ---------------------------------------------------------------------------
    def publish(self, broker: str, events: Iterable[bytes]) -> list[Delivery]:
        """A publisher of ``broker`` publishes events, each its own message (XML with one
        event and any wrapper), numbered in turn across the network; returns every
        delivery they cause."""
        out: list[Delivery] = []
        for ev in events:
            self._route(self.brokers[broker], ev, None, self._events, out)
            self._events += 1
        return out

    def _route(self, b: _Broker, message: bytes, source: str | None, number: int,
               out: list[Delivery]) -> None:
        for r in b.local.iter_results(message):
            for note in r.notifications:
                for sid in note.subscriptions:
                    rec = b.local.matcher.get(sid).receiver
                    out.append(Delivery(b.name, rec, sid, number + r.event))
        links: set[str] = set()
        for r in b.routing.iter_results(message):
            links.update(rec.address for rec in r.match.receivers)
        for link in sorted(links - {source} if source else links):
            self.traffic.count("event", len(message))
            self._route(self.brokers[link], message, b.name, number, out)
