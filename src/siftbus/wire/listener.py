"""Accepting framed connections: the server side of the frame transport.

A :class:`Listener` listens on TCP, makes a :class:`~siftbus.wire.transport.FrameConnection`
for each connection under the server's :class:`~siftbus.wire.limits.Limits` (all of them
sharing one :class:`~siftbus.wire.counters.TransportCounters`, so one budget of buffered
bytes), refuses connections over ``max_connections``, and runs the server's handler for
each. Every siftbus server listens through it (the broker, the channel server).

With an ``ssl`` context the listener speaks TLS: a connection becomes a
:class:`~siftbus.wire.transport.FrameConnection` only once its handshake is complete
(within ``hello_timeout``), and :attr:`~siftbus.wire.transport.FrameConnection.ssl_object`
gives its owner the peer's verified certificate. Failed handshakes are counted in
``refused["tls_handshake"]`` (connections begun, neither completed nor still
handshaking: asyncio tells the protocol nothing about a handshake that failed).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl as ssl_module
import weakref
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from siftbus.errors import EnvironmentProblem, SiftbusError, WireError

from .counters import TransportCounters, TransportStats
from .limits import DEFAULT_LIMITS, Limits
from .transport import FrameConnection

log = logging.getLogger("siftbus.wire")


Handler = Callable[[FrameConnection], Awaitable[None]]
"""What a listener runs for each accepted connection."""


class Listener:
    """Accept framed connections on TCP and run ``handler(conn)`` for each.

    A :class:`~siftbus.errors.SiftbusError` escaping the handler is answered with ERROR
    (the limit or the problem named) and closes that connection; ``ConnectionError``
    and ``TimeoutError`` just close it; any other exception is logged as a bug and
    closes it. The server goes on serving everyone else.
    """

    def __init__(self, handler: Handler, host: str = "127.0.0.1", port: int = 0,
                 limits: Limits = DEFAULT_LIMITS, *, name: str = "server",
                 ssl: ssl_module.SSLContext | None = None) -> None:
        self.handler = handler
        self.ssl = ssl
        self.host = host
        self._port = port
        self.limits = limits
        self.name = name
        self.counters = TransportCounters(limits.max_buffered)
        self.connections: set[FrameConnection] = set()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._handshakes = 0
        """TLS connections begun (each made a protocol before its handshake)."""
        self._handshaking: weakref.WeakSet[FrameConnection] = weakref.WeakSet()

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            self._server = await loop.create_server(
                self._protocol, self.host, self._port, ssl=self.ssl,
                ssl_handshake_timeout=self.limits.hello_timeout if self.ssl else None)
        except OSError as exc:
            raise EnvironmentProblem(f"{self.name} cannot listen on {self.host}:"
                                     f"{self._port}: {exc.strerror or exc}") from None

    @property
    def port(self) -> int:
        assert self._server is not None, "listener not started"
        return int(self._server.sockets[0].getsockname()[1])

    def stats(self) -> TransportStats:
        if self.ssl is not None:
            failed = self._handshakes - self.counters.tls_done - len(self._handshaking)
            if failed > 0:
                self.counters.refused["tls_handshake"] = failed
        return self.counters.snapshot(len(self.connections))

    def _protocol(self) -> FrameConnection:
        conn = FrameConnection(self.limits, counters=self.counters, on_made=self._made,
                               on_lost=self.connections.discard)
        if self.ssl is not None:
            self._handshakes += 1
            self._handshaking.add(conn)
        return conn

    def _made(self, conn: FrameConnection) -> None:
        if self.ssl is not None:
            self._handshaking.discard(conn)
            self.counters.tls_done += 1
        if len(self.connections) >= self.limits.max_connections:
            conn.refuse(WireError(f"{self.name} holds {len(self.connections)} connections, "
                                  "its limit", field="max_connections"))
            return
        self.connections.add(conn)
        self.counters.accepted += 1
        task = asyncio.get_running_loop().create_task(self._run(conn))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, conn: FrameConnection) -> None:
        try:
            await self.handler(conn)
        except SiftbusError as exc:
            conn.refuse(exc)
        except (ConnectionError, TimeoutError):
            pass
        except Exception:  # a handler bug must not take the listener down
            log.exception("%s: connection handler for %s failed", self.name, conn.peer)
        finally:
            conn.close()

    async def close(self, grace: float = 2.0) -> None:
        """Stop accepting, close every connection (aborting those that do not go within
        ``grace`` seconds) and end the handlers."""
        if self._server is not None:
            self._server.close()
        conns = list(self.connections)
        for conn in conns:
            conn.close()
        await cancel_all(self._tasks)
        for conn in conns:
            await conn.wait_closed(grace)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), grace)

    async def __aenter__(self) -> Listener:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


async def cancel_all(tasks: Iterable[asyncio.Task[Any]]) -> None:
    """Cancel ``tasks`` and wait until each has ended (what it raised is its own business:
    a server closing does not fail because a handler did)."""
    pending = list(tasks)
    for t in pending:
        t.cancel()
    for t in pending:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await t


__all__ = ["Handler", "Listener", "cancel_all"]
