"""ProxyConsumers: they serve suppliers. Events handed to a push ProxyConsumer (or polled
from a pull supplier by the channel's dispatcher) enter the channel."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from siftbus.channel import qos as Q
from siftbus.channel.envelope import Envelope
from siftbus.channel.event import StructuredEvent
from siftbus.channel.event_types import EventType, type_list
from siftbus.channel.proxy.base import ALL_NOW_UPDATES_OFF, Proxy
from siftbus.errors import ClientTypeError, Disconnected
from siftbus.lang.etcl import is_structured


class ProxyConsumer(Proxy):
    """Serves one supplier: events it receives enter the channel."""

    level = "proxy_consumer"
    side = "supplier"

    def offer_change(self, added: Iterable[Any], removed: Iterable[Any]) -> None:
        self._alive()
        with self.channel.lock:
            self.channel.types_offered(type_list(added), type_list(removed))

    def obtain_subscription_types(self, mode: str = ALL_NOW_UPDATES_OFF) -> list[EventType]:
        """The event types consumers want; with ``*_UPDATES_ON`` the connected supplier's
        ``subscription_change`` is called on every later change."""
        return self._obtain_types(mode, self.channel.subscribed_types)

    def validate_event_qos(self, required: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
        Q.validate_qos(required, "event", persistent_ok=self.channel.persistent_ok)
        return Q.qos_ranges("event")

    def submit(self, envelopes: list[Envelope]) -> None:
        """Hand events to the channel (what every push does); raises Disconnected when
        the proxy is not connected, ImplLimit when the channel refuses them."""
        if not self.connected or self._destroyed:
            self._alive()
            raise Disconnected(f"{type(self).__name__} {self.id} is not connected")
        self.channel.accept(self, envelopes)


class PushProxyConsumer(ProxyConsumer):
    """A ProxyConsumer whose supplier pushes."""

    mode = "push"

    def disconnect_push_consumer(self) -> None:
        self.disconnect()

    def disconnect_structured_push_consumer(self) -> None:
        self.disconnect()

    def disconnect_sequence_push_consumer(self) -> None:
        self.disconnect()


class ProxyPushConsumer(PushProxyConsumer):
    """Receives Any events from a supplier calling ``push``."""

    def connect_any_push_supplier(self, supplier: Any = None) -> None:
        self._connect(supplier, ())

    connect_push_supplier = connect_any_push_supplier

    def push(self, data: Any) -> None:
        self.submit([Envelope.of_any(data)])


class StructuredProxyPushConsumer(PushProxyConsumer):
    """Receives structured events."""

    def connect_structured_push_supplier(self, supplier: Any = None) -> None:
        self._connect(supplier, ())

    def push_structured_event(self, event: StructuredEvent) -> None:
        if not is_structured(event):
            raise ClientTypeError("push_structured_event needs a StructuredEvent")
        self.submit([Envelope(event, False)])


class SequenceProxyPushConsumer(PushProxyConsumer):
    """Receives batches; each element is handled as one structured event."""

    def connect_sequence_push_supplier(self, supplier: Any = None) -> None:
        self._connect(supplier, ())

    def push_structured_events(self, events: Sequence[StructuredEvent]) -> None:
        envelopes = []
        for e in events:
            if not is_structured(e):
                raise ClientTypeError("push_structured_events needs StructuredEvents")
            envelopes.append(Envelope(e, False))
        self.submit(envelopes)


class PullProxyConsumer(ProxyConsumer, ABC):
    """The channel polls the connected pull supplier (``try_pull``-style) from its
    dispatcher thread: :meth:`poll` asks once, outside the channel lock."""

    mode = "pull"

    @property
    def polled(self) -> bool:
        """Polled by the dispatcher: the supplier is an object in this process."""
        return self.client is not None

    def disconnect_pull_consumer(self) -> None:
        self.disconnect()

    def disconnect_structured_pull_consumer(self) -> None:
        self.disconnect()

    def disconnect_sequence_pull_consumer(self) -> None:
        self.disconnect()

    @abstractmethod
    def poll(self) -> list[Envelope]:
        """Ask the supplier once; the events it had (none: empty)."""


class ProxyPullConsumer(PullProxyConsumer):
    def connect_any_pull_supplier(self, supplier: Any) -> None:
        self._connect(supplier, ("try_pull",))

    connect_pull_supplier = connect_any_pull_supplier

    def poll(self) -> list[Envelope]:
        value, has = self.client.try_pull()
        return [Envelope.of_any(value)] if has else []


class StructuredProxyPullConsumer(PullProxyConsumer):
    def connect_structured_pull_supplier(self, supplier: Any) -> None:
        self._connect(supplier, ("try_pull_structured_event",))

    def poll(self) -> list[Envelope]:
        value, has = self.client.try_pull_structured_event()
        return [Envelope.of_structured(value)] if has else []


class SequenceProxyPullConsumer(PullProxyConsumer):
    def connect_sequence_pull_supplier(self, supplier: Any) -> None:
        self._connect(supplier, ("try_pull_structured_events",))

    def poll(self) -> list[Envelope]:
        batch, has = self.client.try_pull_structured_events(
            self._qos.get(Q.MAXIMUM_BATCH_SIZE, 1) or 1)
        return [Envelope.of_structured(v) for v in batch] if has else []


__all__ = ["ProxyConsumer", "ProxyPullConsumer", "ProxyPushConsumer", "PullProxyConsumer",
           "PushProxyConsumer", "SequenceProxyPullConsumer", "SequenceProxyPushConsumer",
           "StructuredProxyPullConsumer", "StructuredProxyPushConsumer"]
