"""The asyncio TCP server around a :class:`~siftbus.broker.node.BrokerNode`.

One event loop per broker process; every frame is handled by the node in one atomic,
synchronous step, so handling is single-threaded per broker. The server accepts clients
and neighbour brokers on one port, dials the neighbours it is told to (retrying with
exponential backoff), and turns frame-level problems (malformed, oversized, unknown
type, a limit exceeded) into an ERROR followed by closing only that connection. The
connections themselves are :class:`~siftbus.wire.transport.FrameConnection` objects of
the shared frame transport, under the server's :class:`~siftbus.wire.limits.Limits`.

Connection handshake: the first frame must be HELLO (within ``hello_timeout``). A client
sends ``{"role": "client", "name": optional}`` and gets ACK ``{"name", "profiles"}`` (its
durable profiles) followed by SCHEMA. A broker sends ``{"role": "broker", "name",
"schema"}``; the acceptor checks that it is a configured neighbour with the same schema
and answers with its own HELLO.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from siftbus.errors import ConfigError, EnvironmentProblem, SiftbusError, WireError
from siftbus.wire.events import notify_count, split_block
from siftbus.wire.frames import Message, MsgType, encode, error_body, get
from siftbus.wire.limits import DEFAULT_LIMITS, Limits
from siftbus.wire.listener import Listener
from siftbus.wire.transport import (
    ConnectionClosed,
    FrameConnection,
    TransportStats,
    connect,
    read_frame,
)

from .node import BrokerNode, ServiceHandler

log = logging.getLogger("siftbus.broker")

CLIENT_BUFFER_LIMIT = DEFAULT_LIMITS.max_out_buffer
"""Default bytes queued for one client beyond which notifications to it are dropped
(counted); ``Limits.max_out_buffer`` sets it per server."""

TICK_INTERVAL = 0.1
"""Seconds between the clock ticks the node's tickers get."""

BROKER_HIGH_WATER = 4 * 1024 * 1024
"""Bytes queued toward a neighbour beyond which a reader waits for the link to drain."""


