"""Live delivery of notifications: what one is, and the deliverers that hand them out.

A :class:`Deliverer` takes the notifications of one batch on the driver and hands them to
the outside world: files (:class:`FileDeliverer`), HTTP webhooks
(:class:`WebhookDeliverer`) or a siftbus broker network (:class:`BrokerDeliverer`).
:class:`siftbus.spark.sinks.DeliverySink` is the sink that drives one. Kept apart from
the sinks because it needs no Spark at all: only the notification value and where it goes.
A message handed out cannot be taken back, so delivery is at-least-once on a replayed batch.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from siftbus.errors import ConfigError, ConnectionLostError


@dataclass(frozen=True, slots=True)
class Notification:
    """One delivery: an event that satisfied a subscriber's profile."""

    subscriber: str
    profile: str
    source: str
    event: int
    type: str
    text: str | None

    def to_dict(self) -> dict[str, Any]:
        body = json.loads(self.text) if self.text else None
        return {"subscriber": self.subscriber, "profile": self.profile, "source": self.source,
                "event": self.event, "type": self.type, "data": body}


class Deliverer(Protocol):
    """Hands notifications to the outside world (driver side)."""

    @property
    def where(self) -> str:
        """Where deliveries go, for messages."""

    def deliver(self, batch_id: int, notes: Sequence[Notification]) -> int:
        """Deliver; returns how many were accepted. Raises
        :class:`~siftbus.errors.ConnectionLostError` when the destination is gone."""

    def close(self) -> None: ...


class FileDeliverer:
    """Deliveries as JSON lines, one file per subscriber and batch (replays overwrite)."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    @property
    def where(self) -> str:
        return str(self.directory)

    def deliver(self, batch_id: int, notes: Sequence[Notification]) -> int:
        by_sub: dict[str, list[Notification]] = {}
        for n in notes:
            by_sub.setdefault(n.subscriber, []).append(n)
        for sub, items in by_sub.items():
            d = self.directory / sub
            d.mkdir(parents=True, exist_ok=True)
            tmp = d / f".batch-{batch_id:06d}.tmp"
            tmp.write_text("".join(json.dumps(n.to_dict()) + "\n" for n in items),
                           encoding="utf-8")
            os.replace(tmp, d / f"batch-{batch_id:06d}.jsonl")
        return len(notes)

    def close(self) -> None:
        return None


class WebhookDeliverer:
    """POSTs each subscriber's notifications of a batch as one JSON document.

    ``urls`` maps subscriber to URL; ``"*"`` is the URL for everyone else. Body:
    ``{"batch": N, "subscriber": S, "notifications": [...]}``.
    """

    def __init__(self, urls: Mapping[str, str], *, timeout: float = 10.0) -> None:
        import httpx

        if not urls:
            raise ConfigError("a webhook sink needs at least one URL", field="webhook")
        self.urls = dict(urls)
        self._client = httpx.Client(timeout=timeout)

    @property
    def where(self) -> str:
        return ", ".join(sorted(set(self.urls.values())))

    def deliver(self, batch_id: int, notes: Sequence[Notification]) -> int:
        import httpx

        by_sub: dict[str, list[Notification]] = {}
        for n in notes:
            by_sub.setdefault(n.subscriber, []).append(n)
        sent = 0
        for sub, items in sorted(by_sub.items()):
            url = self.urls.get(sub, self.urls.get("*"))
            if url is None:
                continue
            body = {"batch": batch_id, "subscriber": sub,
                    "notifications": [n.to_dict() for n in items]}
            try:
                r = self._client.post(url, json=body)
                r.raise_for_status()
            except httpx.HTTPError as exc:
                raise ConnectionLostError(f"webhook {url} failed: {exc}") from None
            sent += len(items)
        return sent

    def close(self) -> None:
        self._client.close()


class BrokerDeliverer:
    """Publishes the matched events into a siftbus broker network, whose routing delivers
    them to the subscribers' clients (each event once, however many profiles it matched).
    """

    def __init__(self, host: str, port: int, *, name: str = "siftbus-pipeline",
                 timeout: float = 60.0) -> None:
        from siftbus.client import SyncClient

        self.address = f"{host}:{port}"
        self._client = SyncClient.connect(host, port, name=name, timeout=timeout)

    @property
    def where(self) -> str:
        return f"broker {self.address}"

    def deliver(self, batch_id: int, notes: Sequence[Notification]) -> int:
        seen: set[tuple[str, int]] = set()
        events: list[str] = []
        for n in notes:
            if (n.source, n.event) in seen or not n.text:
                continue
            seen.add((n.source, n.event))
            events.append(n.text)
        if events:
            # ack=True: the broker has routed them when this returns (flow control).
            self._client.publish_batch(events, ack=True)
        return len(notes)

    def close(self) -> None:
        self._client.close()


__all__ = [
    "BrokerDeliverer",
    "Deliverer",
    "FileDeliverer",
    "Notification",
    "WebhookDeliverer",
]
