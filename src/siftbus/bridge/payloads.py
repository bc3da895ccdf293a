"""What a notification looks like on its MQTT topic: one writer per registration format."""

from __future__ import annotations

import json
from collections.abc import Callable

from siftbus.client import Notification
from siftbus.wire.cloudevents import notification_bytes

from .registrations import Registration


def notification_json(reg: Registration, n: Notification, number: int) -> bytes:
    """The gateway's notification object (``docs/gateway.md``), plus the subscriber; the
    event written exactly (decimals with their domain's places)."""
    head = json.dumps({"type": "notification", "subscription": reg.profile,
                       "subscriber": reg.subscriber, "src": n.src, "seq": n.seq,
                       "ts": n.ts, "n": number}, separators=(",", ":"))
    return f'{head[:-1]},"event":{n.event.to_json()}}}'.encode()


def notification_cloudevent(reg: Registration, n: Notification, number: int) -> bytes:
    """The notification as a structured CloudEvent (``docs/cloudevents.md``)."""
    return notification_bytes(n.event, src=n.src, seq=n.seq, ts=n.ts,
                              subscription=f"{reg.subscriber}/{reg.profile}", number=number)


PAYLOADS: dict[str, Callable[[Registration, Notification, int], bytes]] = {
    "json": notification_json, "cloudevents": notification_cloudevent}
"""The registry of notification formats (:data:`.registrations.FORMATS`)."""

__all__ = ["PAYLOADS", "notification_cloudevent", "notification_json"]
