"""The dispatcher of a channel: one thread that pushes to in-process push consumers
(calls made outside the channel lock, so a slow consumer holds up no supplier), flushes
sequence batches by MaximumBatchSize/PacingInterval, and polls pull suppliers.

The thread starts with the first client that needs it; proxies report that they have
events (:meth:`Dispatcher.ready`) or a supplier to poll (:meth:`Dispatcher.add_poller`).
"""

from __future__ import annotations

import threading
import time
from typing import Any, Protocol

from siftbus.channel.clock import timet_now
from siftbus.channel.envelope import Envelope
from siftbus.channel.queue import QueueEntry

POLL_INTERVAL = 0.005
"""Seconds between two polls of a pull supplier that had nothing."""
IDLE_WAIT = 0.05
"""Longest sleep of the thread between two looks at its work."""


class PushTarget(Protocol):
    """A push ProxySupplier with an in-process consumer
    (:class:`~siftbus.channel.proxy.PushProxySupplier`)."""

    id: int
    client: Any

    def next_push_batch(self, now: int, mono: float
                        ) -> tuple[list[QueueEntry], float | None, bool]: ...

    def deliver(self, client: Any, batch: list[QueueEntry]) -> bool: ...

    def push_done(self, batch: list[QueueEntry]) -> None: ...


class PollTarget(Protocol):
    """A pull ProxyConsumer with an in-process supplier
    (:class:`~siftbus.channel.proxy.PullProxyConsumer`)."""

    id: int
    connected: bool
    suspended: bool

    def poll(self) -> list[Envelope]: ...

    def submit(self, envelopes: list[Envelope]) -> None: ...


class Dispatcher:
    """Serves one channel's in-process push consumers and pull suppliers from a thread;
    ``lock``/``cond`` are the channel's."""

    def __init__(self, name: str, lock: threading.RLock, cond: threading.Condition,
                 enabled: bool = True) -> None:
        self._name = name
        self._lock = lock
        self._cond = cond
        self._enabled = enabled
        self._ready: dict[int, PushTarget] = {}
        self._pollers: dict[int, PollTarget] = {}
        self._thread: threading.Thread | None = None
        self._stop = False

    # -- what the channel reports (lock held) --------------------------------------------

    def ready(self, p: PushTarget) -> None:
        """``p`` has events for its consumer."""
        self._ready[p.id] = p

    def add_poller(self, p: PollTarget) -> None:
        self._pollers[p.id] = p
        self.start()

    def remove(self, proxy_id: int) -> None:
        """The proxy went: neither pushed to nor polled any more."""
        self._ready.pop(proxy_id, None)
        self._pollers.pop(proxy_id, None)

    # -- the thread ----------------------------------------------------------------------

    def start(self) -> None:
        """Start the thread unless it runs (or dispatching is off for this factory)."""
        if self._thread is None and self._enabled and not self._stop:
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop = True
        with self._lock:
            self._cond.notify_all()
        t = self._thread
        if t is not None and threading.current_thread() is not t:
            t.join(timeout=5)
        self._thread = None

    def _run(self) -> None:
        next_poll: dict[int, float] = {}
        while not self._stop:
            work: list[tuple[PushTarget, Any, list[QueueEntry]]] = []
            polls: list[PollTarget] = []
            with self._lock:
                now = timet_now()
                mono = time.monotonic()
                wait = IDLE_WAIT
                for pid, p in list(self._ready.items()):
                    client = p.client
                    batch, again, still = p.next_push_batch(now, mono)
                    if batch:
                        work.append((p, client, batch))
                    if again is not None:
                        wait = min(wait, again)
                    if not still:
                        self._ready.pop(pid, None)
                for pid, poller in list(self._pollers.items()):
                    if poller.suspended or not poller.connected:
                        continue
                    if next_poll.get(pid, 0.0) <= mono:
                        polls.append(poller)
                    else:
                        wait = min(wait, next_poll[pid] - mono)
                if not work and not polls:
                    self._cond.wait(max(0.0, wait))
                    continue
            done = [(p, batch) for p, client, batch in work if p.deliver(client, batch)]
            if done:
                with self._lock:  # one lock round trip for every successful delivery
                    for p, batch in done:
                        p.push_done(batch)
            for poller in polls:
                try:
                    got = poller.poll()
                except Exception:  # a failing supplier must not stop the channel
                    got = []
                next_poll[poller.id] = time.monotonic() + (0.0 if got else POLL_INTERVAL)
                if got:
                    try:
                        poller.submit(got)
                    except Exception:  # rejected (ImplLimit) or destroyed meanwhile
                        continue


__all__ = ["POLL_INTERVAL", "Dispatcher", "PollTarget", "PushTarget"]
