"""Composite subscriptions of the asyncio client (docs/composite.md).

::

    async with await Client.connect(port=7400, name="security") as c:
        sub = await c.subscribe_composite(
            "alarm: glass=GlassBreak(level > 5) -> motion=Motion(present = 1) "
            "within 60 s same room")
        async for m in sub:                     # CompositeMatch
            print(m.profile, [(label, e.event.to_json()) for label, e in m.bindings])

The access broker evaluates the profile (its service ``composite``) and pushes each match
with its component events; this module sends the lines, takes the pushes off the
client's service queue and hands each match to its subscription (a bounded queue that
counts what it drops, like :class:`~siftbus.client.subscription.Subscription`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import weakref
from collections.abc import AsyncIterator
from typing import Any, ClassVar, Protocol

from siftbus.errors import WireError
from siftbus.match.composite import CompositeMatch, StampedEvent
from siftbus.model import Schema
from siftbus.wire.events import decode_event_keys

from .subscription import next_notification

SERVICE = "composite"


class CompositeOwner(Protocol):
    """What composite subscriptions need of a client."""

    name: str
    schema: Schema | None
    service_events: dict[str, asyncio.Queue[Any]]
    ended: asyncio.Event

    async def call(self, service: str, method: str, _timeout: float | None = 60.0,
                   **args: Any) -> Any: ...


def decode_matches(event: Any, schema: Schema, subscriber: str = "") -> list[CompositeMatch]:
    """The matches of one pushed message: ``{matches: [{profile, completed, events}]}``
    with ``[label, type, keys, time, src, seq]`` per component event (checked)."""
    if not isinstance(event, dict) or not isinstance(event.get("matches"), list):
        raise WireError("a composite push must be {matches: [...]}")
    out = []
    for m in event["matches"]:
        if (not isinstance(m, dict) or not isinstance(m.get("events"), list)
                or not isinstance(m.get("profile"), str)
                or not isinstance(m.get("completed"), int)):
            raise WireError("a composite match must be {profile, completed, events}")
        bindings = []
        for item in m["events"]:
            if not isinstance(item, list) or len(item) != 6:
                raise WireError("a composite event must be [label, type, keys, time, src, seq]")
            label, tname, keys, t, src, seq = item
            etype = schema.get(tname) if isinstance(tname, str) else None
            if (etype is None or not isinstance(label, str) or not isinstance(t, int)
                    or not isinstance(src, str) or not isinstance(seq, int)):
                raise WireError(f"bad composite event {str(item)[:80]}")
            bindings.append((label, StampedEvent(decode_event_keys(etype, keys), t,
                                                 (src, seq))))
        out.append(CompositeMatch(m["profile"], subscriber, tuple(bindings), m["completed"]))
    return out


def match_json(m: CompositeMatch) -> str:
    """One match as a JSON line (times in seconds): ``{"profile", "completed",
    "events": [{"label", "time", "src", "seq", "event"}]}``."""
    events = [{"label": label, "time": e.time / 1e6, "src": e.order[0], "seq": e.order[1],
               "event": e.event.to_json_dict()} for label, e in m.bindings]
    return json.dumps({"profile": m.profile, "completed": m.completed / 1e6,
                       "events": events})


class CompositeSubscription:
    """One composite profile of a client: an async iterator of its matches."""

    def __init__(self, owner: CompositeClient, id: str, maxsize: int) -> None:
        self.owner = owner
        self.id = id
        self.queue: asyncio.Queue[CompositeMatch] = asyncio.Queue(maxsize)
        self.received = 0
        """Matches pushed for this profile."""
        self.dropped = 0
        """Matches lost because the queue was full."""

    def deliver(self, m: CompositeMatch) -> None:
        self.received += 1
        try:
            self.queue.put_nowait(m)
        except asyncio.QueueFull:
            self.dropped += 1

    def __aiter__(self) -> AsyncIterator[CompositeMatch]:
        return self

    async def __anext__(self) -> CompositeMatch:
        return await next_notification(self.queue, self.owner.client.ended)

    async def get(self, timeout: float | None = None) -> CompositeMatch:
        """The next match (``TimeoutError`` after ``timeout`` seconds)."""
        return await asyncio.wait_for(self.__anext__(), timeout)

    async def unsubscribe(self) -> None:
        await self.owner.unsubscribe(self.id)


class CompositeClient:
    """The composite subscriptions of one client (one per client: :meth:`of`)."""

    _by_client: ClassVar[weakref.WeakKeyDictionary[Any, CompositeClient]] = (
        weakref.WeakKeyDictionary())

    def __init__(self, client: CompositeOwner) -> None:
        self.client = client
        self.subscriptions: dict[str, CompositeSubscription] = {}
        self.unclaimed = 0
        """Matches of profiles this client has no subscription object for."""
        self.bad = 0
        """Pushed messages that did not decode."""
        self._queue = client.service_events.setdefault(SERVICE, asyncio.Queue())
        self._task: asyncio.Task[None] | None = None

    @classmethod
    def of(cls, client: CompositeOwner) -> CompositeClient:
        got = cls._by_client.get(client)
        if got is None:
            got = cls._by_client[client] = cls(client)
        return got

    async def subscribe(self, *lines: str, queue_size: int = 10_000
                        ) -> list[CompositeSubscription]:
        """Subscribe composite profile lines (``ID: pattern within D ...``), all or none."""
        result = await self.client.call(SERVICE, "subscribe", texts=list(lines))
        subs = []
        for cid in result["ids"]:
            sub = CompositeSubscription(self, cid, queue_size)
            self.subscriptions[cid] = sub
            subs.append(sub)
        if self._task is None:
            self._task = asyncio.ensure_future(self._pump())
        return subs

    async def unsubscribe(self, *ids: str) -> None:
        await self.client.call(SERVICE, "unsubscribe", ids=list(ids))
        for cid in ids:
            self.subscriptions.pop(cid, None)

    async def _pump(self) -> None:
        """Hand each pushed match to its subscription until the connection ends."""
        ended = asyncio.ensure_future(self.client.ended.wait())
        try:
            while True:
                getter = asyncio.ensure_future(self._queue.get())
                done, _ = await asyncio.wait({getter, ended},
                                             return_when=asyncio.FIRST_COMPLETED)
                if getter not in done:
                    getter.cancel()
                    return
                schema = self.client.schema
                assert schema is not None
                try:
                    found = decode_matches(getter.result(), schema, self.client.name)
                except WireError:
                    self.bad += 1  # a broker bug must not stop the other matches
                    continue
                for m in found:
                    sub = self.subscriptions.get(m.profile)
                    if sub is None:
                        self.unclaimed += 1
                    else:
                        sub.deliver(m)
        finally:
            ended.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await ended


__all__ = ["CompositeClient", "CompositeSubscription", "decode_matches", "match_json"]
