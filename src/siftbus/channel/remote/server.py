"""A small standalone asyncio server for the channel service (and the broker hook).

It speaks the siftbus wire protocol (:mod:`siftbus.wire.frames`): the client's
first frame is HELLO ``{"role": "client"}``, answered with ACK; then each CALL
``{"service": "channel", "method", "args", "corr"}`` is answered with REPLY ``{"corr",
"result"}`` or ERROR ``{"corr", "kind", "message", ...}``. A bad request gets an ERROR
and the connection goes on; a malformed frame gets an ERROR and only that connection is
closed. :func:`register_with_broker` hosts the same service inside a siftbus broker.

Run it with ``python -m siftbus.channel.remote --store channels.db --port 0`` (or
``siftbus channel serve``); ``--port-file`` receives the bound port.

Security (``guard``, ``tls``; ``siftbus channel serve --config net.toml --cert --key``):
HELLO is authenticated by the guard (a token in HELLO or the client certificate; a
refused client gets one ERROR and learns nothing), the listener speaks TLS with ``tls``,
every call is checked by :class:`~siftbus.channel.remote.access.ChannelAccess`, and a
token's expiry closes the connection. Without TLS and authentication the server listens
on loopback only unless ``insecure`` (:func:`~siftbus.security.guard.check_bind`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import itertools
import logging
import sys
import threading
import time
from pathlib import Path
from typing import Any

from siftbus.channel.factory import EventChannelFactory
from siftbus.channel.metrics import channel_registry
from siftbus.channel.remote.access import ChannelAccess
from siftbus.channel.remote.protocol import SERVICE_NAME
from siftbus.channel.remote.service import ChannelService
from siftbus.errors import AuthenticationError, EnvironmentProblem, SiftbusError, WireError
from siftbus.security.guard import Guard, check_bind
from siftbus.security.principal import ANONYMOUS, Principal
from siftbus.security.tls import ContextSet
from siftbus.wire.frames import Message, MsgType, error_body
from siftbus.wire.httpserver import serve_metrics
from siftbus.wire.limits import DEFAULT_LIMITS, Limits
from siftbus.wire.listener import Listener, cancel_all
from siftbus.wire.signals import stop_on_signals
from siftbus.wire.transport import FrameConnection

log = logging.getLogger("siftbus.channel")

WRITE_HIGH_WATER = 4 * 1024 * 1024
"""Bytes queued toward a caller beyond which its next request waits for it to read."""


class ChannelServer:
    """Serve a :class:`ChannelService` on TCP (the shared frame transport, under
    ``limits``; ``max_frame`` is a shorthand for ``limits.max_frame``)."""

    def __init__(self, service: ChannelService, host: str = "127.0.0.1", port: int = 0, *,
                 max_frame: int | None = None, limits: Limits | None = None,
                 guard: Guard | None = None, tls: ContextSet | None = None,
                 insecure: bool = False, store: str | None = None) -> None:
        limits = limits or DEFAULT_LIMITS
        if max_frame is not None:
            limits = limits.replace(max_frame=max_frame)
        self.service = service
        self.host = host
        self.limits = limits
        self.max_frame = limits.max_frame
        self.guard = guard or Guard()
        self.tls = tls
        self.insecure = insecure
        self.listener = Listener(self._serve, host, port, limits, name="channel server",
                                 ssl=tls.server if tls is not None else None)
        self._principals: dict[str, Principal] = {}
        if not self.guard.open:
            service.secure(ChannelAccess(self.guard, store), self._principal)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._callers: dict[str, FrameConnection] = {}
        self._caller_ids = itertools.count(1)
        self.request_errors = 0
        """Requests answered with ERROR (the connection stays)."""
        service.set_transport(self._push, self._callers.__contains__)

    @property
    def errors_sent(self) -> int:
        """ERRORs sent: to bad requests and to refused frames and connections."""
        return self.request_errors + sum(self.listener.counters.refused.values())

    def _push(self, caller: str, payload: Any) -> bool:
        """An unsolicited frame to one connection (push delivery); False if it is gone."""
        conn = self._callers.get(caller)
        if conn is None or conn.closing:
            return False
        return conn.send(Message(MsgType.REPLY, {"service": SERVICE_NAME, "event": payload}))

    def _principal(self, caller: str) -> Principal:
        return self._principals.get(caller, ANONYMOUS)

    async def start(self) -> None:
        check_bind(self.host, tls=self.tls is not None and self.tls.server is not None,
                   authenticated=self.guard.policy.authenticates, insecure=self.insecure,
                   what="channel server")
        try:
            await self.listener.start()
        except (OverflowError, ValueError) as exc:  # a port beyond 65535, say
            raise EnvironmentProblem(f"channel server cannot listen on {self.host}: "
                                     f"{exc}") from None
        if self.tls is not None:  # replaced certificate files are loaded without a restart
            task = asyncio.ensure_future(self.tls.watch("channel server"))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    @property
    def port(self) -> int:
        return self.listener.port

    async def close(self) -> None:
        await self.listener.close()
        await cancel_all(self._tasks)

    async def __aenter__(self) -> ChannelServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _serve(self, conn: FrameConnection) -> None:
        caller = f"conn{next(self._caller_ids)}"
        msg = await conn.read_hello()  # a bad first frame: the listener answers ERROR
        # authenticate before anything is revealed (a refusal: one ERROR, then closed)
        principal = self.guard.client(msg.body.get("token"), conn.ssl_object,
                                      peer=conn.peer)
        self._principals[caller] = principal
        if principal.expires is not None and not self.guard.open:
            asyncio.get_running_loop().call_later(
                max(0.0, principal.expires - time.time()), self._expired, conn, principal)
        conn.send(Message(MsgType.ACK, {"corr": msg.body.get("corr"),
                                        "name": msg.body.get("name") or "",
                                        "broker": "channel-server"}))
        self._callers[caller] = conn
        try:
            while True:
                try:
                    msg, _ = await conn.read()
                except SiftbusError as exc:  # malformed frame: answer, close this one
                    conn.refuse(exc)
                    return
                self._handle(msg, conn, caller)
                if conn.buffered > WRITE_HIGH_WATER:
                    await conn.drain()
        except ConnectionError:
            pass
        finally:
            self._principals.pop(caller, None)
            if self._callers.pop(caller, None) is not None:
                self.service.connection_lost(caller)
            conn.close()

    def _expired(self, conn: FrameConnection, principal: Principal) -> None:
        if conn.closing:
            return
        exc = AuthenticationError("the token has expired: connect again with a new one")
        self.guard.refuse(exc, principal.name, "connect")
        conn.refuse(exc)

    def _handle(self, msg: Message, conn: FrameConnection, caller: str) -> None:
        body = msg.body if isinstance(msg.body, dict) else {}
        corr = body.get("corr")
        try:
            if msg.type is MsgType.PING:
                conn.send(Message(MsgType.ACK, {"corr": corr}))
                return
            if msg.type is not MsgType.CALL:
                raise WireError(f"the channel server takes CALL frames, not {msg.type.name}")
            if body.get("service") != SERVICE_NAME:
                raise WireError(f"no service {body.get('service')!r} here (have "
                                f"{SERVICE_NAME!r})", field="service")
            method = body.get("method")
            if not isinstance(method, str):
                raise WireError("CALL lacks a method", field="method")
            result = self.service(method, body.get("args") or {}, caller)
        except SiftbusError as exc:
            self._error(conn, exc, corr)
            return
        except Exception as exc:  # a service bug must not kill the server
            log.exception("channel service call failed")
            self._error(conn, exc, corr)
            return
        if inspect.isawaitable(result):
            task = asyncio.ensure_future(self._finish(result, conn, corr))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            return
        conn.send(Message(MsgType.REPLY, {"corr": corr, "result": result}))

    async def _finish(self, result: Any, conn: FrameConnection, corr: Any) -> None:
        try:
            value = await result
        except Exception as exc:
            self._error(conn, exc, corr)
            return
        with contextlib.suppress(Exception):
            conn.send(Message(MsgType.REPLY, {"corr": corr, "result": value}))

    def _error(self, conn: FrameConnection, exc: BaseException, corr: Any) -> None:
        self.request_errors += 1
        conn.send(Message(MsgType.ERROR, error_body(exc, corr)))


def register_with_broker(broker_server: Any, factory: EventChannelFactory) -> ChannelService:
    """Host the channel service inside a siftbus broker (``BrokerServer`` or
    ``BrokerNode``): clients reach it with ``call("channel", method, **args)``.

    On a secured network the service checks its callers itself (the broker's principal
    of each client, :class:`~siftbus.channel.remote.access.ChannelAccess`)."""
    service = ChannelService(factory)
    node = getattr(broker_server, "node", broker_server)
    guard = getattr(node, "guard", None)
    secured = isinstance(guard, Guard) and not guard.open
    if isinstance(guard, Guard) and secured:
        store = factory.store.path if factory.store is not None else None
        service.secure(ChannelAccess(guard, store), node.principal_of)
    push = getattr(broker_server, "push", None)
    if callable(push):
        # The broker sends unsolicited service frames (REPLY without corr) with
        # BrokerServer.push and reports closed client connections to the service.
        service.set_transport(lambda caller, payload: bool(push(caller, SERVICE_NAME,
                                                                    payload)))
        broker_server.register_service(SERVICE_NAME, service,
                                       on_client_down=service.connection_lost,
                                       authorizes=secured)
    else:
        broker_server.register_service(SERVICE_NAME, service, authorizes=secured)
    return service


async def serve(store: str | None, host: str, port: int, port_file: str | None,
                engine: str | None = None, *, guard: Guard | None = None,
                tls: ContextSet | None = None, insecure: bool = False,
                metrics_port: int | None = None) -> None:
    """Run a channel server until cancelled (the entry point of ``siftbus channel serve``);
    with ``metrics_port``, its Prometheus metrics at ``http://host:metrics_port/metrics``."""
    factory = EventChannelFactory(store, engine=engine)
    server = ChannelServer(ChannelService(factory), host, port, guard=guard, tls=tls,
                           insecure=insecure, store=store)
    metrics = None
    try:
        await server.start()
        if metrics_port is not None:
            metrics = await serve_metrics(channel_registry(factory, lambda: server.errors_sent),
                                          host, metrics_port, name="channel metrics listener")
            print(f"siftbus channel metrics at {metrics.url}/metrics", file=sys.stderr,
                  flush=True)
        if port_file:
            tmp = Path(port_file + ".tmp")
            try:
                tmp.write_text(str(server.port))
                tmp.replace(port_file)
            except OSError as exc:
                raise EnvironmentProblem(f"cannot write the port file: {exc.strerror}",
                                         source=port_file) from None
        stop = asyncio.Event()
        if threading.current_thread() is threading.main_thread():
            # SIGTERM/SIGINT stop it gracefully (the store is closed), whatever it is doing
            stop_on_signals(asyncio.get_running_loop(), stop.set, name="channel server")
        mode = ("open" if server.guard.open else
                f"secured ({'TLS, ' if tls is not None else ''}"
                f"{'authenticated' if server.guard.policy.authenticates else 'anonymous'})")
        print(f"siftbus channel service on {host}:{server.port} ({mode})", file=sys.stderr,
              flush=True)
        await stop.wait()
    finally:
        if metrics is not None:
            await metrics.close()
        await server.close()
        server.service.close()
        factory.close()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m siftbus.channel.remote")
    ap.add_argument("--store", default=None, help="SQLite file for persistent channels")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file", default=None)
    ap.add_argument("--engine", default=None)
    ap.add_argument("--no-uvloop", action="store_true", help="use the stock asyncio loop")
    ap.add_argument("--insecure", action="store_true",
                    help="listen on a non-loopback address without TLS and authentication")
    a = ap.parse_args(argv)
    run = asyncio.run
    if not a.no_uvloop:
        with contextlib.suppress(ImportError):
            import uvloop

            run = uvloop.run
    try:
        with contextlib.suppress(KeyboardInterrupt):
            run(serve(a.store, a.host, a.port, a.port_file, a.engine, insecure=a.insecure))
    except SiftbusError as exc:
        print(f"siftbus: error: {exc}", file=sys.stderr)
        sys.exit(2)


__all__ = ["ChannelServer", "main", "register_with_broker", "serve"]
