"""A subscription of the asyncio client: one profile, an async iterator of its
notifications, with a bounded queue and a count of what it dropped.

A :class:`Subscription` knows its client only through the small public surface of
:class:`SubscriptionOwner` (the subscriptions it holds, how it runs callbacks, whether
its connection has ended, and ``unsubscribe``), so it can be read and tested alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Protocol, TypeVar

from siftbus.errors import SiftbusError, TimedOut
from siftbus.model import Profile

from .notifications import Notification, NotificationBatch

Callback = Callable[[Notification], Any]
"""Called with each notification (a coroutine function's coroutines run as tasks)."""
BatchCallback = Callable[[NotificationBatch], Any]
"""Called once per NOTIFY frame with that frame's notifications for its profiles."""


class SubscriptionOwner(Protocol):
    """What a :class:`Subscription` needs of its client."""

    @property
    def subscriptions(self) -> Mapping[str, Subscription]: ...

    @property
    def ended(self) -> asyncio.Event:
        """Set when the connection is closed or lost: no notification comes any more."""
        ...

    @property
    def end_error(self) -> SiftbusError:
        """Why no notification comes any more (after :attr:`ended` is set)."""
        ...

    def run_callback(self, fn: Callable[[Any], Any], arg: Any) -> None: ...

    async def unsubscribe(self, *ids: str | Subscription) -> None: ...


T = TypeVar("T")


async def next_notification(queue: asyncio.Queue[T], ended: asyncio.Event) -> T:
    """The next notification of ``queue``; ``StopAsyncIteration`` once ``ended`` is set
    and the queue is empty (what was received before the end is still handed out)."""
    if not queue.empty():
        return queue.get_nowait()
    if ended.is_set():
        raise StopAsyncIteration
    getter = asyncio.ensure_future(queue.get())
    stopper = asyncio.ensure_future(ended.wait())
    try:
        done, _ = await asyncio.wait({getter, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if getter in done:
            return getter.result()
        raise StopAsyncIteration
    finally:
        getter.cancel()
        stopper.cancel()


class Subscription:
    """One profile of a client: an async iterator of its notifications.

    The queue is bounded; when it is full new notifications are dropped and counted in
    :attr:`dropped` (a slow consumer is visible, not silent). With a callback, the
    notifications go to the callback instead of the queue. With a batch callback they
    reach it as part of a :class:`NotificationBatch` per frame (shared by every
    subscription with the same batch callback), and neither queue nor callback is used.
    """

    def __init__(self, client: SubscriptionOwner, profile: Profile,
                 callback: Callback | None, maxsize: int,
                 batch_callback: BatchCallback | None = None) -> None:
        if callback is not None and batch_callback is not None:
            raise ValueError("give a callback or a batch_callback, not both")
        self.client = client
        self.profile = profile
        self.callback = callback
        self.batch_callback = batch_callback
        self.queue: asyncio.Queue[Notification] = asyncio.Queue(maxsize)
        self.dropped = 0
        """Notifications lost because the queue was full."""
        self.received = 0
        """Notifications delivered for this profile (queued, called back or batched)."""

    @property
    def id(self) -> str:
        return self.profile.id

    def deliver(self, n: Notification) -> None:
        """Hand over one notification: to the callback, else to the queue (dropped and
        counted when it is full)."""
        self.received += 1
        if self.callback is not None:
            self.client.run_callback(self.callback, n)
            return
        try:
            self.queue.put_nowait(n)
        except asyncio.QueueFull:
            self.dropped += 1

    def __aiter__(self) -> AsyncIterator[Notification]:
        return self

    async def __anext__(self) -> Notification:
        return await next_notification(self.queue, self.client.ended)

    async def get(self, timeout: float | None = None) -> Notification:
        """The next notification; :class:`~siftbus.errors.TimedOut` after ``timeout``
        seconds, :class:`~siftbus.errors.ConnectionLostError` once the client has ended
        (closed, or its broker lost for good; a reconnection is waited out)."""
        try:
            return await asyncio.wait_for(next_notification(self.queue, self.client.ended),
                                          timeout)
        except StopAsyncIteration:
            raise self.client.end_error from None
        except TimeoutError:
            raise TimedOut(f"no notification for {self.id!r} within {timeout} s") from None

    async def unsubscribe(self) -> None:
        await self.client.unsubscribe(self.id)

    async def __aenter__(self) -> Subscription:
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.id in self.client.subscriptions:
            await self.unsubscribe()


__all__ = ["BatchCallback", "Callback", "Subscription", "SubscriptionOwner",
           "next_notification"]
