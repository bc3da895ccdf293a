"""Server-side push to remote push consumers (the client side is
:mod:`siftbus.channel.remote.push_consumer`).

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
from collections.abc import Callable
from typing import Any

from siftbus.channel.channel import EventChannel
from siftbus.channel.clock import timet_now
from siftbus.channel.factory import EventChannelFactory
from siftbus.channel.proxy import SEQUENCE_EVENT, ProxySupplier
from siftbus.channel.remote.protocol import FRAME_EVENTS
from siftbus.errors import AlreadyConnected, SiftbusError, WireError

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
                raise AlreadyConnected(f"push proxy {p.id} is attached to another "
                                       "connection")
            self._detach(key, destroy=False)
        with ch.lock:
            p.return_in_flight()  # a previous attachment's unacknowledged events go again
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
        with ch.lock:
            n = p.ack_remote(seq)
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
        p = ch.find_proxy("consumer", key[1])
        if not isinstance(p, ProxySupplier) or p.destroyed:
            return
        if destroy and not p.terms.persistent:
            p.disconnect()
        else:
            with ch.lock:
                p.return_in_flight()

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
        with ch.lock:
            for a in chan.values():
                p = a.proxy
                if p.destroyed or not p.connected:
                    gone.append(p.id)
                    continue
                if p.suspended:
                    continue
                room = a.window - p.in_flight
                if room <= 0 or not (p.ready or p.held):
                    continue
                if p.kind == SEQUENCE_EVENT:
                    size, pacing = p.batch_policy()
                    if p.ready < size and mono - a.last_flush < pacing:
                        wait = pacing - (mono - a.last_flush)
                        again = wait if again is None else min(again, wait)
                        continue
                    frames = []
                    while room > 0:
                        got = p.take_remote(min(size, room), now)
                        if not got:
                            break
                        room -= len(got)
                        frames.append([[e.seq, e.envelope.packed()] for e in got])
                        if p.ready < size and pacing > 0:
                            break  # the rest is a partial batch: it waits for pacing
                    if frames:
                        a.last_flush = mono
                        out.extend((a, f) for f in frames)
                    if p.ready and room > 0:
                        wait = pacing if p.ready < size else 0.0
                        again = wait if again is None else min(again, wait)
                else:
                    got = p.take_remote(min(room, FRAME_EVENTS), now)
                    if got:
                        out.append((a, [[e.seq, e.envelope.packed()] for e in got]))
                    if p.ready and room > len(got):
                        again = 0.0  # more than one frame's worth: go on next turn
                if p.held:  # StartTime not reached yet: look again soon
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


__all__ = ["SWEEP_INTERVAL", "PushHub"]
