"""The client side of server-side push: :class:`RemotePushConsumer` receives the events
the channel service pushes to its connection (see :mod:`siftbus.channel.remote.hub`),
calls back per event (per batch for sequence proxies), deduplicates what came again and
acknowledges what it handled, so each event is handled exactly once per acknowledged
delivery, in order."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from siftbus.channel.envelope import Envelope
from siftbus.channel.proxy import SEQUENCE_EVENT, STRUCTURED_EVENT
from siftbus.channel.remote.protocol import DEFAULT_WINDOW
from siftbus.errors import ConnectionLostError, SiftbusError


def event_of_wire(data: Mapping[str, Any] | bytes) -> Any:
    """A received event (wire map, or its msgpack bytes): a StructuredEvent or the any."""
    if isinstance(data, bytes | bytearray | memoryview):
        env = Envelope.from_packed(bytes(data))
    else:
        env = Envelope.from_wire(data)
    return env.as_any if env.is_any else env.structured


class PushRouter:
    """Routes push frames of one client connection to its :class:`RemotePushConsumer`s."""

    def __init__(self) -> None:
        self.handlers: dict[tuple[int, int], RemotePushConsumer] = {}

    def dispatch(self, payload: Any) -> None:
        if not isinstance(payload, dict):
            return
        got = payload.get("push")
        if isinstance(got, list) and len(got) == 3:
            h = self.handlers.get((got[0], got[1]))
            if h is not None and isinstance(got[2], list):
                h.handle_frame(got[2])
            return
        closed = payload.get("closed")
        if isinstance(closed, list) and len(closed) == 2:
            h = self.handlers.pop((closed[0], closed[1]), None)
            if h is not None:
                h.connection_closed("the service disconnected the proxy")

    def lost(self) -> None:
        for h in list(self.handlers.values()):
            h.connection_closed("the connection to the channel service was lost")
        self.handlers.clear()


class RemotePushConsumer:
    """A remote push consumer: the service pushes, ``callback`` is called per event (per
    batch, a list, for SEQUENCE_EVENT proxies), in order, exactly once per acknowledged
    delivery. The callback may be a coroutine function; events are handled one after the
    other and acknowledged once handled.

    ``raw=True`` hands the callback each event's msgpack bytes (the wire map) instead of
    decoding it (for consumers that forward events or decode lazily)."""

    def __init__(self, client: Any, channel: int, proxy: int,
                 callback: Callable[[Any], Awaitable[None] | None], *,
                 kind: str = STRUCTURED_EVENT, raw: bool = False,
                 window: int = DEFAULT_WINDOW, linger: float = 0.0,
                 ack_delay: float = 0.1) -> None:
        self.client = client
        self.channel = channel
        self.proxy = proxy
        self.callback = callback
        self.kind = kind
        self.raw = raw
        self.window = window
        self.linger = linger
        self.ack_delay = ack_delay
        self.received = 0
        self.duplicates = 0
        self.last_seq = 0
        self.acks_sent = 0
        self.error: BaseException | None = None
        self.closed = asyncio.Event()
        self.close_reason = ""
        self._seen: set[int] = set()
        self._order: deque[int] = deque()  # seqs received in this attachment, in order
        self._unacked = 0
        self._frames: deque[list[Any]] = deque()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._ack_task: asyncio.Task[None] | None = None
        self._ack_timer: asyncio.TimerHandle | None = None
        self._ack_again = False

    @classmethod
    async def obtain(cls, client: Any, channel: int,
                     callback: Callable[[Any], Awaitable[None] | None], *, admin: int = 0,
                     kind: str = STRUCTURED_EVENT, qos: dict[str, Any] | None = None,
                     constraints: list[Any] | None = None,
                     **options: Any) -> RemotePushConsumer:
        """Obtain a push ProxySupplier and start receiving; ``constraints`` (as for
        ``add_filter``) become the proxy's filter before the first event is sent."""
        pid = await client.call("obtain_push_consumer", channel=channel, admin=admin,
                                kind=kind, qos=dict(qos or {}))
        consumer = cls(client, channel, pid, callback, kind=kind, **options)
        if constraints is not None:
            await consumer.add_filter(constraints)
        await consumer._attach()
        return consumer

    @classmethod
    async def attach(cls, client: Any, channel: int, proxy: int,
                     callback: Callable[[Any], Awaitable[None] | None], *,
                     seen: RemotePushConsumer | None = None,
                     **options: Any) -> RemotePushConsumer:
        """Attach an existing push proxy to ``client``'s connection (after a reconnect or
        a service restart); ``seen`` = the previous consumer object, whose handled
        sequence numbers are not handled again."""
        if seen is not None:
            options.setdefault("kind", seen.kind)
            options.setdefault("raw", seen.raw)
        consumer = cls(client, channel, proxy, callback, **options)
        if seen is not None:
            consumer.carry_over(seen)
        await consumer._attach()
        return consumer

    def handled(self) -> frozenset[int]:
        """Sequence numbers handled and not yet known to be acknowledged (they may come
        again; a consumer that takes over drops them)."""
        return frozenset(self._seen)

    def carry_over(self, previous: RemotePushConsumer) -> None:
        """Continue where ``previous`` (of an earlier connection) stopped: what it handled
        is not handled again, and its counters go on."""
        self._seen = set(previous.handled())
        self.received = previous.received
        self.duplicates = previous.duplicates
        self.last_seq = previous.last_seq

    async def _attach(self) -> None:
        router: PushRouter = self.client.push_router()
        router.handlers[(self.channel, self.proxy)] = self
        self._task = asyncio.ensure_future(self._run())
        try:
            await self.client.call("attach_push", channel=self.channel, proxy=self.proxy,
                                   window=self.window, linger=self.linger)
        except BaseException:
            router.handlers.pop((self.channel, self.proxy), None)
            self._stop_tasks()
            raise

    # -- receiving -----------------------------------------------------------------------

    def handle_frame(self, items: list[Any]) -> None:
        """A push frame for this consumer arrived (``[[seq, event], ...]``)."""
        self._frames.append(items)
        self._wake.set()

    def connection_closed(self, reason: str) -> None:
        """The proxy or the connection is gone: no more frames will come."""
        if not self.close_reason:
            self.close_reason = reason
        self._wake.set()
        self.closed.set()

    async def _run(self) -> None:
        sequence = self.kind == SEQUENCE_EVENT
        try:
            while True:
                if not self._frames:
                    if self.closed.is_set():
                        return
                    self._wake.clear()
                    await self._wake.wait()
                    continue
                items = self._frames.popleft()
                batch = []
                seen, order = self._seen, self._order
                for seq, data in items:
                    order.append(seq)
                    if seq in seen:
                        self.duplicates += 1
                        continue
                    seen.add(seq)
                    batch.append(data if self.raw else event_of_wire(data))
                if sequence:
                    if batch:
                        r = self.callback(batch)
                        if asyncio.iscoroutine(r):
                            await r
                else:
                    for e in batch:
                        r = self.callback(e)
                        if asyncio.iscoroutine(r):
                            await r
                self.received += len(batch)
                if items:
                    self.last_seq = items[-1][0]
                    self._unacked += len(items)
                    self._want_ack()
        except Exception as exc:  # a failing callback ends this consumer, visibly
            self.error = exc
            self.connection_closed(f"the callback failed: {exc!r}")

    # -- acknowledging -------------------------------------------------------------------

    def _want_ack(self) -> None:
        if self._unacked >= max(1, self.window // 2):
            self._ack_now()
        elif self._ack_timer is None:
            self._ack_timer = asyncio.get_running_loop().call_later(self.ack_delay,
                                                                    self._ack_now)

    def _ack_now(self) -> None:
        if self._ack_timer is not None:
            self._ack_timer.cancel()
            self._ack_timer = None
        if self._ack_task is not None:
            self._ack_again = True
            return
        if not self._unacked or self.closed.is_set():
            return
        self._ack_task = asyncio.ensure_future(self._ack(self.last_seq))

    async def _ack(self, seq: int) -> None:
        self._unacked = 0
        try:
            n = await self.client.call("ack", channel=self.channel, proxy=self.proxy, seq=seq)
            self.acks_sent += 1
            if n:  # acknowledged: those numbers will never come again, forget them
                order, seen = self._order, self._seen
                while order:
                    s = order.popleft()
                    seen.discard(s)
                    if s == seq:
                        break
        except (SiftbusError, ConnectionError):
            self._unacked += 1  # acknowledge again with the next frame
        finally:
            self._ack_task = None
        if self._ack_again:
            self._ack_again = False
            if self._unacked:
                self._ack_now()

    async def flush_acks(self, timeout: float = 5.0) -> None:
        """Acknowledge everything handled so far and wait for the service's answer."""
        end = time.monotonic() + timeout
        while time.monotonic() < end and not self.closed.is_set():
            if self._ack_task is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(asyncio.shield(self._ack_task), end - time.monotonic())
                continue
            if not self._unacked:
                return
            self._ack_now()

    # -- ending --------------------------------------------------------------------------

    def _stop_tasks(self) -> None:
        if self._ack_timer is not None:
            self._ack_timer.cancel()
            self._ack_timer = None
        for t in (self._task, self._ack_task):
            if t is not None and not t.done():
                t.cancel()

    async def disconnect(self) -> None:
        """Disconnect the proxy (it is destroyed on the service)."""
        self.close_reason = self.close_reason or "disconnected"
        with contextlib.suppress(ConnectionLostError):
            await self.flush_acks()
            await self.client.call("disconnect", channel=self.channel, proxy=self.proxy,
                                   side="consumer")
        self.client.push_router().handlers.pop((self.channel, self.proxy), None)
        self.connection_closed("disconnected")
        self._stop_tasks()

    async def wait_closed(self) -> None:
        await self.closed.wait()

    async def add_filter(self, constraints: list[Any]) -> Any:
        return await self.client.call("add_filter", channel=self.channel,
                                      proxy=self.proxy, side="consumer",
                                      constraints=constraints)


__all__ = ["PushRouter", "RemotePushConsumer", "event_of_wire"]
