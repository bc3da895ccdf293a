"""The asyncio TCP server around a :class:`~siftbus.broker.node.BrokerNode`.

One event loop per broker process; every frame is handled by the node in one atomic,
synchronous step, so handling is single-threaded per broker. The server accepts clients
and neighbour brokers on one port, dials the neighbours it is told to (retrying with
exponential backoff), and turns frame-level problems (malformed, oversized, unknown
type) into an ERROR followed by closing only that connection.

Connection handshake: the first frame must be HELLO. A client sends
``{"role": "client", "name": optional}`` and gets ACK ``{"name", "profiles"}`` (its
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

from siftbus.errors import ConfigError, SiftbusError, WireError
from siftbus.wire.events import notify_count, split_block
from siftbus.wire.frames import MAX_FRAME, Message, MsgType, encode, error_body, get
from siftbus.wire.transport import read_frame

from .node import BrokerNode, ServiceHandler

log = logging.getLogger("siftbus.broker")

CLIENT_BUFFER_LIMIT = 64 * 1024 * 1024
"""Bytes queued for one client beyond which notifications to it are dropped (counted)."""

BROKER_HIGH_WATER = 4 * 1024 * 1024
"""Bytes queued toward a neighbour beyond which a reader waits for the link to drain."""

class _Conn:
    __slots__ = ("closed", "link", "writer")

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.link = ""
        self.closed = False


class BrokerServer:
    """Serve one broker node on TCP (clients and neighbour brokers on the same port)."""

    def __init__(self, node: BrokerNode, host: str = "127.0.0.1", port: int = 0, *,
                 dial: dict[str, tuple[str, int]] | None = None,
                 max_frame: int = MAX_FRAME, retry_max: float = 2.0) -> None:
        self.node = node
        self.host = host
        self._port = port
        self.dial = dict(dial or {})
        self.max_frame = max_frame
        self.retry_max = retry_max
        self._server: asyncio.Server | None = None
        self._conns: dict[str, _Conn] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closing = False
        self._client_ids = itertools.count(1)
        node.transport_send = self._send
        node.run_async = self._run_async
        self.errors_sent = 0
        #: set whenever a neighbour link comes up (for waiters)
        self.links_changed = asyncio.Event()

    # ---- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Listen, and start dialing the neighbours in ``dial``."""
        try:
            self._server = await asyncio.start_server(self._accept, self.host, self._port,
                                                      limit=self.max_frame + 8)
        except OSError as exc:
            from siftbus.errors import EnvironmentProblem

            raise EnvironmentProblem(f"broker {self.node.name} cannot listen on "
                                     f"{self.host}:{self._port}: {exc.strerror}") from None
        for name, addr in self.dial.items():
            self._spawn(self._dial_loop(name, addr))

    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        self._closing = True
        if self._server is not None:
            self._server.close()
        for conn in list(self._conns.values()):
            self._drop(conn)
        for t in list(self._tasks):
            t.cancel()
        for t in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
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
            from siftbus.errors import EnvironmentProblem

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
        # a transport already closing (the peer went while this step runs, e.g. UNSUBs
        # sent on while a broker shuts down) is as good as gone: writing raises on uvloop
        if conn is None or conn.closed or conn.writer.transport.is_closing():
            if msg.type is MsgType.NOTIFY and link.startswith("@"):
                self.node.counters.dropped += notify_count(msg.body)
            return
        transport = conn.writer.transport
        if (link.startswith("@") and msg.type is MsgType.NOTIFY
                and transport.get_write_buffer_size() > CLIENT_BUFFER_LIMIT):
            self.node.counters.dropped += notify_count(msg.body)
            return
        frame = encode(msg)
        if len(frame) - 4 > self.max_frame:
            self._split_send(link, msg)
            return
        self.node.counters.count_out(link, len(frame))
        conn.writer.write(frame)

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

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _backpressure(self) -> None:
        for name in self.node.neighbours_up():
            conn = self._conns.get(name)
            if conn is not None and \
                    conn.writer.transport.get_write_buffer_size() > BROKER_HIGH_WATER:
                with contextlib.suppress(ConnectionError):
                    await conn.writer.drain()

    # ---- connections -----------------------------------------------------------------------

    def _drop(self, conn: _Conn) -> None:
        if conn.closed:
            return
        conn.closed = True
        link = conn.link
        if link and self._conns.get(link) is conn:
            del self._conns[link]
            if link.startswith("@"):
                self.node.client_down(link)
            else:
                self.node.broker_down(link)
                self.links_changed.set()
        with contextlib.suppress(Exception):
            conn.writer.close()

    def _refuse(self, conn: _Conn, exc: BaseException) -> None:
        self.errors_sent += 1
        with contextlib.suppress(Exception):
            conn.writer.write(encode(Message(MsgType.ERROR, error_body(exc))))
        self._drop(conn)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
                      ) -> None:
        conn = _Conn(writer)
        try:
            msg, _ = await asyncio.wait_for(read_frame(reader, self.max_frame), 30)
            if msg.type is not MsgType.HELLO:
                raise WireError(f"the first frame must be HELLO, got {msg.type.name}")
            role = get(msg.body, "role", str, where="HELLO")
            if role == "client":
                self._client_hello(conn, msg)
            elif role == "broker":
                name = get(msg.body, "name", str, where="HELLO")
                self._check_peer(name, msg.body)
                writer.write(encode(Message(MsgType.HELLO, {
                    **self.node.hello_body(), "schema": self.node.schema.to_dict()})))
                self._link_up(conn, name)
            else:
                raise WireError(f"HELLO role must be 'client' or 'broker', got {role!r}")
        except SiftbusError as exc:
            self._refuse(conn, exc)
            return
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            self._drop(conn)
            return
        await self._serve(conn, reader)

    def _client_hello(self, conn: _Conn, msg: Message) -> None:
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

    def _link_up(self, conn: _Conn, name: str) -> None:
        conn.link = name
        self._conns[name] = conn
        self.node.broker_up(name)
        self.links_changed.set()
        log.info("%s: link to %s is up", self.node.name, name)

    async def _serve(self, conn: _Conn, reader: asyncio.StreamReader) -> None:
        node = self.node
        link = conn.link
        is_broker = not link.startswith("@")
        try:
            while not conn.closed:
                try:
                    msg, size = await read_frame(reader, self.max_frame)
                except WireError as exc:
                    self._refuse(conn, exc)
                    return
                node.counters.count_in(link, size)
                if is_broker and msg.type is MsgType.ERROR:
                    log.warning("%s: neighbour %s reports: %s", node.name, link,
                                msg.body.get("message"))
                node.handle(link, msg)
                await self._backpressure()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._drop(conn)

    async def _dial_loop(self, name: str, addr: tuple[str, int]) -> None:
        delay = 0.02
        while not self._closing:
            try:
                reader, writer = await asyncio.open_connection(addr[0], addr[1],
                                                               limit=self.max_frame + 8)
            except OSError:
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.retry_max)
                continue
            conn = _Conn(writer)
            try:
                writer.write(encode(Message(MsgType.HELLO, {
                    **self.node.hello_body(), "schema": self.node.schema.to_dict()})))
                msg, _ = await asyncio.wait_for(read_frame(reader, self.max_frame), 30)
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
                self._refuse(conn, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.retry_max)
                continue
            except (TimeoutError, ConnectionError, asyncio.IncompleteReadError):
                self._drop(conn)
                await asyncio.sleep(delay)
                continue
            delay = 0.02
            await self._serve(conn, reader)


def install_uvloop() -> bool:
    """Use uvloop for new event loops when it is installed; returns whether it is."""
    try:
        import uvloop
    except ImportError:
        return False
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return True


__all__ = ["BrokerServer", "install_uvloop", "read_frame"]
