"""Server-side push to remote push consumers, and the client that receives it.

A remote client obtains a push ProxySupplier (``obtain_push_consumer``) and attaches it to
its connection (``attach_push``); from then on the service sends the proxy's events to
that connection as they are dispatched, as unsolicited frames of the siftbus wire
protocol: REPLY ``{"service": "channel", "event": {"push": [channel, proxy, [[seq,
event bytes], ...]]}}`` (the same frame a broker-hosted service sends with
``BrokerServer.push``). A structured or Any proxy's frame carries whatever is ready (one
``push_structured_event`` per item on the client); a sequence proxy's frame is one batch
of at most MaximumBatchSize events, a partial batch going after PacingInterval.

Flow control: at most ``window`` events per proxy are in flight (sent, not acknowledged).
The client acknowledges with ``ack(channel, proxy, seq)``, ``seq`` being the last event
it has handled; the service then drops those events (from the SQLite store too, for
persistent ones) and sends more. Events beyond the window wait in the proxy's queue,
where MaxEventsPerConsumer and DiscardPolicy apply exactly as for in-process consumers:
a slow consumer is a full queue, not an unbounded socket buffer.

When the connection goes, its proxies with ConnectionReliability BestEffort are
disconnected (destroyed); Persistent ones keep their queue, put what was in flight back
into it, and wait for ``attach_push`` from a new connection (also after the service was
killed and restarted). The client drops sequence numbers it has already handled, so every
event reaches it exactly once per acknowledged delivery.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from siftbus.channel import qos as Q
from siftbus.channel.clock import timet_now
from siftbus.channel.core import SEQUENCE_EVENT, STRUCTURED_EVENT, ProxySupplier
from siftbus.errors import ConnectionLostError, SiftbusError, WireError

if TYPE_CHECKING:
    from siftbus.channel.core import EventChannel, EventChannelFactory

DEFAULT_WINDOW = 2048
"""Events in flight per proxy before the service waits for an acknowledgement."""
MAX_WINDOW = 100_000
FRAME_EVENTS = 512
"""Events per push frame at most (structured and Any proxies)."""
SWEEP_INTERVAL = 0.25
"""Seconds between checks that the connections owning push proxies are still there
(for hosts that cannot tell the service when a connection closes)."""

Send = Callable[[str, Any], bool]
Alive = Callable[[str], bool]


class _Attached:
    __slots__ = ("caller", "channel", "last_flush", "linger", "proxy", "window")

    def __init__(self, proxy: ProxySupplier, caller: str, window: int, linger: float) -> None:
        self.proxy = proxy
        self.channel = proxy.channel.id
        self.caller = caller
        self.window = window
        self.linger = linger
        self.last_flush = 0.0


class PushHub:
    """Sends the events of attached push proxies to their client connections (on the
    asyncio loop of the server that hosts the service)."""

    def __init__(self, factory: EventChannelFactory) -> None:
        self.factory = factory
        self._send: Send | None = None
        self._alive: Alive | None = None
        self._attached: dict[tuple[int, int], _Attached] = {}
        self._by_channel: dict[int, dict[int, _Attached]] = {}
        self._owned: dict[str, set[tuple[int, int]]] = {}  # caller -> proxies it obtained
        self._waiters: dict[int, Callable[[], None]] = {}
        self._scheduled: set[int] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._sweeper: asyncio.Task[None] | None = None
        self.frames_sent = 0

    def set_transport(self, send: Send, alive: Alive | None = None) -> None:
        """``send(caller, payload) -> bool`` (False: that connection is gone);
        ``alive(caller)`` lets a periodic sweep notice closed connections when the host
        does not call :meth:`connection_lost` itself."""
        self._send = send
        self._alive = alive

    # -- ownership and attachment (loop thread) ------------------------------------------

    def _bind_loop(self) -> None:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
            self._loop_thread = threading.get_ident()
            if self._alive is not None:
                self._sweeper = self._loop.create_task(self._sweep())

    def own(self, caller: str, ch: EventChannel, pid: int) -> None:
        """Record that ``caller``'s connection obtained proxy ``pid`` (it goes with it)."""
        if self._send is None:
            raise WireError("this host of the channel service cannot push to clients; "
                            "use pull (obtain_consumer)")
        self._bind_loop()
        self._owned.setdefault(caller, set()).add((ch.id, pid))

    def attach(self, caller: str, ch: EventChannel, p: ProxySupplier, window: int,
               linger: float) -> None:
        if self._send is None:
            raise WireError("this host of the channel service cannot push to clients")
        self._bind_loop()
        key = (ch.id, p.id)
        old = self._attached.get(key)
        if old is not None and old.caller != caller:
            if self._alive is not None and self._alive(old.caller):
                from siftbus.channel.errors import AlreadyConnected

                raise AlreadyConnected(f"push proxy {p.id} is attached to another "
                                       "connection")
            self._detach(key, destroy=False)
        with ch._lock:
            p._remote_requeue()  # a previous attachment's unacknowledged events go again
        a = _Attached(p, caller, window, linger)
        self._attached[key] = a
        self._by_channel.setdefault(ch.id, {})[p.id] = a
        self._owned.setdefault(caller, set()).add(key)
        if ch.id not in self._waiters:
            self._waiters[ch.id] = waiter = self._waiter(ch.id)
            ch.add_waiter(waiter)
        self._schedule(ch.id)

    def ack(self, caller: str, ch: EventChannel, p: ProxySupplier, seq: int) -> int:
        a = self._attached.get((ch.id, p.id))
        if a is None or a.caller != caller:
            return 0  # an acknowledgement from a connection the proxy has left
        with ch._lock:
            n = p._remote_ack(seq)
        if n:
            self._schedule(ch.id)
        return n

    def forget(self, channel: int, pid: int) -> None:
        """The proxy was disconnected by a call: its connection is told."""
        self._detach((channel, pid), destroy=False)

    def channel_destroyed(self, channel: int) -> None:
        for pid in list(self._by_channel.get(channel, {})):
            self._detach((channel, pid), destroy=False)

    def connection_lost(self, caller: str) -> None:
        """Disconnect the caller's BestEffort push proxies; detach its Persistent ones."""
        for key in sorted(self._owned.pop(caller, set())):
            a = self._attached.get(key)
            if a is not None and a.caller != caller:
                continue  # re-attached by another connection meanwhile
            self._detach(key, destroy=True, notice=False)

    def _detach(self, key: tuple[int, int], *, destroy: bool, notice: bool = True) -> None:
        a = self._attached.pop(key, None)
        chan = self._by_channel.get(key[0])
        if chan is not None:
            chan.pop(key[1], None)
            if not chan:
                del self._by_channel[key[0]]
                self._drop_waiter(key[0])
        if a is not None and notice and self._send is not None:
            self._send(a.caller, {"closed": [key[0], key[1]]})
        try:
            ch = self.factory.get_event_channel(key[0])
        except SiftbusError:
            return
        p = ch._supplier_proxies.get(key[1])
        if p is None or p.destroyed:
            return
        persistent = p._fast_qos()[4]
        with ch._lock:
            if destroy and not persistent:
                p._destroy_locked()
                ch._save()
            else:
                p._remote_requeue()

    def _drop_waiter(self, channel: int) -> None:
        fn = self._waiters.pop(channel, None)
        if fn is None:
            return
        with contextlib.suppress(SiftbusError):
            self.factory.get_event_channel(channel).remove_waiter(fn)

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(SWEEP_INTERVAL)
            alive = self._alive
            if alive is None:
                continue
            for caller in [c for c in self._owned if not alive(c)]:
                self.connection_lost(caller)

    def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
        for ch_id in list(self._waiters):
            self._drop_waiter(ch_id)

    # -- sending (loop thread) -----------------------------------------------------------

    def _waiter(self, channel: int) -> Callable[[], None]:
        def wake() -> None:
            # Called under the channel lock by whichever thread queued events.
            if threading.get_ident() == self._loop_thread:
                self._schedule(channel)
            elif self._loop is not None:
                self._loop.call_soon_threadsafe(self._schedule, channel)
        return wake

    def _schedule(self, channel: int, delay: float | None = None) -> None:
        if channel in self._scheduled or self._loop is None:
            return
        self._scheduled.add(channel)
        if delay is None:
            chan = self._by_channel.get(channel)
            delay = min((a.linger for a in chan.values()), default=0.0) if chan else 0.0
        if delay > 0:
            self._loop.call_later(delay, self._flush, channel)
        else:
            self._loop.call_soon(self._flush, channel)

    def _flush(self, channel: int) -> None:
        self._scheduled.discard(channel)
        chan = self._by_channel.get(channel)
        if not chan:
            return
        try:
            ch = self.factory.get_event_channel(channel)
        except SiftbusError:  # destroyed: tell the clients, forget the proxies
            for pid in list(chan):
                self._detach((channel, pid), destroy=False)
            return
        out: list[tuple[_Attached, list[list[Any]]]] = []
        gone: list[int] = []
        again: float | None = None
        now = timet_now()
        mono = time.monotonic()
        with ch._lock:
            for a in chan.values():
                p = a.proxy
                if p.destroyed or not p.connected:
                    gone.append(p.id)
                    continue
                if p.suspended:
                    continue
                room = a.window - len(p._inflight)
                if room <= 0 or not (p._heap or p._held):
                    continue
                if p.kind == SEQUENCE_EVENT:
                    size = max(1, p._qos.get(Q.MAXIMUM_BATCH_SIZE, 1))
                    pacing = p._qos.get(Q.PACING_INTERVAL, 0) / 1e7
                    if len(p._heap) < size and mono - a.last_flush < pacing:
                        wait = pacing - (mono - a.last_flush)
                        again = wait if again is None else min(again, wait)
                        continue
                    frames = []
                    while room > 0:
                        got = p._remote_take(min(size, room), now)
                        if not got:
                            break
                        room -= len(got)
                        frames.append([[e.seq, e.msg.packed()] for e in got])
                        if len(p._heap) < size and pacing > 0:
                            break  # the rest is a partial batch: it waits for pacing
                    if frames:
                        a.last_flush = mono
                        out.extend((a, f) for f in frames)
                    if p._heap and room > 0:
                        wait = pacing if len(p._heap) < size else 0.0
                        again = wait if again is None else min(again, wait)
                else:
                    got = p._remote_take(min(room, FRAME_EVENTS), now)
                    if got:
                        out.append((a, [[e.seq, e.msg.packed()] for e in got]))
                    if p._heap and room > len(got):
                        again = 0.0  # more than one frame's worth: go on next turn
                if p._held:  # StartTime not reached yet: look again soon
                    again = 0.01 if again is None else min(again, 0.01)
        send = self._send
        assert send is not None
        lost: set[str] = set()
        for a, items in out:
            if a.caller in lost:
                continue
            if send(a.caller, {"push": [channel, a.proxy.id, items]}):
                self.frames_sent += 1
            else:
                lost.add(a.caller)
        for pid in gone:
            self._detach((channel, pid), destroy=False)
        for caller in lost:
            self.connection_lost(caller)
        if again is not None:
            self._schedule(channel, again)


