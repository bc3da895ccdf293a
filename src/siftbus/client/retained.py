"""Retained state for the asyncio client: publish persistent notifications, subscribe
temporal filters whose collections the broker keeps in step.

::

    nid = await c.retain("Document(room in [10, 14], kind = memo)", id="memo-7", ttl=600)
    sub = await c.subscribe_retained("Document(room = 12)")   # returns once complete
    sub.items()                       # every still-valid notification it selects, now
    async for change in sub:          # then each later add / update / remove
        print(change.kind, change.notification.id, change.reason)
    await c.update_retained("memo-7", "Document(room = 12, kind = memo)", ttl=60)
    await c.withdraw("memo-7")

:class:`RetainedClient` is a mixin of :class:`~siftbus.client.aio.Client`; the
collection logic (strict: no duplicate, no gap) is :mod:`siftbus.temporal.collection`.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

from siftbus.errors import ProfileError, SiftbusError
from siftbus.model import Profile
from siftbus.temporal.collection import Collection
from siftbus.temporal.notification import (
    Change,
    PersistentNotification,
    Semantics,
    TemporalFilter,
)
from siftbus.wire.frames import MsgType
from siftbus.wire.profiles import encode_profile
from siftbus.wire.retained import decode_change, encode_publication

from .subscription import next_notification

log = logging.getLogger("siftbus.client")

ChangeCallback = Callable[[Change], Any]
"""Called with each change of a collection (a coroutine function's run as tasks)."""


class _Owner(Protocol):
    """What the mixin needs of its client (see :class:`~siftbus.client.aio.Client`)."""

    queue_size: int
    ended: asyncio.Event
    name: str
    broker: str

    def profile(self, profile: str | Profile, id: str | None = None) -> Profile: ...

    def run_callback(self, fn: Callable[[Any], Any], arg: Any) -> None: ...

    async def _request(self, mtype: MsgType, body: dict[str, Any],
                       timeout: float | None = 60.0) -> dict[str, Any]: ...

    @property
    def retained(self) -> dict[str, RetainedSubscription]: ...

    async def unsubscribe_retained(self, *ids: str | RetainedSubscription) -> None: ...


class RetainedSubscription:
    """One temporal filter: its collection (kept in step) and an async iterator of its
    changes (bounded queue; what does not fit is counted in :attr:`dropped`, the
    collection itself never misses a change)."""

    def __init__(self, client: _Owner, f: TemporalFilter, callback: ChangeCallback | None,
                 maxsize: int) -> None:
        self.client = client
        self.filter = f
        self.collection = Collection(f.id)
        self.callback = callback
        self.queue: asyncio.Queue[Change] = asyncio.Queue(maxsize)
        self.dropped = 0

    @property
    def id(self) -> str:
        return self.filter.id

    @property
    def profile(self) -> Profile:
        return self.filter.profile

    @property
    def semantics(self) -> Semantics:
        return self.filter.semantics

    def items(self) -> list[PersistentNotification]:
        """The collection now: every valid notification the filter selects, by id. The
        changes it already shows leave the iterator, which goes on with the changes after
        it (without ``items()`` the iterator starts with the initial answer's adds)."""
        queue = self.queue
        while not queue.empty():
            queue.get_nowait()
        return list(self.collection)

    def apply(self, change: Change) -> None:
        """Apply a change from the broker (strictly) and hand it on."""
        self.collection.apply(change)
        if self.callback is not None:
            self.client.run_callback(self.callback, change)
            return
        try:
            self.queue.put_nowait(change)
        except asyncio.QueueFull:
            self.dropped += 1

    def __aiter__(self) -> AsyncIterator[Change]:
        return self

    async def __anext__(self) -> Change:
        return await next_notification(self.queue, self.client.ended)

    async def get(self, timeout: float | None = None) -> Change:
        """The next change (``TimeoutError`` after ``timeout`` seconds)."""
        return await asyncio.wait_for(self.__anext__(), timeout)

    async def unsubscribe(self) -> None:
        await self.client.unsubscribe_retained(self.id)

    async def __aenter__(self) -> RetainedSubscription:
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.id in self.client.retained:
            await self.unsubscribe()


_ids = itertools.count(1)


class RetainedClient:
    """Persistent notifications and temporal filters (a mixin of ``Client``)."""

    @property
    def retained(self) -> dict[str, RetainedSubscription]:
        """This client's temporal filters by id."""
        subs: dict[str, RetainedSubscription] | None = self.__dict__.get("_retained")
        if subs is None:
            subs = self.__dict__["_retained"] = {}
        return subs

    async def retain(self: _Owner, subspace: str | Profile, *, id: str | None = None,
                     start: float | None = None, end: float | None = None,
                     ttl: float | None = None) -> str:
        """Publish a persistent notification (a subspace, e.g. ``"Doc(room in [1, 5])"``)
        valid from ``start`` (default: now, by the broker's clock) until ``end``, for
        ``ttl`` seconds, or until withdrawn. Returns its id; subscribers see it as
        ``broker/client/id``."""
        return await _publish(self, "publish", subspace, id, start, end, ttl)

    async def update_retained(self: _Owner, id: str, subspace: str | Profile, *,
                              start: float | None = None, end: float | None = None,
                              ttl: float | None = None) -> str:
        """Replace a notification this client published (subspace and validity, with
        the defaults of :meth:`retain`); its version goes up by one."""
        return await _publish(self, "update", subspace, id, start, end, ttl)

    async def withdraw(self: _Owner, *ids: str) -> None:
        """Withdraw notifications this client published."""
        await self._request(MsgType.TPUB, {"op": "withdraw", "ids": list(ids)})

    async def subscribe_retained(self: _Owner, profile: str | Profile,
                                 semantics: Semantics | str = Semantics.OVERLAPS, *,
                                 id: str | None = None,
                                 callback: ChangeCallback | None = None
                                 ) -> RetainedSubscription:
        """Subscribe a temporal filter. Returns once its collection holds every
        still-valid notification it selects, in the whole network; later changes go to
        the subscription's queue (or ``callback``)."""
        p = self.profile(profile, id or f"t{next(_ids)}")
        if p.id in self.retained:
            raise ProfileError(f"temporal filter id {p.id!r} is already subscribed",
                               field=p.id)
        sem = semantics if isinstance(semantics, Semantics) else Semantics.parse(semantics)
        sub = RetainedSubscription(self, TemporalFilter(p, sem), callback, self.queue_size)
        self.retained[p.id] = sub  # first: changes arrive before the ACK
        try:
            await self._request(MsgType.TSUB, {"filters": [[encode_profile(p), sem.value]]})
        except BaseException:
            self.retained.pop(p.id, None)
            raise
        return sub

    async def unsubscribe_retained(self: _Owner, *ids: str | RetainedSubscription) -> None:
        names = [i.id if isinstance(i, RetainedSubscription) else i for i in ids]
        await self._request(MsgType.TUNSUB, {"ids": names})
        for n in names:
            self.retained.pop(n, None)

    def dispatch_retained(self, body: dict[str, Any], schema: Any) -> None:
        """Hand a TNOTIFY's changes to their subscriptions (the client's reader)."""
        subs = self.retained

        def held(fid: str, nid: str) -> PersistentNotification | None:
            sub = subs.get(fid)
            return sub.collection.items.get(nid) if sub is not None else None

        for raw in body.get("changes", ()):
            if not isinstance(raw, list) or len(raw) != 4 or raw[1] not in subs:
                continue  # a filter unsubscribed meanwhile
            try:
                subs[raw[1]].apply(decode_change(raw, schema, held))
            except SiftbusError:  # a change that does not fit: a broker bug, not ours
                log.exception("retained change %r does not fit its collection", raw[:2])


async def _publish(client: _Owner, op: str, subspace: str | Profile, id: str | None,
                   start: float | None, end: float | None, ttl: float | None) -> str:
    p = client.profile(subspace, id or f"r{next(_ids)}")
    reply = await client._request(MsgType.TPUB, {"op": op, "notes": [encode_publication(
        p.id, p, start=start, end=end, ttl=ttl)]})
    return str(reply.get("ids", [p.id])[0])


__all__ = ["ChangeCallback", "RetainedClient", "RetainedSubscription"]
