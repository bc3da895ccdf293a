"""The asyncio client: publish, subscribe, advertise and call broker-hosted services.

::

    async with await Client.connect("127.0.0.1", 7400, name="heater") as c:
        sub = await c.subscribe("Temperature(room = 12, value > 20)")
        await c.publish({"type": "Temperature", "sensor": 1, "room": 12, "value": 21.5})
        async for n in sub:            # Notification(profile, event, src, seq, ts)
            print(n.profile, n.event.to_json())

A high-rate subscriber can take whole frames instead (no object per notification)::

    def on_batch(batch: NotificationBatch) -> None:
        for nb in batch.blocks:        # columnar: keys, seq, ts arrays; ids per row
            handle(nb.etype, nb.keys, nb.counts, nb.ids)

    await c.subscribe_many(profiles, batch_callback=on_batch)
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import time
from collections import Counter
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np

from siftbus.errors import (
    ConnectionLostError,
    EnvironmentProblem,
    ProfileError,
    RemoteError,
    SiftbusError,
    WireError,
)
from siftbus.lang.profile import parse_profile_text, resolve
from siftbus.model import Event, EventType, Profile, Schema, event_from_dict, parse_event
from siftbus.wire.events import Block, decode_batch, encode_block, group_by_type, in_order
from siftbus.wire.frames import Message, MsgType, encode
from siftbus.wire.profiles import encode_profile
from siftbus.wire.transport import read_frame

MAX_BATCH = 5000
"""Events per PUB frame when publishing a large batch."""


@dataclass(frozen=True, slots=True)
class Notification:
    """An event delivered for one of this client's profiles."""

    profile: str
    """The id of the matching profile (the client's own id)."""
    event: Event
    src: str
    """The publisher (``broker/client``)."""
    seq: int
    """The publication's sequence number at its publisher."""
    ts: float
    """The publisher's clock at publication (seconds)."""

    @property
    def latency(self) -> float:
        """Seconds from publication to now (same-machine clocks)."""
        return time.time() - self.ts


def _frozen(a: np.ndarray) -> np.ndarray:
    """``a`` made read-only (a view when it is writable), so a batch is immutable."""
    if a.flags.writeable:
        a = a.view()
        a.flags.writeable = False
    return a


@dataclass(frozen=True, slots=True)
class NotifyBlock:
    """Consecutive notified events of one type in columnar form, with the ids of this
    client's profiles that each row matched (one block of a NOTIFY frame).

    The arrays are read-only; row ``i`` matched ``counts[i]`` profiles, whose ids are
    ``ids[offsets[i]:offsets[i + 1]]`` (sorted within a row).
    """

    block: Block
    """The event rows (keys, publishers, sequence numbers, stamps, positions)."""
    counts: np.ndarray
    """int32: how many of this client's profiles each row matched (at least one)."""
    ids: tuple[str, ...]
    """The matching profile ids, row after row."""

    @property
    def etype(self) -> EventType:
        return self.block.etype

    @property
    def keys(self) -> np.ndarray:
        """``[rows, attributes]`` keys in schema order (int64 when every attribute is
        ordered, else an object array of ints and strs)."""
        return self.block.keys

    @property
    def src(self) -> str | list[str]:
        """The publisher (``broker/client``) of every row, or one per row."""
        return self.block.src

    @property
    def seq(self) -> np.ndarray:
        """int64 sequence numbers at the publishers."""
        return self.block.seq

    @property
    def ts(self) -> np.ndarray:
        """float64 publication times (seconds since the epoch)."""
        return self.block.ts

    @property
    def at(self) -> np.ndarray | None:
        """The rows' positions in the frame's publication order (several blocks only)."""
        return self.block.at

    def __len__(self) -> int:
        """Notifications (profile ids) in this block."""
        return len(self.ids)

    @property
    def offsets(self) -> np.ndarray:
        """int64 ``[rows + 1]``: where each row's ids start in :attr:`ids`."""
        out = np.zeros(len(self.counts) + 1, np.int64)
        np.cumsum(self.counts, out=out[1:])
        return out

    def rows(self) -> np.ndarray:
        """int64: the row of each notification (aligned with :attr:`ids`)."""
        return np.repeat(np.arange(len(self.counts), dtype=np.int64), self.counts)

    def _filtered(self, keep: np.ndarray) -> NotifyBlock | None:
        """The notifications where ``keep`` (aligned with :attr:`ids`) is true, without
        rows left with none; ``None`` when nothing is kept."""
        if not keep.any():
            return None
        if keep.all() and int(self.counts.min()) > 0:
            return self
        counts = np.bincount(self.rows()[keep], minlength=len(self.counts))
        live = np.flatnonzero(counts)
        ids = tuple(p for p, k in zip(self.ids, keep.tolist(), strict=True) if k)
        return _notify_block(self.block.take(live), counts[live].astype(np.int32), ids)