# ---------------------------------------------------------------------------------------
# Client side


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
                h._frame(got[2])
            return
        closed = payload.get("closed")
        if isinstance(closed, list) and len(closed) == 2:
            h = self.handlers.pop((closed[0], closed[1]), None)
            if h is not None:
                h._closed("the service disconnected the proxy")

    def lost(self) -> None:
        for h in list(self.handlers.values()):
            h._closed("the connection to the channel service was lost")
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
            consumer._seen = set(seen._seen)
            consumer.received = seen.received
            consumer.duplicates = seen.duplicates
            consumer.last_seq = seen.last_seq
        await consumer._attach()
        return consumer

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

    def _frame(self, items: list[Any]) -> None:
        self._frames.append(items)
        self._wake.set()

    def _closed(self, reason: str) -> None:
        if not self.close_reason:
            self.close_reason = reason
        self._wake.set()
        self.closed.set()

    async def _run(self) -> None:
        from siftbus.channel.service import event_of_wire

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
            self._closed(f"the callback failed: {exc!r}")

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
        self._closed("disconnected")
        self._stop_tasks()

    async def wait_closed(self) -> None:
        await self.closed.wait()

    async def add_filter(self, constraints: list[Any]) -> Any:
        return await self.client.call("add_filter", channel=self.channel,
                                      proxy=self.proxy, side="consumer",
                                      constraints=constraints)


__all__ = ["DEFAULT_WINDOW", "PushHub", "PushRouter", "RemotePushConsumer"]
