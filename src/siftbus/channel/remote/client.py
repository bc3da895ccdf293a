"""Clients of the channel service: :class:`ChannelClient` speaks the siftbus wire
protocol to a channel server (or a broker hosting the service); :class:`BrokerChannelClient`
goes through the broker's own client library; :class:`RemoteConsumer` and
:class:`RemoteSupplier` are a remote pull consumer and push supplier on either (the push
consumer is :class:`~siftbus.channel.remote.push_consumer.RemotePushConsumer`)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from siftbus import errors
from siftbus.channel.event import StructuredEvent
from siftbus.channel.proxy import STRUCTURED_EVENT
from siftbus.channel.remote.protocol import SERVICE_NAME
from siftbus.channel.remote.push_consumer import PushRouter, event_of_wire
from siftbus.errors import (
    AdminLimitExceeded,
    ConnectionLostError,
    PropertyError,
    RemoteError,
    SiftbusError,
    UnsupportedAdmin,
    UnsupportedQoS,
    excerpt,
)
from siftbus.wire.frames import ErrorReply, MsgType, decode_error
from siftbus.wire.frames import Message as Frame
from siftbus.wire.limits import CLIENT_LIMITS, Limits
from siftbus.wire.transport import FrameConnection
from siftbus.wire.transport import connect as open_connection

_ERROR_CLASSES: dict[str, type[SiftbusError]] = {
    name: cls for name, cls in vars(errors).items()
    if isinstance(cls, type) and issubclass(cls, SiftbusError)}


def error_from_reply(reply: ErrorReply) -> SiftbusError:
    """The exception an ERROR reply (decoded by the wire layer's one decoder,
    :func:`siftbus.wire.frames.decode_error`) stands for: the service's own class when
    the one error tree has it (so callers catch ChannelNotFound, InvalidConstraint, ...),
    else the wire layer's RemoteError."""
    loc = reply.location()
    if reply.kind in ("UnsupportedQoS", "UnsupportedAdmin"):
        cls_q = UnsupportedQoS if reply.kind == "UnsupportedQoS" else UnsupportedAdmin
        return cls_q([PropertyError("REMOTE", str(reply.field or ""), None, reply.message)])
    if reply.kind == "AdminLimitExceeded":
        return AdminLimitExceeded(str(reply.field or ""), 0)
    cls = _ERROR_CLASSES.get(reply.kind)
    if cls is not None:
        try:
            return cls(reply.message, **loc)
        except TypeError:  # a class with another signature
            pass
    return reply.to_error()


class ChannelClient:
    """An asyncio client of the channel service over the siftbus wire protocol (the
    shared frame transport, :mod:`siftbus.wire.transport`, under ``limits``)."""

    def __init__(self, conn: FrameConnection, service: str = SERVICE_NAME) -> None:
        self._conn = conn
        self.service = service
        self._corr = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._router = PushRouter()

    def push_router(self) -> PushRouter:
        """Where this connection's push frames go (see :class:`RemotePushConsumer`)."""
        return self._router

    @classmethod
    async def connect(cls, host: str, port: int, *, name: str | None = None,
                      service: str = SERVICE_NAME, timeout: float = 10.0,
                      limits: Limits = CLIENT_LIMITS) -> ChannelClient:
        """Connect and say HELLO; ConnectionLostError when the service cannot be reached
        or does not answer within ``timeout`` seconds."""
        where = excerpt(host)
        try:
            conn = await open_connection(host, port, limits, timeout=timeout,
                                         what="the channel service")
        except (OverflowError, ValueError) as exc:  # a port beyond 65535, a bad host name
            raise ConnectionLostError(f"cannot reach the channel service at {where}:{port}: "
                                      f"{str(exc)[:200]}") from None
        client = cls(conn, service)
        body: dict[str, Any] = {"role": "client", "corr": 0}
        if name:
            body["name"] = name
        hello: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        client._waiting[0] = hello
        client._task = asyncio.ensure_future(client._read_loop())
        client._send(Frame(MsgType.HELLO, body))
        try:
            await asyncio.wait_for(hello, timeout)
        except TimeoutError:
            await client.close()
            raise ConnectionLostError(f"no answer from port {port} within {timeout:g} s "
                                      "(not a channel service?)") from None
        except SiftbusError:
            await client.close()
            raise
        return client

    def _send(self, frame: Frame) -> None:
        if self._closed or not self._conn.send(frame):
            raise ConnectionLostError("the connection to the channel service is closed")

    async def _read_loop(self) -> None:
        try:
            while True:
                msg, _ = await self._conn.read()
                body = msg.body
                corr = body.get("corr")
                if corr is None and msg.type is MsgType.REPLY and "service" in body:
                    self._router.dispatch(body.get("event"))
                    continue
                fut = self._waiting.pop(corr, None) if isinstance(corr, int) else None
                if fut is None or fut.done():
                    continue
                if msg.type is MsgType.ERROR:
                    fut.set_exception(error_from_reply(decode_error(body)))
                elif msg.type in (MsgType.REPLY, MsgType.ACK):
                    fut.set_result(body.get("result"))
        except (ConnectionError, SiftbusError):
            pass
        finally:
            self._closed = True
            for fut in self._waiting.values():
                if not fut.done():
                    fut.set_exception(ConnectionLostError("the channel service went away"))
            self._waiting.clear()
            self._router.lost()

    async def call(self, method: str, **args: Any) -> Any:
        """Call a service method; raises the service's error, or ConnectionLostError."""
        corr = next(self._corr)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[corr] = fut
        try:
            self._send(Frame(MsgType.CALL, {"service": self.service, "method": method,
                                            "args": args, "corr": corr}))
            if self._conn.congested:
                await self._conn.drain()
        except ConnectionError as exc:
            self._waiting.pop(corr, None)
            if isinstance(exc, ConnectionLostError):
                raise
            raise ConnectionLostError("the channel service went away") from None
        return await fut

    async def close(self) -> None:
        self._closed = True
        self._conn.close()
        await self._conn.wait_closed(5.0)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    async def __aenter__(self) -> ChannelClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class BrokerChannelClient:
    """The channel service through a :class:`siftbus.client.Client` (or SyncClient's
    async twin) connected to a broker that hosts it: ``call(method, **args)`` becomes
    ``client.call("channel", method, **args)``, so RemoteConsumer/RemoteSupplier work on
    top of it. The broker client's ``RemoteError`` is turned into the service's error
    class where that is known."""

    def __init__(self, client: Any, service: str = SERVICE_NAME) -> None:
        self.client = client
        self.service = service
        self._router: PushRouter | None = None
        self._drain: asyncio.Task[None] | None = None

    def push_router(self) -> PushRouter:
        """Push frames arrive in the broker client's ``service_events`` queue of this
        service; a task hands them to the router until the client has ended."""
        if self._router is None:
            self._router = PushRouter()
            queue = self.client.service_events.setdefault(self.service, asyncio.Queue())
            self._drain = asyncio.ensure_future(self._drain_loop(queue, self._router))
        return self._router

    async def _drain_loop(self, queue: asyncio.Queue[Any], router: PushRouter) -> None:
        ended = asyncio.ensure_future(self.client.ended.wait())
        try:
            while True:
                got = asyncio.ensure_future(queue.get())
                await asyncio.wait({got, ended}, return_when=asyncio.FIRST_COMPLETED)
                if not got.done():
                    got.cancel()
                    return  # the broker client closed or lost its connection
                router.dispatch(got.result())
                while not queue.empty():
                    router.dispatch(queue.get_nowait())
        finally:
            ended.cancel()
            router.lost()

    async def call(self, method: str, **args: Any) -> Any:
        try:
            return await self.client.call(self.service, method, **args)
        except RemoteError as exc:
            raise error_from_reply(ErrorReply(exc.message, exc.kind, exc.line, exc.column,
                                              exc.field)) from None

    async def close(self) -> None:
        close = getattr(self.client, "close", None)
        if close is not None:
            await close()
        if self._drain is not None:
            self._drain.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._drain


