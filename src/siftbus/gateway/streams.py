"""A streaming consumer of the gateway: its subscriptions and its bounded outbox.

A WebSocket connection, a Server-Sent-Events response and a REST pull subscription are
each one :class:`Outbox`: the gateway's broker client hands notifications to it with
:meth:`Outbox.offer`, which never waits -- when the outbox holds ``queue_size``
messages the notification is dropped and counted, like the broker's own slow clients.
A writer task per connection empties it toward the socket at the client's pace, so a
slow or stalled client costs its own queue and nothing else.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from siftbus.client import Client, Notification
from siftbus.errors import ProfileError

_ID = re.compile(r"[\w.\-]{1,64}")


def check_subscription_id(sid: Any) -> str:
    """A client-chosen subscription id: 1 to 64 letters, digits, ``_``, ``.``, ``-``."""
    if not isinstance(sid, str) or not _ID.fullmatch(sid):
        raise ProfileError("a subscription id is 1 to 64 letters, digits, '_', '.' or '-'",
                           field="id")
    return sid


def notification_message(sid: str, n: Notification) -> dict[str, Any]:
    """The JSON message of one notification (WebSocket, SSE and pull alike)."""
    return {"type": "notification", "subscription": sid, "src": n.src, "seq": n.seq,
            "ts": n.ts, "event": n.event.to_json_dict()}


class Outbox:
    """Bounded messages toward one consumer, with counts of what was sent and dropped."""

    def __init__(self, key: str, queue_size: int, client: Client) -> None:
        self.key = key
        self.client = client
        """The broker connection its profiles are subscribed through."""
        """Unique among the gateway's consumers (prefix of its profiles' broker ids)."""
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(queue_size)
        self.subscriptions: dict[str, str] = {}
        """Client-chosen id -> profile line (as the broker resolved it)."""
        self.delivered = 0
        self.dropped = 0
        self._reported = 0

    def broker_id(self, sid: str) -> str:
        return f"{self.key}/{sid}"

    def offer(self, msg: dict[str, Any]) -> bool:
        """Queue ``msg`` unless the outbox is full (then count it as dropped)."""
        try:
            self.queue.put_nowait(msg)
        except asyncio.QueueFull:
            self.dropped += 1
            return False
        return True

    def notify(self, sid: str, n: Notification) -> None:
        """The broker client's callback for subscription ``sid``."""
        if self.offer(notification_message(sid, n)):
            self.delivered += 1

    def drop_notice(self) -> dict[str, Any] | None:
        """A ``dropped`` message when notifications were dropped since the last one."""
        if self.dropped == self._reported:
            return None
        new = self.dropped - self._reported
        self._reported = self.dropped
        return {"type": "dropped", "count": new, "total": self.dropped}

    def take(self, limit: int) -> list[dict[str, Any]]:
        """Up to ``limit`` queued messages, without waiting."""
        out: list[dict[str, Any]] = []
        while len(out) < limit and not self.queue.empty():
            out.append(self.queue.get_nowait())
        return out


def sse_frame(msg: dict[str, Any]) -> bytes:
    """One Server-Sent-Events frame: ``event: <type>`` and the JSON as ``data``."""
    return f"event: {msg['type']}\ndata: {json.dumps(msg)}\n\n".encode()


__all__ = ["Outbox", "check_subscription_id", "notification_message", "sse_frame"]
