"""Push ProxySuppliers: the channel pushes to the consumer. An in-process consumer
object is served by the channel's dispatcher thread (:mod:`siftbus.channel.dispatch`)
through :meth:`PushProxySupplier.next_push_batch` and :meth:`PushProxySupplier.deliver`;
a remote one (no client object) by the remote service's push hub."""

from __future__ import annotations

import time
from typing import Any

from siftbus.channel.proxy.base import SEQUENCE_EVENT, STRUCTURED_EVENT, AdminHooks
from siftbus.channel.proxy.supplier import ProxySupplier
from siftbus.channel.queue import QueueEntry
from siftbus.errors import Disconnected

MAX_PUSH_FAILURES = 3
"""A push consumer that raises this many times in a row is disconnected."""
THREAD_BATCH = 64
"""Events pushed to a structured or any consumer per turn of the dispatcher."""


class PushProxySupplier(ProxySupplier):
    """A ProxySupplier that pushes to its consumer."""

    mode = "push"

    def __init__(self, admin: AdminHooks, proxy_id: int, kind: str, qos: Any,
                 *, keyed: bool = True) -> None:
        super().__init__(admin, proxy_id, kind, qos, keyed=keyed)
        self._failures = 0
        self._last_flush = time.monotonic()

    def disconnect_push_supplier(self) -> None:
        """Disconnect (the consumer side); the proxy is destroyed."""
        self.disconnect()

    def disconnect_structured_push_supplier(self) -> None:
        self.disconnect()

    def disconnect_sequence_push_supplier(self) -> None:
        self.disconnect()

    # -- served by the dispatcher thread -------------------------------------------------

    @property
    def threaded(self) -> bool:
        """Pushed to by the dispatcher thread: the client is an object in this process."""
        return self.client is not None

    def next_push_batch(self, now: int, mono: float) -> tuple[list[QueueEntry], float | None,
                                                                bool]:
        """(Channel lock held.) The next batch for the in-process consumer; in how many
        seconds this proxy wants to be looked at again (None: no wish); and whether it
        stays on the dispatcher's ready list. A sequence proxy sends a full batch at
        once and a partial one when PacingInterval has passed since the last one."""
        if self._destroyed or not self.connected or self.client is None or self.suspended:
            return [], None, False
        if self.kind == SEQUENCE_EVENT:
            size, pacing = self.batch_policy()
            since = mono - self._last_flush
            if self.ready < size and since < pacing:
                return [], pacing - since, True
            batch = self.take(size, now)
            self._last_flush = mono
        else:
            batch = self.take(THREAD_BATCH, now)
        if self.ready:
            return batch, None, True
        if self.held:  # StartTime not reached: look again soon
            return batch, 0.01, True
        return batch, None, False

    def deliver(self, client: Any, batch: list[QueueEntry]) -> bool:
        """Push a batch to ``client`` (outside the lock); False if the consumer failed
        (then handled: see :meth:`_failed`)."""
        if self.kind == SEQUENCE_EVENT:
            try:
                client.push_structured_events([e.envelope.structured for e in batch])
            except Exception as exc:
                self._failed(batch, [], [], exc)
                return False
        else:
            structured = self.kind == STRUCTURED_EVENT
            for i, e in enumerate(batch):
                try:
                    if structured:
                        client.push_structured_event(e.envelope.structured)
                    else:
                        client.push(e.envelope.as_any)
                except Exception as exc:
                    self._failed([e], batch[:i], batch[i + 1:], exc)
                    return False
        return True

    def push_done(self, batch: list[QueueEntry]) -> None:
        """(Lock held.) A batch reached the consumer."""
        self._failures = 0
        self.delivered_entries(batch)

    def _failed(self, failed: list[QueueEntry], done: list[QueueEntry],
                untried: list[QueueEntry], exc: Exception) -> None:
        """A push raised: what was pushed before counts as delivered, the failed events
        are dropped (best effort) or kept (persistent), the untried ones go back; after
        MAX_PUSH_FAILURES failures in a row (or Disconnected) the proxy is destroyed."""
        ch = self.channel
        with ch.lock:
            if done:
                self.delivered_entries(done)
            for e in failed:
                if e.persistent and not self._destroyed:
                    self.requeue([e])
                else:
                    ch.entries_dropped(self, [e], expired=False)
            self.requeue(untried)
            if not self._destroyed and self.queue_length:
                ch.push_ready(self)
            self._failures += 1
            give_up = isinstance(exc, Disconnected) or self._failures >= MAX_PUSH_FAILURES
            if give_up and not self._destroyed:
                self.destroy_locked()
                ch.save()


class ProxyPushSupplier(PushProxySupplier):
    """Pushes Any events to a consumer with ``push(any)``."""

    def connect_any_push_consumer(self, consumer: Any) -> None:
        self._connect(consumer, ("push",))

    connect_push_consumer = connect_any_push_consumer


class StructuredProxyPushSupplier(PushProxySupplier):
    """Pushes structured events to a consumer with ``push_structured_event(event)``."""

    def connect_structured_push_consumer(self, consumer: Any) -> None:
        self._connect(consumer, ("push_structured_event",))


class SequenceProxyPushSupplier(PushProxySupplier):
    """Pushes batches (at most MaximumBatchSize; a partial batch after PacingInterval)
    to a consumer with ``push_structured_events(batch)``."""

    def connect_sequence_push_consumer(self, consumer: Any) -> None:
        self._connect(consumer, ("push_structured_events",))


__all__ = ["MAX_PUSH_FAILURES", "ProxyPushSupplier", "PushProxySupplier",
           "SequenceProxyPushSupplier", "StructuredProxyPushSupplier"]
