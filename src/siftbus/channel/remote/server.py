"""A small standalone asyncio server for the channel service (and the broker hook).

It speaks the siftbus wire protocol (:mod:`siftbus.wire.frames`): the client's
first frame is HELLO ``{"role": "client"}``, answered with ACK; then each CALL
``{"service": "channel", "method", "args", "corr"}`` is answered with REPLY ``{"corr",
"result"}`` or ERROR ``{"corr", "kind", "message", ...}``. A bad request gets an ERROR
and the connection goes on; a malformed frame gets an ERROR and only that connection is
closed. :func:`register_with_broker` hosts the same service inside a siftbus broker.

Run it with ``python -m siftbus.channel.remote --store channels.db --port 0`` (or
``siftbus channel serve``); ``--port-file`` receives the bound port.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import itertools
import logging
import sys
from pathlib import Path
from typing import Any

from siftbus.channel.factory import EventChannelFactory
from siftbus.channel.remote.protocol import SERVICE_NAME
from siftbus.channel.remote.service import ChannelService
from siftbus.errors import EnvironmentProblem, SiftbusError, WireError
from siftbus.wire.frames import MAX_FRAME, Message, MsgType, encode, error_body
from siftbus.wire.transport import read_frame

log = logging.getLogger("siftbus.channel")


class ChannelServer:
    """Serve a :class:`ChannelService` on TCP."""

    def __init__(self, service: ChannelService, host: str = "127.0.0.1", port: int = 0, *,
                 max_frame: int = MAX_FRAME) -> None:
        self.service = service
        self.host = host
        self._port = port
        self.max_frame = max_frame
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._callers: dict[str, asyncio.StreamWriter] = {}
        self._caller_ids = itertools.count(1)
        self.errors_sent = 0
        service.set_transport(self._push, self._callers.__contains__)

    def _push(self, caller: str, payload: Any) -> bool:
        """An unsolicited frame to one connection (push delivery); False if it is gone."""
        writer = self._callers.get(caller)
        if writer is None or writer.is_closing():
            return False
        writer.write(encode(Message(MsgType.REPLY, {"service": SERVICE_NAME,
                                                    "event": payload})))
        return True

    async def start(self) -> None:
        try:
            self._server = await asyncio.start_server(self._accept, self.host, self._port,
                                                      limit=self.max_frame + 8)
        except (OSError, OverflowError, ValueError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise EnvironmentProblem(f"channel server cannot listen on {self.host}:"
                                     f"{self._port}: {why}") from None

    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for w in list(self._writers):
            with contextlib.suppress(Exception):
                w.close()
        for t in list(self._tasks):
            t.cancel()
        for t in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)

    async def __aenter__(self) -> ChannelServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
                      ) -> None:
        self._writers.add(writer)
        caller = f"conn{next(self._caller_ids)}"
        try:
            try:
                msg, _ = await asyncio.wait_for(read_frame(reader, self.max_frame), 30)
                if msg.type is not MsgType.HELLO:
                    raise WireError(f"the first frame must be HELLO, got {msg.type.name}")
            except SiftbusError as exc:
                self.errors_sent += 1
                writer.write(encode(Message(MsgType.ERROR, error_body(exc))))
                return
            writer.write(encode(Message(MsgType.ACK, {"corr": msg.body.get("corr"),
                                                      "name": msg.body.get("name") or "",
                                                      "broker": "channel-server"})))
            self._callers[caller] = writer
            while True:
                try:
                    msg, _ = await read_frame(reader, self.max_frame)
                except SiftbusError as exc:  # malformed frame: answer, close this one
                    self.errors_sent += 1
                    writer.write(encode(Message(MsgType.ERROR, error_body(exc))))
                    return
                self._handle(msg, writer, caller)
                if writer.transport.get_write_buffer_size() > 4 * 1024 * 1024:
                    await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError):
            pass
        finally:
            self._writers.discard(writer)
            if self._callers.pop(caller, None) is not None:
                self.service.connection_lost(caller)
            with contextlib.suppress(Exception):
                writer.close()

    def _handle(self, msg: Message, writer: asyncio.StreamWriter, caller: str) -> None:
        body = msg.body if isinstance(msg.body, dict) else {}
        corr = body.get("corr")
        try:
            if msg.type is MsgType.PING:
                writer.write(encode(Message(MsgType.ACK, {"corr": corr})))
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
            self._error(writer, exc, corr)
            return
        except Exception as exc:  # a service bug must not kill the server
            log.exception("channel service call failed")
            self._error(writer, exc, corr)
            return
        if inspect.isawaitable(result):
            task = asyncio.ensure_future(self._finish(result, writer, corr))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            return
        writer.write(encode(Message(MsgType.REPLY, {"corr": corr, "result": result})))

    async def _finish(self, result: Any, writer: asyncio.StreamWriter, corr: Any) -> None:
        try:
            value = await result
        except Exception as exc:
            self._error(writer, exc, corr)
            return
        with contextlib.suppress(Exception):
            writer.write(encode(Message(MsgType.REPLY, {"corr": corr, "result": value})))

    def _error(self, writer: asyncio.StreamWriter, exc: BaseException, corr: Any) -> None:
        self.errors_sent += 1
        with contextlib.suppress(Exception):
            writer.write(encode(Message(MsgType.ERROR, error_body(exc, corr))))


def register_with_broker(broker_server: Any, factory: EventChannelFactory) -> ChannelService:
    """Host the channel service inside a siftbus broker (``BrokerServer`` or
    ``BrokerNode``): clients reach it with ``call("channel", method, **args)``."""
    service = ChannelService(factory)
    push = getattr(broker_server, "push", None)
    if callable(push):
        # The broker sends unsolicited service frames (REPLY without corr) with
        # BrokerServer.push and reports closed client connections to the service.
        service.set_transport(lambda caller, payload: bool(push(caller, SERVICE_NAME,
                                                                    payload)))
        broker_server.register_service(SERVICE_NAME, service,
                                       on_client_down=service.connection_lost)
    else:
        broker_server.register_service(SERVICE_NAME, service)
    return service


async def serve(store: str | None, host: str, port: int, port_file: str | None,
                engine: str | None = None) -> None:
    """Run a channel server until cancelled (the entry point of ``siftbus channel serve``)."""
    factory = EventChannelFactory(store, engine=engine)
    server = ChannelServer(ChannelService(factory), host, port)
    try:
        await server.start()
        if port_file:
            tmp = Path(port_file + ".tmp")
            try:
                tmp.write_text(str(server.port))
                tmp.replace(port_file)
            except OSError as exc:
                raise EnvironmentProblem(f"cannot write the port file: {exc.strerror}",
                                         source=port_file) from None
        print(f"siftbus channel service on {host}:{server.port}", file=sys.stderr, flush=True)
        await asyncio.Event().wait()
    finally:
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
    a = ap.parse_args(argv)
    run = asyncio.run
    if not a.no_uvloop:
        with contextlib.suppress(ImportError):
            import uvloop

            run = uvloop.run
    try:
        with contextlib.suppress(KeyboardInterrupt):
            run(serve(a.store, a.host, a.port, a.port_file, a.engine))
    except SiftbusError as exc:
        print(f"siftbus: error: {exc}", file=sys.stderr)
        sys.exit(2)



__all__ = ["ChannelServer", "main", "register_with_broker", "serve"]
