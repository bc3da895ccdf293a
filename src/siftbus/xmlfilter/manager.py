"""The subscription lifecycle (WS-Notification's subscription manager): expiry, renew,
pause, resume and status.

``timeoutInSeconds`` makes a subscription expire that many seconds after it was made or
last renewed; an expired subscription is removed as if unsubscribed, at the latest before
the next event is matched. *Renew* starts the time again (with a new number of seconds,
or the subscription's own). *Pause* takes a subscription out of matching and keeps it
(its id, its place against duplicates and its expiry, which keeps running); *resume*
puts it back. Status tells the state and the seconds left.
"""

from __future__ import annotations

import heapq
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from siftbus.errors import SubscriptionError, UnknownSubscriptionError
from siftbus.xmlfilter.limits import quoted
from siftbus.xmlfilter.subscription import MAX_TIMEOUT, Receiver, Subscription

State = Literal["active", "paused"]


@dataclass(frozen=True, slots=True)
class SubscriptionStatus:
    """A subscription's state (WS-Notification's GetStatus)."""

    id: str
    state: State
    receiver: Receiver
    timeout_seconds: int | None
    """The seconds a renewal lasts (None: the subscription does not expire)."""
    expires_in: float | None
    """Seconds until it expires (None: never)."""


def check_timeout(seconds: int) -> int:
    if not 0 < seconds <= MAX_TIMEOUT:
        raise SubscriptionError(f"a timeout is 1 to {MAX_TIMEOUT:,} seconds, got {seconds}",
                                field="timeoutInSeconds")
    return seconds


class Lifecycle:
    """Deadlines and paused subscriptions (the active ones live in the matcher).

    ``next_deadline`` is the earliest deadline (``inf`` when none), so that a caller can
    test for expiry with one comparison per event.
    """

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._deadline: dict[str, float] = {}
        self._timeout: dict[str, int] = {}
        self._heap: list[tuple[float, str]] = []
        self.paused: dict[str, Subscription] = {}
        self.paused_digests: dict[str, str] = {}
        self.next_deadline = math.inf

    def added(self, sub: Subscription) -> None:
        if sub.timeout_seconds is not None:
            self._set(sub.id, sub.timeout_seconds)

    def _set(self, sid: str, seconds: int) -> None:
        with self._lock:
            deadline = self.clock() + seconds
            self._deadline[sid] = deadline
            self._timeout[sid] = seconds
            heapq.heappush(self._heap, (deadline, sid))
            self.next_deadline = self._heap[0][0]

    def forget(self, sid: str) -> None:
        """The subscription is gone (unsubscribed or expired)."""
        with self._lock:
            self._deadline.pop(sid, None)
            self._timeout.pop(sid, None)
            sub = self.paused.pop(sid, None)
            if sub is not None:
                del self.paused_digests[sub.digest]

    def renew(self, sid: str, seconds: int | None, default: int | None) -> None:
        """Start the time again: ``seconds``, else the last timeout, else the
        subscription's own; without any, it stays without expiry."""
        secs = seconds if seconds is not None else self._timeout.get(sid, default)
        if secs is not None:
            self._set(sid, check_timeout(secs))

    def pause(self, sub: Subscription) -> None:
        with self._lock:
            self.paused[sub.id] = sub
            self.paused_digests[sub.digest] = sub.id

    def resume(self, sid: str) -> Subscription:
        with self._lock:
            sub = self.paused.pop(sid, None)
            if sub is None:
                raise UnknownSubscriptionError(f"no paused subscription {quoted(sid)}")
            del self.paused_digests[sub.digest]
            return sub

    def due(self) -> list[str]:
        """The subscriptions whose deadline has passed (their deadlines are dropped)."""
        now = self.clock()
        out: list[str] = []
        with self._lock:
            heap = self._heap
            while heap and heap[0][0] <= now:
                deadline, sid = heapq.heappop(heap)
                if self._deadline.get(sid) == deadline:  # not renewed since
                    del self._deadline[sid]
                    self._timeout.pop(sid, None)
                    out.append(sid)
            self.next_deadline = heap[0][0] if heap else math.inf
        return out

    def status(self, sub: Subscription, state: State) -> SubscriptionStatus:
        deadline = self._deadline.get(sub.id)
        left = None if deadline is None else max(0.0, deadline - self.clock())
        return SubscriptionStatus(sub.id, state, sub.receiver,
                                  self._timeout.get(sub.id, sub.timeout_seconds), left)
