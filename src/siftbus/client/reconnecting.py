"""Reconnecting after a lost broker connection (a mixin of
:class:`~siftbus.client.aio.Client`): back to a broker of the client's servers with
backoff, the subscriptions and advertisements restored, what was published meanwhile kept
within a bound and sent after; requests made meanwhile wait for it (the policy:
:class:`~siftbus.client.reconnect.Reconnect`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Mapping
from typing import Any, Protocol

from siftbus.errors import (
    BrokerUnavailable,
    ConnectionLostError,
    RemoteError,
    SecurityError,
    SiftbusError,
    TimedOut,
)
from siftbus.model import Profile
from siftbus.wire.frames import Message, MsgType
from siftbus.wire.profiles import encode_profile
from siftbus.wire.transport import FrameConnection

from .reconnect import ConnectionEvents, Reconnect, Server, reconnect_delays
from .session import SessionState

MAX_SUB_BATCH = 5000
"""Profiles per SUB frame (the broker's ``max_profiles`` limit is 10,000 by default)."""

_REFUSALS = frozenset({"AuthenticationError", "AccessDenied", "SecurityError",
                       "QuotaExceeded", "SessionMoved"})
"""Remote errors that end reconnecting: the same credentials get the same answer, and a
session another process took over must not be taken back (the two would take it from
each other in turns)."""

log = logging.getLogger("siftbus.client")


class _Subscribed(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def profile(self) -> Profile: ...


class _Client(Protocol):
    """What the mixin needs of its client."""

    broker: str
    servers: list[Server]
    reconnect: Reconnect
    events: ConnectionEvents
    connected: asyncio.Event
    ended: asyncio.Event
    session: SessionState | None
    restored: list[str]
    adverts: list[Profile]
    _conn: FrameConnection | None
    _closed: bool
    _lost: BaseException | None
    _offline: list[Message]
    _offline_events: int
    _requested_name: str | None
    _timeout: float
    _server_hostname: str | None
    _reconnector: asyncio.Task[None] | None
    _moving: bool
    errors: list[RemoteError]

    @property
    def subscriptions(self) -> Mapping[str, _Subscribed]: ...

    async def _handshake(self, host: str, port: int, name: str | None, timeout: float,
                         previous: str | None, server_hostname: str | None) -> None: ...

    async def _request(self, mtype: MsgType, body: dict[str, Any],
                       timeout: float | None = 60.0) -> dict[str, Any]: ...

    async def _restore(self) -> None: ...

    def _write(self, msg: Message) -> None: ...

    def _spawn(self, coro: Awaitable[Any]) -> None: ...

    def _fail_pending(self, exc: BaseException) -> None: ...

    async def _reconnect_loop(self, lost: ConnectionLostError) -> None: ...


class Reconnecting:
    """Reconnection (a mixin of ``Client``)."""

    _lost: BaseException | None
    _offline: list[Message]
    _offline_events: int
    _reconnector: asyncio.Task[None] | None

    def _connection_lost(self: _Client, lost: ConnectionLostError) -> None:
        """The reader's connection ended: reconnect (unless closed, moving, turned off
        or shut out by the broker), or end the subscriptions with ``lost``."""
        if self._reconnector is not None and not self._reconnector.done():
            return  # a connection of the reconnection itself: it tries the next
        refused = next((e for e in self.errors[-1:] if e.kind in _REFUSALS), None)
        if self.reconnect.enabled and not self._closed and not self._moving \
                and refused is None:  # a broker that shut us out would again
            self.connected.clear()
            self._fail_pending(lost)  # in flight: done or not, the caller decides
            self.events.fire(self.events.on_disconnect, self, self._spawn)
            self._reconnector = asyncio.ensure_future(self._reconnect_loop(lost))
            return
        if self._moving:
            # move() replaces this connection: its end is not the client's (ending here
            # and clearing after woke whoever waits on ``ended``, e.g. SyncClient's inbox)
            return
        if self._lost is None:
            self._lost = lost  # the first reason stays (e.g. SessionMoved)
        self.connected.clear()
        self.ended.set()
        self._fail_pending(self._lost)

    @property
    def end_error(self: _Client) -> ConnectionLostError:
        """Why the subscriptions ended (closed by the user, or lost for good)."""
        if isinstance(self._lost, ConnectionLostError):
            return self._lost
        return ConnectionLostError("the client is closed" if self._closed else
                                   f"connection to broker {self.broker} ended")

    async def _reconnect_loop(self: _Client, lost: ConnectionLostError) -> None:
        """Back to a broker of :attr:`servers` with backoff; then the subscriptions,
        advertisements and what was published meanwhile; give up after the policy's
        attempts (the subscriptions then end with :class:`BrokerUnavailable`)."""
        problems: list[str] = []
        for attempt, delay in enumerate(reconnect_delays(self.reconnect), 1):
            await asyncio.sleep(delay)
            if self._closed:
                return
            host, port = self.servers[(attempt - 1) % len(self.servers)]
            try:
                await self._handshake(host, port, self._requested_name, self._timeout,
                                      None, self._server_hostname)
                await self._restore()
            except (SiftbusError, ConnectionError, OSError, TimeoutError) as exc:
                self.connected.clear()
                if self._conn is not None:
                    self._conn.close()
                if isinstance(exc, SecurityError) or (
                        isinstance(exc, RemoteError) and exc.kind in _REFUSALS):
                    lost = BrokerUnavailable(f"{lost}; reconnecting refused: {exc}")
                    break  # the same credentials get the same answer next time
                problems = [*problems, f"{host}:{port}: {exc}"][-3:]
                continue
            self.servers.sort(key=lambda s: s != (host, port))
            self.events.reconnects += 1
            log.info("reconnected to broker %s at %s:%d (attempt %d)", self.broker, host,
                     port, attempt)
            self.events.fire(self.events.on_reconnect, self, self._spawn)
            return
        else:
            lost = BrokerUnavailable(f"{lost}; gave up reconnecting after "
                                     f"{self.reconnect.attempts} attempt(s): "
                                     + "; ".join(problems))
        self._lost = lost
        self._offline.clear()
        self._offline_events = 0
        self.ended.set()
        self.events.fire(self.events.on_disconnect, self, self._spawn)

    async def _restore(self: _Client) -> None:
        """After a reconnection: subscribe again what the broker did not keep (a
        session's HELLO and a durable store keep theirs), advertise again, then send
        what was published meanwhile."""
        if self.session is None:
            kept = set(self.restored)
            again = [s.profile for s in self.subscriptions.values() if s.id not in kept]
            for i in range(0, len(again), MAX_SUB_BATCH):
                part = again[i:i + MAX_SUB_BATCH]
                await self._request(MsgType.SUB,
                                    {"profiles": [encode_profile(p) for p in part]})
            if self.adverts:
                await self._request(MsgType.ADV,
                                    {"adverts": [encode_profile(p) for p in self.adverts]})
        offline, self._offline, self._offline_events = self._offline, [], 0
        for msg in offline:
            self._write(msg)

    def _keep_offline(self: _Client, msg: Message) -> None:
        """A frame written while reconnecting: publications are kept (up to the
        policy's ``buffer`` events) and sent after it; acknowledgements are dropped (the
        session's HELLO carries the last one)."""
        if msg.type is not MsgType.PUB:
            return
        n = sum(int(b.get("n", 0)) if isinstance(b, dict) else 0
                for b in msg.body.get("blocks", ()))
        if self._offline_events + n > self.reconnect.buffer:
            raise ConnectionLostError(
                f"broker {self.broker} is unreachable and the publish buffer is full "
                f"({self._offline_events} event(s) kept while reconnecting, limit "
                f"{self.reconnect.buffer})")
        self._offline.append(msg)
        self._offline_events += n

    async def _until_connected(self: _Client, timeout: float | None) -> None:
        """Wait out a reconnection (a request made meanwhile is sent after it)."""
        up = asyncio.ensure_future(self.connected.wait())
        end = asyncio.ensure_future(self.ended.wait())
        try:
            await asyncio.wait({up, end}, timeout=timeout,
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            up.cancel()
            end.cancel()
        if self._lost is not None:
            raise self._lost
        if not self.connected.is_set():
            raise TimedOut(f"broker {self.broker} still unreachable after {timeout} s "
                           "(reconnecting)")


__all__ = ["Reconnecting"]