class RemoteConsumer:
    """A remote pull consumer with exactly-once delivery (acknowledge + deduplicate)."""

    def __init__(self, client: ChannelClient | BrokerChannelClient, channel: int,
                 proxy: int) -> None:
        self.client = client
        self.channel = channel
        self.proxy = proxy
        self.last_seq = 0
        self.duplicates = 0

    @classmethod
    async def obtain(cls, client: ChannelClient | BrokerChannelClient, channel: int, *,
                     admin: int = 0, kind: str = STRUCTURED_EVENT,
                     qos: Mapping[str, Any] | None = None) -> RemoteConsumer:
        pid = await client.call("obtain_consumer", channel=channel, admin=admin, kind=kind,
                                qos=dict(qos or {}))
        return cls(client, channel, pid)

    async def pull(self, max_number: int = 100, timeout: float = 1.0) -> list[Any]:
        """Up to ``max_number`` new events (waits up to ``timeout`` s for the first)."""
        got = await self.client.call("pull", channel=self.channel, proxy=self.proxy,
                                     max=max_number, ack=self.last_seq or None,
                                     timeout=timeout, packed=True)
        out = []
        for seq, data in got:
            if seq <= self.last_seq:
                self.duplicates += 1
                continue
            self.last_seq = seq
            out.append(event_of_wire(data))
        return out

    async def run_push(self, callback: Callable[[Any], Awaitable[None] | None], *,
                       batch: int = 256, stop: asyncio.Event | None = None) -> None:
        """Emulate a push consumer: call ``callback(event)`` for each event until
        ``stop`` is set (or the connection is lost)."""
        while stop is None or not stop.is_set():
            for e in await self.pull(batch, timeout=0.2):
                r = callback(e)
                if asyncio.iscoroutine(r):
                    await r

    async def add_filter(self, constraints: list[Any]) -> Any:
        return await self.client.call("add_filter", channel=self.channel,
                                      proxy=self.proxy, side="consumer",
                                      constraints=constraints)


class RemoteSupplier:
    """A remote push supplier."""

    def __init__(self, client: ChannelClient | BrokerChannelClient, channel: int,
                 proxy: int) -> None:
        self.client = client
        self.channel = channel
        self.proxy = proxy

    @classmethod
    async def obtain(cls, client: ChannelClient | BrokerChannelClient, channel: int, *,
                     admin: int = 0, kind: str = STRUCTURED_EVENT) -> RemoteSupplier:
        pid = await client.call("obtain_supplier", channel=channel, admin=admin, kind=kind)
        return cls(client, channel, pid)

    async def push(self, events: list[Any]) -> int:
        """Push structured events (or ``{"any": v}`` maps); returns how many were accepted."""
        wire = [e.to_dict() if isinstance(e, StructuredEvent) else e for e in events]
        n = await self.client.call("push", channel=self.channel, proxy=self.proxy,
                                   events=wire)
        return int(n)


__all__ = ["BrokerChannelClient", "ChannelClient", "RemoteConsumer", "RemoteSupplier",
           "error_from_reply"]
