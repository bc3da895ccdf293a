"""The links between neighbour brokers (a mixin of
:class:`~siftbus.broker.server.BrokerServer`): dialing the neighbours a broker is told to
(retrying with exponential backoff), the HELLO exchange and its checks at both ends (a
configured neighbour, the name its certificate gives, the same schema), and waiting until
every link is up.

Separate from :mod:`.server` because it is the broker-to-broker side of the server; the
server accepts and serves both kinds of peer and calls in here for neighbours.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from siftbus.errors import (
    AuthenticationError,
    ConfigError,
    EnvironmentProblem,
    SiftbusError,
    WireError,
)
from siftbus.security.tls import ContextSet
from siftbus.wire.frames import Message, MsgType, get
from siftbus.wire.limits import Limits
from siftbus.wire.listener import Listener
from siftbus.wire.transport import ConnectionClosed, FrameConnection, connect

from .node import BrokerNode

log = logging.getLogger("siftbus.broker")


class _Server(Protocol):
    """What the mixin needs of its server."""

    node: BrokerNode
    limits: Limits
    retry_max: float
    tls: ContextSet | None
    listener: Listener
    links_changed: asyncio.Event
    _conns: dict[str, FrameConnection]
    _dialed: set[FrameConnection]
    _closing: bool

    async def _serve(self, conn: FrameConnection) -> None: ...

    def _link_up(self, conn: FrameConnection, name: str) -> None: ...


class NeighbourLinks:
    """Links to neighbour brokers (a mixin of ``BrokerServer``)."""

    async def wait_neighbours(self: _Server, timeout: float = 30.0) -> None:
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

    def _check_peer(self: _Server, name: str, body: dict[str, Any]) -> None:
        if name not in self.node.neighbours:
            raise ConfigError(f"{name} is not a neighbour of {self.node.name}", field="name")
        if name in self._conns:
            raise ConfigError(f"{name} is already connected to {self.node.name}", field="name")
        self.node.check_schema(body, name)

    def _link_up(self: _Server, conn: FrameConnection, name: str) -> None:
        conn.link = name
        self._conns[name] = conn
        self.node.broker_up(name)
        self.links_changed.set()
        log.info("%s: link to %s is up", self.node.name, name)

    async def _dial_loop(self: _Server, name: str, addr: tuple[str, int]) -> None:
        delay = 0.02
        while not self._closing:
            try:
                conn = await connect(addr[0], addr[1], self.limits, what=f"broker {name}",
                                     counters=self.listener.counters,
                                     ssl=self.tls.client if self.tls is not None else None)
            except SiftbusError as exc:
                if isinstance(exc, AuthenticationError):
                    log.error("%s: link to %s refused: %s", self.node.name, name, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.retry_max)
                continue
            self._dialed.add(conn)
            try:
                # the neighbour's certificate must name it (also checked at its end)
                self.node.guard.broker(name, conn.ssl_object, peer=conn.peer)
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


__all__ = ["NeighbourLinks"]