class BrokerServer:
    """Serve one broker node on TCP (clients and neighbour brokers on the same port).

    ``limits`` bound what each peer may send (see :class:`~siftbus.wire.limits.Limits`);
    ``max_frame`` is a shorthand for ``limits.max_frame``.
    """

    def __init__(self, node: BrokerNode, host: str = "127.0.0.1", port: int = 0, *,
                 dial: dict[str, tuple[str, int]] | None = None,
                 max_frame: int | None = None, retry_max: float = 2.0,
                 limits: Limits | None = None) -> None:
        limits = limits or DEFAULT_LIMITS
        if max_frame is not None:
            limits = limits.replace(max_frame=max_frame)
        self.node = node
        self.host = host
        self.dial = dict(dial or {})
        self.limits = limits
        self.max_frame = limits.max_frame
        self.retry_max = retry_max
        self.listener = Listener(self._accept, host, port, limits, name=f"broker {node.name}")
        self._conns: dict[str, FrameConnection] = {}
        self._dialed: set[FrameConnection] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closing = False
        self._client_ids = itertools.count(1)
        node.limits = limits
        node.transport_send = self._send
        node.run_async = self._run_async
        node.transport_stats = lambda: self.transport_stats().to_dict()
        #: set whenever a neighbour link comes up (for waiters)
        self.links_changed = asyncio.Event()

    # ---- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Listen, and start dialing the neighbours in ``dial``."""
        await self.listener.start()
        for name, addr in self.dial.items():
            self._spawn(self._dial_loop(name, addr))
        if self.node.tickers:
            self._spawn(self._tick_loop())

    @property
    def port(self) -> int:
        return self.listener.port

    @property
    def errors_sent(self) -> int:
        """ERRORs that closed a connection (malformed frames, exceeded limits)."""
        return sum(self.listener.counters.refused.values())

    def transport_stats(self) -> TransportStats:
        """Connections, refusals by limit, dropped frames, buffered bytes."""
        return self.listener.stats()

    async def close(self) -> None:
        self._closing = True
        for conn in list(self._dialed):
            conn.close()
        await self.listener.close()
        for t in list(self._tasks):
            t.cancel()
        for t in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        for conn in list(self._dialed):
            await conn.wait_closed(2.0)
        if self.node.store is not None:
            self.node.store.close()

    async def __aenter__(self) -> BrokerServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def wait_neighbours(self, timeout: float = 30.0) -> None:
        """Wait until every configured neighbour link is up."""
        async def wait() -> None:
            while len(self.node.neighbours_up()) < len(self.node.neighbours):
                self.links_changed.clear()
                await self.links_changed.wait()

        try:
            await asyncio.wait_for(wait(), timeout)
        except TimeoutError:
            missing = set(self.node.neighbours) - self.node.neighbours_up()
            raise EnvironmentProblem(f"broker {self.node.name}: neighbours "
                                     f"{', '.join(sorted(missing))} not connected after "
                                     f"{timeout:g}s") from None

    def register_service(self, name: str, handler: ServiceHandler, *,
                         on_client_down: Callable[[str], None] | None = None) -> None:
        """Host a service in this broker, reachable with ``client.call(name, method, ...)``.

        ``handler(method, args, caller)`` returns a msgpack-serialisable result or an
        awaitable of one; a raised ``SiftbusError`` reaches the caller as its error.
        ``on_client_down(caller)`` is called when that client's connection closes.
        """
        self.node.register_service(name, handler, on_client_down=on_client_down)

    def push(self, client: str, service: str, payload: Any) -> bool:
        """Send an unsolicited service message to a connected client (``False`` if gone)."""
        link = "@" + client
        if link not in self._conns:
            return False
        self._send(link, Message(MsgType.REPLY, {"service": service, "event": payload}))
        return True

    # ---- output ----------------------------------------------------------------------------

    def _send(self, link: str, msg: Message) -> None:
        conn = self._conns.get(link)
        notify = msg.type is MsgType.NOTIFY and link.startswith("@")
        # a transport already closing (the peer went while this step runs, e.g. UNSUBs
        # sent on while a broker shuts down) is as good as gone: writing raises on uvloop
        if conn is None or conn.closing or (notify and conn.congested):
            if notify:
                self.node.counters.dropped += notify_count(msg.body)
                if conn is not None:
                    conn.count_dropped()
            return
        frame = encode(msg)
        if len(frame) - 4 > self.max_frame:
            self._split_send(link, msg)
            return
        self.node.counters.count_out(link, len(frame))
        conn.write(frame)

    def _split_send(self, link: str, msg: Message) -> None:
        key = "blocks" if "blocks" in msg.body else "events"
        items = msg.body.get(key)
        if (key == "blocks" and isinstance(items, list) and len(items) == 1
                and items[0]["n"] >= 2):
            items = list(split_block(items[0]))  # one big block: cut its rows
        if not isinstance(items, list) or len(items) < 2:
            log.error("%s: dropping an unsplittable %s frame over the size limit",
                      self.node.name, msg.type.name)
            if msg.type is MsgType.NOTIFY and link.startswith("@"):
                self.node.counters.dropped += notify_count(msg.body)
            return
        half = len(items) // 2
        for part in (items[:half], items[half:]):
            self._send(link, Message(msg.type, {**msg.body, key: part}))

    def _run_async(self, result: Awaitable[Any], link: str, corr: int | None) -> None:
        async def run() -> None:
            try:
                value = await result
                self._send(link, Message(MsgType.REPLY, {"corr": corr, "result": value}))
            except SiftbusError as exc:
                self._send(link, Message(MsgType.ERROR, error_body(exc, corr)))
            except Exception as exc:  # a service bug must not kill the broker
                log.exception("service call failed")
                self._send(link, Message(MsgType.ERROR, error_body(exc, corr)))

        self._spawn(run())

    async def _tick_loop(self) -> None:
        """Tell the node's tickers the time (composite windows close without events)."""
        while not self._closing:
            await asyncio.sleep(TICK_INTERVAL)
            now = self.node.clock()
            for tick in self.node.tickers:
                try:
                    tick(now)
                except Exception:  # a ticker's bug must not stop the others
                    log.exception("%s: ticker failed", self.node.name)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _backpressure(self, conn: FrameConnection) -> None:
        """Wait for congested neighbour links, and for a client's own connection when
        more than ``max_out_buffer`` waits toward it (its requests are not read
        meanwhile)."""
        for name in self.node.neighbours_up():
            out = self._conns.get(name)
            if out is not None and out.buffered > BROKER_HIGH_WATER:
                with contextlib.suppress(ConnectionError):
                    await out.drain()
        if conn.congested:
            await conn.drain()

    # ---- connections -----------------------------------------------------------------------

    def _drop(self, conn: FrameConnection) -> None:
        link = conn.link
        if link and self._conns.get(link) is conn:
            del self._conns[link]
            if link.startswith("@"):
                self.node.client_down(link)
            else:
                self.node.broker_down(link)
                self.links_changed.set()
        conn.close()

    async def _accept(self, conn: FrameConnection) -> None:
        msg = await conn.read_hello()
        role = get(msg.body, "role", str, where="HELLO")
        if role == "client":
            self._client_hello(conn, msg)
        elif role == "broker":
            name = get(msg.body, "name", str, where="HELLO")
            self._check_peer(name, msg.body)
            conn.send(Message(MsgType.HELLO, {
                **self.node.hello_body(), "schema": self.node.schema.to_dict()}))
            self._link_up(conn, name)
        else:
            raise WireError(f"HELLO role must be 'client' or 'broker', got {role!r}")
        await self._serve(conn)

    def _client_hello(self, conn: FrameConnection, msg: Message) -> None:
        name = msg.body.get("name") or f"c{next(self._client_ids)}"
        if not isinstance(name, str):
            raise WireError("HELLO name must be a string", field="name")
        link, profiles = self.node.client_up(name)
        conn.link = link
        self._conns[link] = conn
        corr = msg.body.get("corr")
        self._send(link, Message(MsgType.ACK, {"corr": corr, "name": name,
                                               "broker": self.node.name,
                                               "profiles": profiles}))
        self._send(link, self.node.schema_message())

    def _check_peer(self, name: str, body: dict[str, Any]) -> None:
        if name not in self.node.neighbours:
            raise ConfigError(f"{name} is not a neighbour of {self.node.name}", field="name")
        if name in self._conns:
            raise ConfigError(f"{name} is already connected to {self.node.name}", field="name")
        self.node.check_schema(body, name)

    def _link_up(self, conn: FrameConnection, name: str) -> None:
        conn.link = name
        self._conns[name] = conn
        self.node.broker_up(name)
        self.links_changed.set()
        log.info("%s: link to %s is up", self.node.name, name)

    async def _serve(self, conn: FrameConnection) -> None:
        node = self.node
        link = conn.link
        is_broker = not link.startswith("@")
        try:
            while True:
                try:
                    msg, size = await conn.read()
                except WireError as exc:
                    conn.refuse(exc)
                    return
                node.counters.count_in(link, size)
                if is_broker and msg.type is MsgType.ERROR:
                    log.warning("%s: neighbour %s reports: %s", node.name, link,
                                msg.body.get("message"))
                try:
                    node.handle(link, msg)
                except Exception as exc:  # a bug: answer it, keep serving this peer
                    log.exception("%s: handling %s from %s failed", node.name,
                                  msg.type.name, link)
                    corr = msg.body.get("corr")
                    conn.send(Message(MsgType.ERROR, error_body(
                        exc, corr if isinstance(corr, int) else None)))
                await self._backpressure(conn)
        except ConnectionError:
            pass
        finally:
            self._drop(conn)

    async def _dial_loop(self, name: str, addr: tuple[str, int]) -> None:
        delay = 0.02
        while not self._closing:
            try:
                conn = await connect(addr[0], addr[1], self.limits, what=f"broker {name}",
                                     counters=self.listener.counters)
            except SiftbusError:
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.retry_max)
                continue
            self._dialed.add(conn)
            try:
                conn.send(Message(MsgType.HELLO, {
                    **self.node.hello_body(), "schema": self.node.schema.to_dict()}))
                try:
                    msg, _ = await conn.read(self.limits.hello_timeout)
                except TimeoutError:
                    raise WireError(f"{name} did not answer HELLO within "
                                    f"{self.limits.hello_timeout:g} s",
                                    field="hello_timeout") from None
                if msg.type is MsgType.ERROR:
                    raise ConfigError(f"{name} refused the link: {msg.body.get('message')}")
                if msg.type is not MsgType.HELLO:
                    raise WireError(f"{name} answered HELLO with {msg.type.name}")
                peer = get(msg.body, "name", str, where="HELLO")
                if peer != name:
                    raise ConfigError(f"{addr[0]}:{addr[1]} is {peer}, expected {name}")
                self.node.check_schema(msg.body, name)
                self._link_up(conn, name)
            except SiftbusError as exc:
                log.error("%s: link to %s failed: %s", self.node.name, name, exc)
                conn.refuse(exc)
                self._dialed.discard(conn)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.retry_max)
                continue
            except ConnectionClosed:
                conn.close()
                self._dialed.discard(conn)
                await asyncio.sleep(delay)
                continue
            delay = 0.02
            try:
                await self._serve(conn)
            finally:
                self._dialed.discard(conn)


def install_uvloop() -> bool:
    """Use uvloop for new event loops when it is installed; returns whether it is."""
    try:
        import uvloop
    except ImportError:
        return False
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return True


__all__ = ["BrokerServer", "install_uvloop", "read_frame"]
