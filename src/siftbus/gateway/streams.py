"""A streaming consumer of the gateway: its subscriptions and its bounded outbox.

A WebSocket connection, a Server-Sent-Events response and a REST pull subscription are
each one :class:`Outbox`: the gateway hands it the notifications of each broker frame at
once with :meth:`Outbox.offer`, which never waits -- what does not fit in
``queue_size`` notifications is dropped and counted, like the broker's own slow
clients. A writer task per connection empties it toward the socket at the client's
pace, as many notifications per message as are waiting, so a slow or stalled client
costs its own queue and nothing else.
"""

from __future__ import annotations

import asyncio
import re
from collections import deque
from typing import Any

from siftbus.client import Client, Notification
from siftbus.errors import ProfileError

from .codec import dumps_bytes

_ID = re.compile(r"[\w.\-]{1,64}")


def check_subscription_id(sid: Any) -> str:
    """A client-chosen subscription id: 1 to 64 letters, digits, ``_``, ``.``, ``-``."""
    if not isinstance(sid, str) or not _ID.fullmatch(sid):
        raise ProfileError("a subscription id is 1 to 64 letters, digits, '_', '.' or '-'",
                           field="id")
    return sid


def notification_object(sid: str, src: str, seq: int, ts: Any, event: dict[str, Any],
                        number: int | None = None) -> dict[str, Any]:
    """The JSON object of one notification (WebSocket, SSE and pull alike), from its
    parts; ``number``: its session number ``n`` (a session socket only)."""
    msg = {"type": "notification", "subscription": sid, "src": src, "seq": seq, "ts": ts,
           "event": event}
    if number is not None:
        msg["n"] = number
    return msg


def notification_message(sid: str, n: Notification, number: int | None = None
                         ) -> dict[str, Any]:
    """:func:`notification_object` of a client's notification."""
    return notification_object(sid, n.src, n.seq, n.ts, n.event.to_json_dict(), number)


class Outbox:
    """Bounded notifications toward one consumer, with counts of what was queued and
    dropped. Notifications arrive a frame at a time (:meth:`offer`) and leave as many as
    the consumer takes at once (:meth:`take`): no task switch per notification."""

    def __init__(self, key: str, queue_size: int, client: Client) -> None:
        self.key = key
        """Unique among the gateway's consumers (prefix of its profiles' broker ids)."""
        self.client = client
        """The broker connection its profiles are subscribed through."""
        self.queue_size = queue_size
        self.pending: deque[dict[str, Any]] = deque()
        self.ready = asyncio.Event()
        """Set while notifications wait."""
        self.subscriptions: dict[str, str] = {}
        """Client-chosen id -> profile line (as the broker resolved it)."""
        self.session: str | None = None
        """The broker session of a session socket (its own broker connection)."""
        self.taken_over = False
        """A newer socket attached to the same session (this one is to be closed)."""
        self.lost = False
        """Its broker connection ended: its subscriptions are gone (to be told)."""
        self.token: str | None = None
        """The credentials it was opened with (a pull subscription's owner)."""
        self.delivered = 0
        self.dropped = 0
        self._reported = 0

    def broker_id(self, sid: str) -> str:
        """The id of subscription ``sid`` at the broker (a session's connection is the
        socket's own: its ids are the client's, stable across reconnects)."""
        return sid if self.session is not None else f"{self.key}/{sid}"

    @property
    def queued(self) -> int:
        return len(self.pending)

    def offer(self, msgs: list[dict[str, Any]]) -> int:
        """Queue what fits of ``msgs`` (in order); the rest is dropped and counted.
        Returns how many were queued."""
        room = self.queue_size - len(self.pending)
        if room < len(msgs):
            self.dropped += len(msgs) - max(room, 0)
            msgs = msgs[:max(room, 0)]
        if msgs:
            self.pending.extend(msgs)
            self.delivered += len(msgs)
            self.ready.set()
        return len(msgs)

    def notify(self, sid: str, n: Notification) -> None:
        """A per-notification callback for subscription ``sid``."""
        self.offer([notification_message(sid, n)])

    def drop_notice(self) -> dict[str, Any] | None:
        """A ``dropped`` message when notifications were dropped since the last one."""
        if self.dropped == self._reported:
            return None
        new = self.dropped - self._reported
        self._reported = self.dropped
        return {"type": "dropped", "count": new, "total": self.dropped}

    def take(self, limit: int) -> list[dict[str, Any]]:
        """Up to ``limit`` queued notifications, without waiting."""
        p = self.pending
        if len(p) <= limit:
            out = list(p)
            p.clear()
        else:
            out = [p.popleft() for _ in range(limit)]
        if not p:
            self.ready.clear()
        return out

    def take_encoded(self, limit: int, max_bytes: int) -> bytes | None:
        """Up to ``limit`` queued notifications as one JSON array, at most ``max_bytes``
        long unless a single notification is longer (then it goes alone); ``None`` when
        nothing waits. Encoded in one call; a too-long array is cut in proportion and
        the rest put back, in order."""
        msgs = self.take(limit)
        while msgs:
            text = dumps_bytes(msgs)
            if len(text) <= max_bytes or len(msgs) == 1:
                return text
            keep = max(1, min(len(msgs) - 1, len(msgs) * max_bytes // len(text)))
            self.pending.extendleft(reversed(msgs[keep:]))
            self.ready.set()
            msgs = msgs[:keep]
        return None

    async def wait(self, timeout: float | None = None) -> bool:
        """Wait until a notification is queued (``False``: ``timeout`` seconds passed)."""
        if self.pending:
            return True
        try:
            await asyncio.wait_for(self.ready.wait(), timeout)
        except TimeoutError:
            return False
        return bool(self.pending)


def sse_frame(msg: dict[str, Any]) -> bytes:
    """One Server-Sent-Events frame: ``event: <type>`` and the JSON as ``data``."""
    return b"event: " + msg["type"].encode() + b"\ndata: " + dumps_bytes(msg) + b"\n\n"


__all__ = ["Outbox", "check_subscription_id", "notification_message", "notification_object",
           "sse_frame"]