def _notify_block(block: Block, counts: np.ndarray, ids: Sequence[str]) -> NotifyBlock:
    b = Block(block.etype, _frozen(block.keys), block.src, _frozen(block.seq),
              _frozen(block.ts), None if block.at is None else _frozen(block.at))
    return NotifyBlock(b, _frozen(counts), tuple(ids))


@dataclass(frozen=True, slots=True)
class NotificationBatch:
    """The notifications of one NOTIFY frame for one batch consumer, in columnar form.

    It is what a ``batch_callback`` receives: no Python object is built per
    notification until asked for. ``len(batch)`` is the number of notifications;
    iterating yields :class:`Notification` values lazily in publication order (within
    an event, profile ids sorted) -- exactly what the per-notification API would have
    delivered for the same profiles.
    """

    blocks: tuple[NotifyBlock, ...]
    """One block per event type in the frame (rows without a match for this consumer
    are left out)."""

    def __len__(self) -> int:
        return sum(len(b.ids) for b in self.blocks)

    @property
    def n_events(self) -> int:
        """Distinct notified events (rows) in the batch."""
        return sum(len(b.counts) for b in self.blocks)

    def _ordered(self) -> Iterator[tuple[Event, str, int, float, list[str]]]:
        return in_order([(b.block, b.counts, list(b.ids)) for b in self.blocks])

    def __iter__(self) -> Iterator[Notification]:
        for ev, src, seq, ts, pids in self._ordered():
            for pid in pids:
                yield Notification(pid, ev, src, seq, ts)

    def to_events(self) -> list[Event]:
        """The notified events, each once, in publication order."""
        return [row[0] for row in self._ordered()]

    def ids(self) -> list[str]:
        """The profile id of every notification (block after block, as :meth:`stamps`)."""
        return [p for b in self.blocks for p in b.ids]

    def stamps(self) -> np.ndarray:
        """float64: the publication time of every notification (block after block)."""
        if not self.blocks:
            return np.zeros(0, np.float64)
        return np.concatenate([np.repeat(b.ts, b.counts) for b in self.blocks])


def remote_error(body: dict[str, Any]) -> RemoteError:
    """The :class:`RemoteError` for an ERROR body."""
    def opt_int(v: Any) -> int | None:
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    return RemoteError(str(body.get("message", "error")), kind=str(body.get("kind", "")),
                       line=opt_int(body.get("line")), column=opt_int(body.get("column")),
                       field=str(body["field"]) if body.get("field") is not None else None)


log = logging.getLogger("siftbus.client")

Callback = Callable[[Notification], Any]
BatchCallback = Callable[[NotificationBatch], Any]


class Subscription:
    """One profile of this client: an async iterator of its notifications.

    The queue is bounded; when it is full new notifications are dropped and counted in
    :attr:`dropped` (a slow consumer is visible, not silent). With a callback, the
    notifications go to the callback instead of the queue. With a batch callback they
    reach it as part of a :class:`NotificationBatch` per frame (shared by every
    subscription with the same batch callback), and neither queue nor callback is used.
    """

    def __init__(self, client: Client, profile: Profile, callback: Callback | None,
                 maxsize: int, batch_callback: BatchCallback | None = None) -> None:
        if callback is not None and batch_callback is not None:
            raise ValueError("give a callback or a batch_callback, not both")
        self.client = client
        self.profile = profile
        self.callback = callback
        self.batch_callback = batch_callback
        self.queue: asyncio.Queue[Notification] = asyncio.Queue(maxsize)
        self.dropped = 0
        self.received = 0
        """Notifications delivered for this profile (queued, called back or batched)."""

    @property
    def id(self) -> str:
        return self.profile.id

    def _put(self, n: Notification) -> None:
        self.received += 1
        if self.callback is not None:
            self.client._call_user(self.callback, n)
            return
        try:
            self.queue.put_nowait(n)
        except asyncio.QueueFull:
            self.dropped += 1

    def __aiter__(self) -> AsyncIterator[Notification]:
        return self

    async def __anext__(self) -> Notification:
        return await self.client._next(self.queue)

    async def get(self, timeout: float | None = None) -> Notification:
        """The next notification (``TimeoutError`` after ``timeout`` seconds)."""
        return await asyncio.wait_for(self.__anext__(), timeout)

    async def unsubscribe(self) -> None:
        await self.client.unsubscribe(self.id)

    async def __aenter__(self) -> Subscription:
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.id in self.client.subscriptions:
            await self.unsubscribe()


