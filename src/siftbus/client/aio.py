"""The asyncio client: publish, subscribe, advertise and call broker-hosted services.

::

    async with await Client.connect("127.0.0.1", 7400, name="heater") as c:
        sub = await c.subscribe("Temperature(room = 12, value > 20)")
        await c.publish({"type": "Temperature", "sensor": 1, "room": 12, "value": 21.5})
        async for n in sub:            # Notification(profile, event, src, seq, ts)
            print(n.profile, n.event.to_json())

On a secured network (``docs/security.md``) a client proves who it is with a token, a
client certificate, or both, over TLS::

    tls = client_tls("certs/ca.pem")                   # trust the network's CA
    c = await Client.connect("b1.example", 7400, token=token, tls=tls)

A client survives a broker restart by default (``client/reconnecting.py``: backoff over
``servers``, subscriptions restored, publications kept within a bound, ``on_disconnect``
and ``on_reconnect`` told; ``reconnect=False`` ends the subscriptions instead).

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
import logging
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Any

import siftbus.telemetry as telemetry
from siftbus.errors import (
    BrokerUnavailable,
    ConnectionLostError,
    ProfileError,
    RemoteError,
    SiftbusError,
    TimedOut,
    WireError,
)
from siftbus.lang.profile import parse_profile_text, resolve
from siftbus.model import Event, Profile, Schema
from siftbus.wire.frames import Message, MsgType, decode_error, encode
from siftbus.wire.limits import CLIENT_LIMITS
from siftbus.wire.profiles import encode_profile
from siftbus.wire.transport import FrameConnection
from siftbus.wire.transport import connect as open_connection

from .addresses import client_tls, parse_address
from .composite import CompositeClient, CompositeSubscription
from .delivery import Delivering
from .notifications import Notification, NotificationBatch, NotifyBlock, event_json
from .publishing import Publisher
from .reconnect import ConnectionEvents, Reconnect, Server
from .reconnecting import MAX_SUB_BATCH, Reconnecting
from .retained import RetainedClient
from .session import SessionState
from .subscription import BatchCallback, Callback, Subscription, next_notification

log = logging.getLogger("siftbus.client")


def remote_error(body: dict[str, Any]) -> RemoteError:
    """The :class:`RemoteError` for an ERROR body (decoded by the wire layer's one
    error-reply decoder, :func:`siftbus.wire.frames.decode_error`)."""
    return decode_error(body).to_error()


class Client(Publisher, RetainedClient, Reconnecting, Delivering):
    """A connection to one broker (publisher, subscriber, or both); publishing:
    :class:`~siftbus.client.publishing.Publisher`; persistent notifications and temporal
    filters: :class:`~siftbus.client.retained.RetainedClient`."""

    def __init__(self, conn: FrameConnection | None, *, queue_size: int = 10_000) -> None:
        self._conn = conn
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
        self.ended = asyncio.Event()
        """Set when the connection is closed or lost (subscriptions then stop)."""
        self._tasks: set[asyncio.Task[Any]] = set()
        self.unclaimed: asyncio.Queue[Notification] = asyncio.Queue(queue_size)
        """Notifications for profiles without a :class:`Subscription` (e.g. restored)."""
        self.unclaimed_dropped = 0
        self.unclaimed_callback: Callback | None = None
        """If set, takes the notifications :attr:`unclaimed` would queue (synchronously,
        before a session acknowledges them)."""
        self.service_events: dict[str, asyncio.Queue[Any]] = {}
        self.errors: list[RemoteError] = []
        """ERRORs that answered no request (e.g. about an unacknowledged publish)."""
        self.callback_errors = 0
        """Notification callbacks that raised (each is logged; delivery goes on)."""
        self._reader_task: asyncio.Task[None] | None = None
        self.session: SessionState | None = None
        """The session (``connect(session=...)``), else ``None``."""
        self.adverts: list[Profile] = []
        self._token: str | None = None
        self._tls: ssl.SSLContext | None = None
        self._received: dict[str, str] | None = None
        """The trace context of the last NOTIFY received (the parent of ``settle``)."""
        self.servers: list[Server] = []
        """Where the client connects and reconnects, the current broker first."""
        self.reconnect = Reconnect()
        """The reconnection policy (``connect(reconnect=...)``)."""
        self.events = ConnectionEvents()
        """``on_disconnect``/``on_reconnect`` callbacks and the count of reconnections."""
        self.connected = asyncio.Event()
        """Set while a broker connection is up (cleared while reconnecting)."""
        self._requested_name: str | None = None
        self._server_hostname: str | None = None
        self._timeout = 10.0
        self._moving = False
        self._offline: list[Message] = []
        """PUB frames written while reconnecting (sent after it)."""
        self._offline_events = 0
        self._reconnector: asyncio.Task[None] | None = None

    # ---- connection ---------------------------------------------------------------------

    @classmethod
    async def connect(cls, host: str = "127.0.0.1", port: int = 7400, *,
                      name: str | None = None, timeout: float = 10.0,
                      queue_size: int = 10_000, token: str | None = None,
                      tls: ssl.SSLContext | None = None,
                      server_hostname: str | None = None,
                      session: str | SessionState | None = None,
                      servers: Sequence[str | tuple[str, int]] = (),
                      reconnect: bool | Reconnect = True,
                      on_disconnect: Callable[[Client], Any] | None = None,
                      on_reconnect: Callable[[Client], Any] | None = None) -> Client:
        """Connect, say HELLO and receive the schema.

        The first reachable of ``host:port`` and ``servers`` (``"host:port"`` strings or
        pairs) is taken; none reachable is :class:`~siftbus.errors.BrokerUnavailable`.
        With ``reconnect`` (default on; a :class:`Reconnect` sets attempts, backoff and
        the publish buffer) a lost connection is re-established to the same list, the
        subscriptions and advertisements restored and the session resumed;
        ``on_disconnect(client)`` and ``on_reconnect(client)`` are called (a coroutine
        function's coroutines run as tasks).

        ``token`` authenticates the client (``siftbus certs token``); ``tls`` (see
        :func:`client_tls`) makes the connection TLS, verifying the broker's certificate
        for ``server_hostname`` (default ``host``) and presenting the client's own
        certificate if the context has one. A broker that refuses the credentials
        answers with an error (:class:`~siftbus.errors.RemoteError` of kind
        ``AuthenticationError``). With ``session`` (an id or a :class:`SessionState`)
        the broker keeps the client's notifications while it is away and resumes after
        the last one it acknowledged (``docs/mobility.md``)."""
        c = cls(None, queue_size=queue_size)
        c.session = SessionState(session) if isinstance(session, str) else session
        c._token, c._tls = token, tls
        c._requested_name, c._server_hostname, c._timeout = name, server_hostname, timeout
        c.servers = [(host, port)] + [s if isinstance(s, tuple) else parse_address(s)
                                      for s in servers]
        c.reconnect = reconnect if isinstance(reconnect, Reconnect) else \
            Reconnect(enabled=bool(reconnect))
        c.events = ConnectionEvents(on_disconnect, on_reconnect)
        problems = []
        for h, p in c.servers:
            try:
                await c._handshake(h, p, name, timeout, None, server_hostname)
                break
            except ConnectionLostError as exc:
                problems.append(str(exc))
        else:
            raise BrokerUnavailable("; ".join(problems) + (
                " (is a broker running there? siftbus broker --schema schema.toml "
                f"--port {port} starts one)" if len(c.servers) == 1 else ""))
        c.servers.sort(key=lambda s: s != (h, p))  # the current broker first
        return c

    async def move(self, host: str, port: int, *, timeout: float = 10.0,
                   server_hostname: str | None = None) -> None:
        """Go to another broker with the same session (its notifications follow by a
        handoff, none lost or twice); subscriptions stay valid."""
        if self.session is None:
            raise WireError("move needs a session (connect with session=...)",
                            field="session")
        with contextlib.suppress(SiftbusError, ConnectionError):
            await self.flush()
        old, conn, reader = self.broker, self._conn, self._reader_task
        self._moving = True  # the old connection's end is not a loss to recover from
        try:
            if conn is not None:  # unacknowledged rows come again from the new broker
                conn.close()
                await conn.wait_closed(1.0)
            if reader is not None:
                reader.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await reader
            self._fail_pending(ConnectionLostError(f"moved away from broker {old}"))
            self._lost = None
            self.ended.clear()
            await self._handshake(host, port, self.name, timeout, old, server_hostname)
        finally:
            self._moving = False
        self.servers = [(host, port)] + [s for s in self.servers if s != (host, port)]

    async def ack(self, upto: int | None = None) -> int:
        """Acknowledge every session row handed out so far (with ``auto_ack=False``), or
        those numbered up to ``upto``; returns the number acknowledged once the broker
        has taken it (a round trip: the rows have left its buffer)."""
        n = self.ack_nowait(upto)
        if self.session is not None:
            await self.ping()
        return n

    def ack_nowait(self, upto: int | None = None) -> int:
        """:meth:`ack` without waiting for the broker (a relay such as the gateway
        acknowledges what its own consumer has acknowledged, from synchronous code)."""
        if self.session is None:
            return 0
        n = self.session.last if upto is None else min(upto, self.session.last)
        if self._conn is None:
            return n
        if telemetry.TRACER is None:
            self._write(Message(MsgType.SACK, {"ack": n}))
            return n
        with telemetry.span("settle", parent=self._received,
                            attributes={"messaging.client.id": self.name,
                                        "siftbus.session.ack": n}):
            self._write(Message(MsgType.SACK, {"ack": n}))
        return n

    async def _handshake(self, host: str, port: int, name: str | None, timeout: float,
                         previous: str | None, server_hostname: str | None) -> None:
        conn = await open_connection(host, port, CLIENT_LIMITS, timeout=timeout,
                                     what="broker", ssl=self._tls,
                                     server_hostname=server_hostname)
        c = self
        c._conn = conn
        hello: dict[str, Any] = {"role": "client", "corr": 0}
        if name:
            hello["name"] = name
        if self._token is not None:
            hello["token"] = self._token
        if c.session is not None:
            hello["session"] = c.session.hello(
                previous, [s.profile for s in c.subscriptions.values()], c.adverts)
        conn.send(Message(MsgType.HELLO, hello))
        try:
            ack, _ = await conn.read(timeout)
            if ack.type is MsgType.ERROR:
                conn.close()
                raise remote_error(ack.body)
            schema_msg, _ = await conn.read(timeout)
        except (TimeoutError, ConnectionError, WireError) as exc:
            conn.close()
            raise ConnectionLostError(f"broker at {host}:{port} did not complete the "
                                      f"handshake: {exc!r}") from None
        c.name = str(ack.body.get("name", ""))
        c.broker = str(ack.body.get("broker", ""))
        c.restored = list(ack.body.get("profiles", []))
        if c.session is not None:
            c.session.on_status(ack.body.get("session"))
        c.schema = Schema.from_dict(schema_msg.body.get("schema", {}), source="broker")
        c._reader_task = asyncio.ensure_future(c._read_loop())
        c.connected.set()

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
        self.ended.set()
        if self._reconnector is not None:
            self._reconnector.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reconnector
        if self._conn is not None:
            self._conn.close()
            await self._conn.wait_closed(5.0)
        if self._reader_task is not None:
            self._reader_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader_task
        for t in list(self._tasks):
            t.cancel()
        self._fail_pending(ConnectionLostError("client closed"))

    def run_callback(self, fn: Callable[[Any], Any], arg: Any) -> None:
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
        assert self._conn is not None
        try:
            while True:
                msg, _ = await self._conn.read()
                self._dispatch(msg)
        except (ConnectionError, WireError) as exc:
            self._connection_lost(ConnectionLostError(
                f"connection to broker {self.broker} lost: {exc!r}"))

    def _end(self, exc: ConnectionLostError) -> None:
        """The connection is over (the first reason given is kept: :attr:`lost`)."""
        if self._lost is None:
            self._lost = exc
        self.ended.set()
        self._fail_pending(self._lost)

    @property
    def lost(self) -> ConnectionLostError | None:
        """Why the connection ended, if it did other than by :meth:`close` (e.g. another
        process took the session over: ``SessionMoved``)."""
        lost = self._lost
        return lost if isinstance(lost, ConnectionLostError) else None

    def _dispatch(self, msg: Message) -> None:
        body = msg.body
        if msg.type is MsgType.NOTIFY:
            if telemetry.TRACER is not None and telemetry.KEY in body:
                with telemetry.span("receive", parent=body[telemetry.KEY],
                                    destination=telemetry.destinations(body.get("blocks", ())),
                                    attributes={"messaging.client.id": self.name}):
                    self._received = telemetry.carrier()
                    self._notify(body)
                return
            self._notify(body)
            return
        self._dispatch_other(msg)

    def _dispatch_other(self, msg: Message) -> None:
        body = msg.body
        if msg.type is MsgType.SCHEMA:
            self.schema = Schema.from_dict(body.get("schema", {}), source="broker")
            return
        if msg.type is MsgType.TNOTIFY:
            self.dispatch_retained(body, self.schema)
            return
        corr = body.get("corr")
        if msg.type is MsgType.REPLY and body.get("service") == "session" \
                and self.session is not None:
            self.session.on_status(body.get("event"))  # a handoff ended
            return
        if msg.type is MsgType.REPLY and corr is None and "service" in body:
            q = self.service_events.setdefault(str(body["service"]), asyncio.Queue())
            q.put_nowait(body.get("event"))
            return
        fut = self._pending.pop(corr, None) if isinstance(corr, int) else None
        if msg.type is MsgType.ERROR:
            if fut is not None and not fut.done():
                fut.set_exception(remote_error(body))
            else:
                err = remote_error(body)
                self.errors.append(err)
                if err.kind == "SessionMoved":  # another process has the session now
                    self._end(ConnectionLostError(err.message, field="session"))
                    if self._conn is not None:
                        self._conn.close()
        elif fut is not None and not fut.done():
            fut.set_result(body)

    def _write(self, msg: Message) -> None:
        reconnecting = not self.connected.is_set() and self._reconnector is not None \
            and not self.ended.is_set()
        # while the subscriptions are restored, publications still queue behind those
        # kept during the outage: they reach the broker in the order they were made
        if reconnecting or (self._offline and msg.type is MsgType.PUB):
            self._keep_offline(msg)
            return
        if self._conn is None:
            raise ConnectionLostError("not connected")
        self._conn.write(encode(msg))

    async def _request(self, mtype: MsgType, body: dict[str, Any],
                       timeout: float | None = 60.0) -> dict[str, Any]:
        if self._lost is not None:
            raise self._lost
        if self._closed:
            raise ConnectionLostError("client is closed")
        if not self.connected.is_set() and self._reconnector is not None \
                and not self._reconnector.done():
            await self._until_connected(timeout)
        self._flush_now()
        corr = next(self._corr)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[corr] = fut
        self._write(Message(mtype, {**body, "corr": corr}))
        try:
            return await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            self._pending.pop(corr, None)
            raise TimedOut(f"broker {self.broker} did not answer {mtype.name} within "
                           f"{timeout} s") from None

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
        done = 0
        try:  # each SUB frame is atomic at the broker; more than one is undone here
            for i in range(0, len(ps), MAX_SUB_BATCH):
                part = ps[i:i + MAX_SUB_BATCH]
                await self._request(MsgType.SUB, {"profiles": [encode_profile(p) for p in part]})
                done = i + len(part)
        except BaseException:
            if done:
                with contextlib.suppress(SiftbusError, ConnectionError, TimeoutError):
                    await self._request(MsgType.UNSUB, {"ids": [p.id for p in ps[:done]]})
            for s in subs:
                self._forget(s.id)
            raise
        if self.session is not None:
            self.session.subscribed(ps)
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
        if self.session is not None:
            self.session.unsubscribed(names)

    async def advertise(self, profile: str | Profile, *, id: str | None = None) -> str:
        """Announce what this client publishes (advertisement mode)."""
        p = self.profile(profile, id)
        await self._request(MsgType.ADV, {"adverts": [encode_profile(p)]})
        self.adverts.append(p)  # a move re-announces them at the new broker
        return p.id

    async def unadvertise(self, id: str) -> None:
        await self._request(MsgType.UNADV, {"ids": [id]})
        self.adverts = [p for p in self.adverts if p.id != id]

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

    async def subscribe_composite(self, line: str, *, queue_size: int = 10_000
                                  ) -> CompositeSubscription:
        """Subscribe a composite profile line (``ID: pattern within D ...``, see
        docs/composite.md); its access broker evaluates it and pushes the matches."""
        sub, = await CompositeClient.of(self).subscribe(line, queue_size=queue_size)
        return sub

    async def stats(self) -> dict[str, Any]:
        """The broker's instrumentation counters."""
        result = await self.call("broker", "stats")
        assert isinstance(result, dict)
        return result

    async def notifications(self) -> AsyncIterator[Notification]:
        """Notifications for profiles that have no :class:`Subscription` object."""
        while True:
            try:
                yield await next_notification(self.unclaimed, self.ended)
            except StopAsyncIteration:
                return


async def connect(host: str = "127.0.0.1", port: int = 7400, *, name: str | None = None,
                  timeout: float = 10.0, token: str | None = None,
                  tls: ssl.SSLContext | None = None) -> Client:
    """Shorthand for :meth:`Client.connect`."""
    return await Client.connect(host, port, name=name, timeout=timeout, token=token, tls=tls)


__all__ = ["BatchCallback", "Callback", "Client", "Notification", "NotificationBatch",
           "NotifyBlock", "RemoteError", "Subscription", "client_tls", "connect",
           "event_json", "parse_address", "remote_error"]
