"""Pull ProxySuppliers: the consumer pulls (in process with ``pull``/``try_pull``, or
remotely through :meth:`~siftbus.channel.proxy.supplier.ProxySupplier.pull_acked`)."""

from __future__ import annotations

from typing import Any

from siftbus.channel.event import StructuredEvent
from siftbus.channel.proxy.base import ANY_EVENT, SEQUENCE_EVENT, STRUCTURED_EVENT
from siftbus.channel.proxy.supplier import ProxySupplier
from siftbus.errors import ClientTypeError


class PullProxySupplier(ProxySupplier):
    """A ProxySupplier whose consumer pulls."""

    mode = "pull"

    def connect_any_pull_consumer(self, consumer: Any = None) -> None:
        self._need(ANY_EVENT)
        self._connect(consumer, ())

    connect_pull_consumer = connect_any_pull_consumer

    def connect_structured_pull_consumer(self, consumer: Any = None) -> None:
        self._need(STRUCTURED_EVENT)
        self._connect(consumer, ())

    def connect_sequence_pull_consumer(self, consumer: Any = None) -> None:
        self._need(SEQUENCE_EVENT)
        self._connect(consumer, ())

    def _need(self, kind: str) -> None:
        if self.kind != kind:
            raise ClientTypeError(f"this proxy serves {self.kind} clients, not {kind}")

    def disconnect_pull_supplier(self) -> None:
        self.disconnect()

    def disconnect_structured_pull_supplier(self) -> None:
        self.disconnect()

    def disconnect_sequence_pull_supplier(self) -> None:
        self.disconnect()


class ProxyPullSupplier(PullProxySupplier):
    """Queues Any events for a consumer that calls ``pull``/``try_pull``."""

    def pull(self, timeout: float | None = None) -> Any:
        """Block until an event is there (``TimeoutError`` after ``timeout`` seconds)."""
        got = self._pull(1, True, timeout)
        if not got:
            raise TimeoutError("no event within the timeout")
        return got[0].envelope.as_any

    def try_pull(self) -> tuple[Any, bool]:
        """``(event, True)``, or ``(None, False)`` when the queue is empty."""
        got = self._pull(1, False, None)
        return (got[0].envelope.as_any, True) if got else (None, False)


class StructuredProxyPullSupplier(PullProxySupplier):
    """Queues structured events for a consumer that pulls."""

    def pull_structured_event(self, timeout: float | None = None) -> StructuredEvent:
        got = self._pull(1, True, timeout)
        if not got:
            raise TimeoutError("no event within the timeout")
        return got[0].envelope.structured

    def try_pull_structured_event(self) -> tuple[StructuredEvent | None, bool]:
        got = self._pull(1, False, None)
        return (got[0].envelope.structured, True) if got else (None, False)


class SequenceProxyPullSupplier(PullProxySupplier):
    """Queues structured events for a consumer that pulls batches."""

    def pull_structured_events(self, max_number: int,
                               timeout: float | None = None) -> list[StructuredEvent]:
        """Block until at least one event is there; returns up to ``max_number``."""
        got = self._pull(max(1, max_number), True, timeout)
        if not got:
            raise TimeoutError("no event within the timeout")
        return [e.envelope.structured for e in got]

    def try_pull_structured_events(self, max_number: int) -> tuple[list[StructuredEvent], bool]:
        got = self._pull(max(1, max_number), False, None)
        return [e.envelope.structured for e in got], bool(got)


__all__ = ["ProxyPullSupplier", "PullProxySupplier", "SequenceProxyPullSupplier",
           "StructuredProxyPullSupplier"]
