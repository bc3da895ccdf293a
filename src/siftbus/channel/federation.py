"""Federated channels: one notification channel spanning a broker network.

Each broker taking part runs a :class:`FederationMember` beside it, a client of that
broker, with two local channels:

* ``outbound``: the channel suppliers at this broker use (their SupplierAdmin and
  ProxyConsumer filters apply here). One push consumer of it publishes every event that
  passes into the network, as an event of the channel's :class:`FederatedType`.
* ``inbound``: the channel consumers at this broker use. The member subscribes at its
  broker to the profiles its consumers' filters compile to (:func:`interest`), so the
  network's content-based routing brings it only what they may want (a superset); every
  event it receives goes into ``inbound`` through one supplier proxy, where the exact
  ETCL check (both admins' InterFilterGroupOperators), QoS (order, discard, priority,
  expiry) and persistence (a durable factory) are the channel's own.

So a federated channel delivers to each consumer what one channel with the same filters
would: the network delivers each published event to each interested broker exactly once
(its guarantee), and the filters decide there. Events from this broker's suppliers reach
its own consumers through the broker too (a client's publication is matched for the
broker's other clients).

The member must be told when consumer-side filters or proxies change (:meth:`refresh`,
or ``watch=`` seconds for a periodic check); events published before the interest
reached the network are not delivered to the new consumers (as for any subscription).
Events published while a consumer's broker is down are not delivered there (at most
once; persistence keeps what the inbound channel had accepted). The Timeout of an
event counts again from its arrival at the consumer's broker.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from typing import Any

from siftbus.channel.channel import EventChannel
from siftbus.channel.event import StructuredEvent
from siftbus.channel.federation_type import FederatedType, interest
from siftbus.channel.proxy import STRUCTURED_EVENT, Proxy
from siftbus.client import Client
from siftbus.client.notifications import Notification
from siftbus.model import Profile

SEEN = 100_000
"""Publications remembered to drop a second notification of one event (one per
matching profile of this member)."""


class _Tap:
    """The outbound channel's consumer: hands each event to the member's loop, in order."""

    def __init__(self, member: FederationMember) -> None:
        self.member = member

    def push_structured_event(self, event: StructuredEvent) -> None:
        self.member.loop.call_soon_threadsafe(self.member.publish_now, event)


class FederationMember:
    """A federated channel's part at one broker (see the module docstring).

    ``outbound`` and ``inbound`` are ordinary channels (of any factories: a durable
    factory's inbound channel keeps its consumers and their queued events over a
    restart; give its id as ``inbound`` to take it back)."""

    def __init__(self, ftype: FederatedType, outbound: EventChannel,
                 inbound: EventChannel, name: str) -> None:
        self.ftype = ftype
        self.outbound = outbound
        self.inbound = inbound
        self.name = name
        self.client: Client | None = None
        self.loop = asyncio.get_running_loop()
        self._subscribed: dict[str, Profile] = {}
        self._seen: OrderedDict[tuple[str, int, float], None] = OrderedDict()
        self._watch: asyncio.Task[None] | None = None
        self._pending: set[asyncio.Future[int]] = set()
        self.published = 0
        self.received = 0
        tap_proxy, _ = outbound.default_consumer_admin.obtain_notification_push_supplier(
            STRUCTURED_EVENT)
        tap_proxy.connect_structured_push_consumer(_Tap(self))  # type: ignore[attr-defined]
        self._tap: Proxy = tap_proxy
        self._injector = self._find_injector(inbound)

    @staticmethod
    def _find_injector(inbound: EventChannel) -> Any:
        """The inbound channel's supplier proxy (restored after a restart, or new)."""
        admin = inbound.default_supplier_admin
        for proxy in admin.proxies():
            return proxy
        proxy, _ = admin.obtain_notification_push_consumer(STRUCTURED_EVENT)
        proxy.connect_structured_push_supplier(None)  # type: ignore[attr-defined]
        return proxy

    async def attach(self, client: Client, *, watch: float | None = None) -> None:
        """Work through ``client`` (a client of this member's broker; again after a
        reconnect): subscribe the current interest."""
        self.client = client
        self._subscribed = {}
        await self.refresh()
        if watch is not None and self._watch is None:
            self._watch = asyncio.ensure_future(self._watching(watch))

    async def _watching(self, every: float) -> None:
        while True:
            await asyncio.sleep(every)
            with contextlib.suppress(Exception):  # a lost broker: attach() starts again
                await self.refresh()

    def _nodes(self) -> list[tuple[str, Any, Any]]:
        out: list[tuple[str, Any, Any]] = []
        for aid in self.inbound.get_all_consumeradmins():
            admin = self.inbound.get_consumeradmin(aid)
            out.extend((admin.op, admin, proxy) for proxy in admin.proxies())
        return out

    def wanted(self) -> dict[str, Profile]:
        """The profiles the consumers of ``inbound`` need now."""
        nodes = self._nodes()
        if not nodes:
            return {}
        return interest(self.ftype, f"{self.name}.", nodes)

    async def refresh(self) -> None:
        """Subscribe what the consumers now need and unsubscribe what they no longer do
        (new profiles first, so an event in between is never missed)."""
        client = self.client
        if client is None:
            return
        want = self.wanted()
        new = [p for pid, p in want.items() if pid not in self._subscribed]
        gone = [pid for pid in self._subscribed if pid not in want]
        if new:
            await client.subscribe_many(new, self._on_notification)
        if gone:
            await client.unsubscribe(*gone)
        self._subscribed = dict(want)

    def publish_now(self, event: StructuredEvent) -> None:
        client = self.client
        if client is None:  # not attached: the event is lost (best effort)
            return
        self.published += 1
        task = asyncio.ensure_future(client.publish(self.ftype.event(event)))
        self._pending.add(task)  # tasks run in order: the events keep their order
        task.add_done_callback(self._pending.discard)

    def _on_notification(self, n: Notification) -> None:
        # a publisher that reconnects under its name numbers from 0 again: the
        # publication time tells its publications apart
        key = (n.src, n.seq, n.ts)
        if key in self._seen:
            return
        self._seen[key] = None
        if len(self._seen) > SEEN:
            self._seen.popitem(last=False)
        self.received += 1
        self._injector.push_structured_event(self.ftype.structured(n.event))

    async def close(self) -> None:
        """Stop watching and close the client (the channels stay with their owner)."""
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
            self._watch = None
        if self.client is not None:
            await self.client.close()
            self.client = None
        with contextlib.suppress(Exception):
            self._tap.disconnect()


__all__ = ["SEEN", "FederationMember"]