class Client:
    """A connection to one broker (publisher, subscriber, or both)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *,
                 queue_size: int = 10_000) -> None:
        self._reader = reader
        self._writer = writer
        self.queue_size = queue_size
        self.name = ""
        self.broker = ""
        self.schema: Schema | None = None
        self.restored: list[str] = []
        """Ids of durable profiles the broker kept for this client name."""
        self.subscriptions: dict[str, Subscription] = {}
        self._batch_subs = 0
        """How many subscriptions have a batch callback (0: the per-notification path)."""
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._corr = itertools.count(1)
        self._auto_ids = itertools.count(1)
        self._seq = 0
        self._buffer: list[Event] = []
        self._buffer_ts: list[float] = []
        self._flush_scheduled = False
        self._closed = False
        self._lost: BaseException | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self.unclaimed: asyncio.Queue[Notification] = asyncio.Queue(queue_size)
        """Notifications for profiles without a :class:`Subscription` (e.g. restored)."""
        self.unclaimed_dropped = 0
        self.service_events: dict[str, asyncio.Queue[Any]] = {}
        self.errors: list[RemoteError] = []
        """ERRORs that answered no request (e.g. about an unacknowledged publish)."""
        self.callback_errors = 0
        """Notification callbacks that raised (each is logged; delivery goes on)."""
        self._reader_task: asyncio.Task[None] | None = None

    # ---- connection ---------------------------------------------------------------------

    @classmethod
    async def connect(cls, host: str = "127.0.0.1", port: int = 7400, *,
                      name: str | None = None, timeout: float = 10.0,
                      queue_size: int = 10_000) -> Client:
        """Connect, say HELLO and receive the schema."""
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port),
                                                    timeout)
        except (OSError, TimeoutError) as exc:
            raise ConnectionLostError(f"cannot connect to broker at {host}:{port}: "
                                      f"{getattr(exc, 'strerror', None) or exc}") from None
        c = cls(reader, writer, queue_size=queue_size)
        hello: dict[str, Any] = {"role": "client", "corr": 0}
        if name:
            hello["name"] = name
        writer.write(encode(Message(MsgType.HELLO, hello)))
        try:
            ack, _ = await asyncio.wait_for(read_frame(reader), timeout)
            if ack.type is MsgType.ERROR:
                writer.close()
                raise remote_error(ack.body)
            schema_msg, _ = await asyncio.wait_for(read_frame(reader), timeout)
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError) as exc:
            writer.close()
            raise ConnectionLostError(f"broker at {host}:{port} did not complete the "
                                      f"handshake: {exc!r}") from None
        c.name = str(ack.body.get("name", ""))
        c.broker = str(ack.body.get("broker", ""))
        c.restored = list(ack.body.get("profiles", []))
        c.schema = Schema.from_dict(schema_msg.body.get("schema", {}), source="broker")
        c._reader_task = asyncio.ensure_future(c._read_loop())
        return c

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Send what is buffered and close the connection."""
        if self._closed:
            return
        with contextlib.suppress(SiftbusError, ConnectionError):
            await self.flush()
        self._closed = True
        self._writer.close()
        with contextlib.suppress(Exception):
            await self._writer.wait_closed()
        if self._reader_task is not None:
            self._reader_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader_task
        for t in list(self._tasks):
            t.cancel()
        self._fail_pending(ConnectionLostError("client closed"))

    def _call_user(self, fn: Callable[[Any], Any], arg: Any) -> None:
        """Run a notification callback. Its failure is logged and counted in
        :attr:`callback_errors`; it never stops the reader, so other subscriptions of this
        client keep receiving."""
        try:
            result = fn(arg)
        except Exception:
            self.callback_errors += 1
            log.exception("notification callback %r failed", fn)
            return
        if result is not None and asyncio.iscoroutine(result):
            self._spawn(self._guarded(result, fn))

    async def _guarded(self, coro: Awaitable[Any], fn: Callable[[Any], Any]) -> None:
        try:
            await coro
        except Exception:
            self.callback_errors += 1
            log.exception("notification callback %r failed", fn)

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _fail_pending(self, exc: BaseException) -> None:
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(exc)
        self._pending.clear()

    async def _read_loop(self) -> None:
        try:
            while True:
                msg, _ = await read_frame(self._reader)
                self._dispatch(msg)
        except (asyncio.IncompleteReadError, ConnectionError, WireError) as exc:
            self._lost = ConnectionLostError(f"connection to broker {self.broker} lost: "
                                             f"{exc!r}")
            self._fail_pending(self._lost)

    def _dispatch(self, msg: Message) -> None:
        body = msg.body
        if msg.type is MsgType.NOTIFY:
            assert self.schema is not None
            blocks = decode_batch(body, self.schema, notify=True)
            if self._batch_subs:
                self._dispatch_batches(blocks)
            else:
                self._dispatch_each(blocks, None)
            return
        if msg.type is MsgType.SCHEMA:
            self.schema = Schema.from_dict(body.get("schema", {}), source="broker")
            return
        corr = body.get("corr")
        if msg.type is MsgType.REPLY and corr is None and "service" in body:
            q = self.service_events.setdefault(str(body["service"]), asyncio.Queue())
            q.put_nowait(body.get("event"))
            return
        fut = self._pending.pop(corr, None) if isinstance(corr, int) else None
        if msg.type is MsgType.ERROR:
            if fut is not None and not fut.done():
                fut.set_exception(remote_error(body))
            else:
                self.errors.append(remote_error(body))
        elif fut is not None and not fut.done():
            fut.set_result(body)

    def _dispatch_each(self, blocks: list[tuple[Block, np.ndarray, list[str]]],
                       skip: set[str] | None) -> None:
        """One :class:`Notification` per (event, id) not in ``skip``, in publication
        order, to its subscription's queue or callback (else to :attr:`unclaimed`)."""
        subs = self.subscriptions
        for ev, src, seq, ts, pids in in_order(blocks):
            for pid in pids:
                if skip is not None and pid in skip:
                    continue
                n = Notification(pid, ev, src, seq, ts)
                sub = subs.get(pid)
                if sub is not None:
                    sub._put(n)
                else:
                    try:
                        self.unclaimed.put_nowait(n)
                    except asyncio.QueueFull:
                        self.unclaimed_dropped += 1

    def _dispatch_batches(self, blocks: list[tuple[Block, np.ndarray, list[str]]]) -> None:
        """Hand a frame to its batch callbacks (one :class:`NotificationBatch` each) and
        the rest of its notifications to the per-notification path.

        The work per notification is C-level (counting ids, filtering arrays); Python
        runs once per distinct profile id of the frame, not once per notification.
        """
        subs = self.subscriptions
        groups: dict[BatchCallback, set[str]] = {}
        batched: set[str] = set()
        single = True  # every id goes to one batch callback
        for pid, k in Counter(itertools.chain.from_iterable(b[2] for b in blocks)).items():
            sub = subs.get(pid)
            cb = sub.batch_callback if sub is not None else None
            if cb is None:
                single = False
                continue
            sub.received += k  # type: ignore[union-attr]
            batched.add(pid)
            groups.setdefault(cb, set()).add(pid)
        if len(groups) > 1:
            single = False
        if not single:
            self._dispatch_each(blocks, batched)
        for cb, ids in groups.items():
            out: list[NotifyBlock] = []
            for block, counts, pids in blocks:
                keep = (np.ones(len(pids), bool) if single else
                        np.fromiter((p in ids for p in pids), bool, len(pids)))
                nb = _notify_block(block, counts, pids)._filtered(keep)
                if nb is not None:
                    out.append(nb)
            if out:
                self._call_user(cb, NotificationBatch(tuple(out)))

    async def _next(self, queue: asyncio.Queue[Notification]) -> Notification:
        if self._lost is not None and queue.empty():
            raise StopAsyncIteration
        getter = asyncio.ensure_future(queue.get())
        try:
            while True:
                done, _ = await asyncio.wait({getter}, timeout=0.5)
                if done:
                    return getter.result()
                if self._lost is not None or self._closed:
                    raise StopAsyncIteration
        finally:
            getter.cancel()

    async def _request(self, mtype: MsgType, body: dict[str, Any],
                       timeout: float | None = 60.0) -> dict[str, Any]:
        if self._lost is not None:
            raise self._lost
        if self._closed:
            raise ConnectionLostError("client is closed")
        self._flush_now()
        corr = next(self._corr)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[corr] = fut
        self._writer.write(encode(Message(mtype, {**body, "corr": corr})))
        return await asyncio.wait_for(fut, timeout)

    # ---- profiles ------------------------------------------------------------------------------

    def profile(self, profile: str | Profile, id: str | None = None) -> Profile:
        """Parse a profile line against the broker's schema (an id is made up if absent)."""
        if isinstance(profile, Profile):
            return profile if id is None else profile.with_id(id)
        assert self.schema is not None
        parsed = parse_profile_text(profile)
        pid = id or parsed.id or f"s{next(self._auto_ids)}"
        return resolve(parsed, self.schema, id=pid)

    async def subscribe(self, profile: str | Profile, callback: Callback | None = None, *,
                        id: str | None = None,
                        batch_callback: BatchCallback | None = None) -> Subscription:
        """Subscribe one profile; returns its :class:`Subscription`.

        Notifications go to the subscription's bounded queue, or to ``callback`` one by
        one, or -- with ``batch_callback`` -- to that callback once per NOTIFY frame as a
        :class:`NotificationBatch` holding every notification of the frame for the
        profiles subscribed with the same batch callback. A callback may be a coroutine
        function (its coroutines run as tasks).
        """
        (sub,) = await self.subscribe_many([profile], callback, ids=[id] if id else None,
                                           batch_callback=batch_callback)
        return sub

    async def subscribe_many(self, profiles: Iterable[str | Profile],
                             callback: Callback | None = None, *,
                             ids: Sequence[str] | None = None,
                             batch_callback: BatchCallback | None = None
                             ) -> list[Subscription]:
        """Subscribe several profiles in one request (arguments as :meth:`subscribe`)."""
        if callback is not None and batch_callback is not None:
            raise ValueError("give a callback or a batch_callback, not both")
        ps = [self.profile(p, ids[i] if ids else None) for i, p in enumerate(profiles)]
        seen = set(self.subscriptions)
        for p in ps:
            if p.id in seen:
                raise ProfileError(f"profile id {p.id!r} is already subscribed", field=p.id)
            seen.add(p.id)
        subs = [Subscription(self, p, callback, self.queue_size, batch_callback)
                for p in ps]
        for s in subs:  # registered first: notifications may overtake the ACK
            self._register(s)
        try:
            await self._request(MsgType.SUB, {"profiles": [encode_profile(p) for p in ps]})
        except BaseException:
            for s in subs:
                self._forget(s.id)
            raise
        return subs

    def _register(self, sub: Subscription) -> None:
        self.subscriptions[sub.id] = sub
        if sub.batch_callback is not None:
            self._batch_subs += 1

    def _forget(self, pid: str) -> None:
        sub = self.subscriptions.pop(pid, None)
        if sub is not None and sub.batch_callback is not None:
            self._batch_subs -= 1

    async def unsubscribe(self, *ids: str | Subscription) -> None:
        """Remove profiles; notifications the broker sent before its ACK are still
        delivered to them, later ones cannot come."""
        names = [i.id if isinstance(i, Subscription) else i for i in ids]
        await self._request(MsgType.UNSUB, {"ids": names})
        for n in names:
            self._forget(n)

    async def advertise(self, profile: str | Profile, *, id: str | None = None) -> str:
        """Announce what this client publishes (advertisement mode)."""
        p = self.profile(profile, id)
        await self._request(MsgType.ADV, {"adverts": [encode_profile(p)]})
        return p.id

    async def unadvertise(self, id: str) -> None:
        await self._request(MsgType.UNADV, {"ids": [id]})

    # ---- publishing ---------------------------------------------------------------------------

    def event(self, event: Event | Mapping[str, Any] | str) -> Event:
        """An :class:`Event` from an event, an event-file object or a JSON line."""
        if isinstance(event, Event):
            return event
        assert self.schema is not None
        if isinstance(event, str):
            return parse_event(event, self.schema)
        data = {k: Decimal(repr(v)) if isinstance(v, float) else v for k, v in event.items()}
        return event_from_dict(data, self.schema)

    def _blocks(self, events: list[Event], ts: list[float] | float) -> list[dict[str, Any]]:
        """Encoded blocks (one per event type) for events published now; the events get
        consecutive sequence numbers in the order given."""
        n = len(events)
        seq = np.arange(self._seq, self._seq + n, dtype=np.int64)
        stamps = np.full(n, ts) if isinstance(ts, float) else np.array(ts, np.float64)
        self._seq += n
        out = []
        for at in group_by_type(events):
            if at is None:
                out.append(encode_block(Block.of_events(events, self.name, seq, stamps)))
            else:
                out.append(encode_block(Block.of_events(
                    [events[i] for i in at.tolist()], self.name, seq[at], stamps[at], at)))
        return out

    async def publish(self, event: Event | Mapping[str, Any] | str) -> int:
        """Publish one event; events published in the same loop turn share one frame.

        Returns the event's sequence number.
        """
        if self._lost is not None:
            raise self._lost
        self._buffer.append(self.event(event))
        self._buffer_ts.append(time.time())
        seq = self._seq + len(self._buffer) - 1
        if len(self._buffer) >= MAX_BATCH:
            self._flush_now()
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush_now)
        return seq

    async def publish_batch(self, events: Iterable[Event | Mapping[str, Any] | str], *,
                            ack: bool = False) -> int:
        """Publish many events in as few frames as possible; returns how many.

        With ``ack=True`` waits until the broker has routed them (flow control). Events
        travel in columnar blocks (one frame per :data:`MAX_BATCH` events); the call
        waits for the socket only when its buffer is above the high-water mark.
        """
        if self._lost is not None:
            raise self._lost
        self._flush_now()
        now = time.time()
        evs = [self.event(e) for e in events]
        for i in range(0, len(evs), MAX_BATCH):
            body = {"blocks": self._blocks(evs[i:i + MAX_BATCH], now)}
            if ack:
                await self._request(MsgType.PUB, body)
            else:
                self._writer.write(encode(Message(MsgType.PUB, body)))
        await self._writer.drain()
        return len(evs)

    def _flush_now(self) -> None:
        self._flush_scheduled = False
        if self._buffer and not self._closed:
            body = {"blocks": self._blocks(self._buffer, self._buffer_ts)}
            self._buffer = []
            self._buffer_ts = []
            self._writer.write(encode(Message(MsgType.PUB, body)))

    async def flush(self) -> None:
        """Send buffered events and wait until the socket buffer drains."""
        self._flush_now()
        await self._writer.drain()

    async def ping(self, timeout: float = 30.0) -> None:
        """Round trip to the broker: everything sent before has been handled there."""
        await self._request(MsgType.PING, {}, timeout)

    # ---- services ----------------------------------------------------------------------------

    async def call(self, service: str, method: str, _timeout: float | None = 60.0,
                   **args: Any) -> Any:
        """Call ``method`` of a service hosted in the broker; returns its result."""
        reply = await self._request(MsgType.CALL, {"service": service, "method": method,
                                                   "args": args}, _timeout)
        return reply.get("result")

    async def stats(self) -> dict[str, Any]:
        """The broker's instrumentation counters."""
        result = await self.call("broker", "stats")
        assert isinstance(result, dict)
        return result

    async def notifications(self) -> AsyncIterator[Notification]:
        """Notifications for profiles that have no :class:`Subscription` object."""
        while True:
            try:
                yield await self._next(self.unclaimed)
            except StopAsyncIteration:
                return


async def connect(host: str = "127.0.0.1", port: int = 7400, *, name: str | None = None,
                  timeout: float = 10.0) -> Client:
    """Shorthand for :meth:`Client.connect`."""
    return await Client.connect(host, port, name=name, timeout=timeout)


def parse_address(text: str) -> tuple[str, int]:
    """``host:port`` (or ``port``) -> ``(host, port)``."""
    host, _, port = text.rpartition(":")
    try:
        return (host or "127.0.0.1", int(port))
    except ValueError:
        raise EnvironmentProblem(f"bad broker address {text!r}: use host:port") from None


def event_json(n: Notification) -> str:
    """One JSON line for a notification (what ``siftbus subscribe`` prints)."""
    return json.dumps({"profile": n.profile, "src": n.src, "seq": n.seq,
                       "event": json.loads(n.event.to_json())})


__all__ = ["BatchCallback", "Client", "Notification", "NotificationBatch", "NotifyBlock",
           "RemoteError", "Subscription", "connect", "event_json", "parse_address"]
