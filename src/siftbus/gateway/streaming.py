"""Notifications as streams: one WebSocket for many subscriptions, and Server-Sent Events.

The WebSocket protocol is :data:`WEBSOCKET_PROTOCOL` (also the OpenAPI document's
description, so ``/docs`` shows it). Both streams take the caller's token
(``Authorization: Bearer`` or ``?token=``; see :mod:`~siftbus.gateway.auth`); a WebSocket
without valid credentials on a secured network is closed with 1008 before it opens.

SSE ``GET /api/sse?profile=...&profile=...``: the profiles are subscribed for the
response's lifetime; events ``subscribed``, ``notification`` (one per notification, the
objects of a ``notifications`` array) and ``dropped``; ``error`` ends the stream when
the broker connection was lost (the browser's ``EventSource`` then reconnects).

When the gateway's broker connection is lost (the broker restarted), a WebSocket is
closed with 1012 (a session socket too) and an SSE stream ends with an ``error`` event:
their subscriptions went with the connection, and a client that connects again
subscribes again. A WebSocket upgrade while the broker does not answer gets HTTP 503.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Annotated, Any
from urllib.parse import unquote_to_bytes

from fastapi import APIRouter, Query, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import JSONResponse, StreamingResponse

from siftbus.errors import (
    ConnectionLostError,
    EnvironmentProblem,
    EventError,
    ProfileError,
    SiftbusError,
    WireError,
)
from siftbus.model import event_from_dict
from siftbus.model.textio import parse_json_line

from .auth import Bearer, request_token, websocket_token
from .codec import dumps, plain_events
from .guards import error_body
from .hub import Gateway
from .streams import Outbox, check_subscription_id, sse_frame

log = logging.getLogger("siftbus.gateway")

KEEPALIVE = 15.0
"""Seconds between SSE comments that keep idle proxies from closing the stream."""

SSE_RETRY_MS = 5000
"""The reconnection delay an SSE stream ended by a lost broker connection asks for."""

MIN_WATCH = 0.2
"""The shortest ``watch`` interval (seconds)."""

WEBSOCKET_PROTOCOL = """\
## WebSocket `/api/ws`

One socket, many subscriptions. The client sends JSON messages; each is answered on the
socket (a `ref` in the message is echoed in its answer):

- `{"op": "subscribe", "profile": "T(a > 2)", "id": "hot"}` ->
  `{"type": "subscribed", "id", "profile"}`
- `{"op": "unsubscribe", "id": "hot"}` -> `{"type": "unsubscribed", "id"}`
- `{"op": "publish", "events": [{...}, ...]}` (or `"event": {...}`) ->
  `{"type": "published", "count"}`
- `{"op": "watch", "interval": 1.0}` (0 stops) -> `{"type": "watching"}`, then
  `{"type": "network", ...}` every interval
- `{"op": "ping"}` -> `{"type": "pong"}`
- `{"op": "session", "id": "phone-7", "ack": 0, "clean": false}` ->
  `{"type": "session", "id", "state", "acked", "subscriptions", "lost", "overflow"}`
- `{"op": "ack", "n": 41}` -> `{"type": "acked", "n"}`
- anything wrong -> `{"type": "error", "error": {"type", "message", "field", ...}}`
  (the socket stays open; a binary message too: messages are JSON text)

**Notifications** come several per message, in publication order:
`{"type": "notifications", "notifications": [{"type": "notification", "subscription":
"hot", "src": "B1/c3", "seq": 7, "ts": 1.7e9, "event": {"type": "T", "a": 3}}, ...]}` --
whatever waited for the socket, at most `ws_batch` notifications and `ws_batch_bytes`
bytes per message. `{"type": "dropped", "count", "total"}` comes first when
notifications were dropped because the socket read too slowly (its queue holds
`queue_size`).

**Sessions** (nothing lost, nothing twice across disconnects): send `session` before any
`subscribe`. The socket then has a broker session of its own (`docs/mobility.md`): each
notification carries `n`, its session number (one per notified event, from 1, without
gaps; an event matching two subscriptions gives two notifications with the same `n`).
Acknowledge with `{"op": "ack", "n": N}` once everything up to `N` is processed. While
the socket is away the broker keeps the subscriptions and buffers the notifications (up
to its session limits; what it had to drop is reported as `lost`/`overflow`). Attach
again with the same `id` -- the subscriptions are back (`subscriptions`) and the
notifications after the last acknowledged number follow; with `"ack": N` the socket
says it processed up to `N` itself (rows up to `N` are not sent again). A session socket
drops nothing: unacknowledged notifications are bounded by the broker's in-flight
window (`max_inflight`), so a socket that stops acknowledging stops receiving. A second
socket attaching the same session with the same credentials takes it over (the first
is closed with code 4000); `"clean": true` starts the session afresh (no subscriptions,
nothing buffered).

**Broker restarts**: when the gateway's connection to its broker is lost, the socket is
closed with code 1012 ("service restart"): a plain socket's subscriptions went with the
connection, so connect again and subscribe again (a session socket attaches its session
again and resumes). While the broker does not answer, an upgrade gets HTTP 503.
"""
"""The WebSocket protocol (markdown: docs/gateway.md and the OpenAPI description)."""


class WebSocketSession:
    """One WebSocket connection: its outbox, writer and (optional) watch task."""

    def __init__(self, gw: Gateway, ws: WebSocket, token: str | None,
                 outbox: Outbox) -> None:
        self.gw = gw
        self.ws = ws
        self.token = token
        self.outbox = outbox
        self._send_lock = asyncio.Lock()
        self._watch: asyncio.Task[None] | None = None
        self._writer: asyncio.Task[None] | None = None
        self._ended: asyncio.Task[None] | None = None

    async def send(self, msg: dict[str, Any]) -> None:
        async with self._send_lock:  # replies, notifications and snapshots interleave
            await self.ws.send_text(dumps(msg))

    async def write_loop(self) -> None:
        """Empty the outbox at the client's pace (a stalled client stalls only this):
        whatever waits goes in one ``notifications`` message (at most ``ws_batch``
        notifications and ``ws_batch_bytes`` bytes, unless one alone is longer)."""
        ob = self.outbox
        limit, max_bytes = self.gw.limits.ws_batch, self.gw.limits.ws_batch_bytes
        while True:
            await ob.wait()
            if ob.taken_over:
                await self.ws.close(code=4000, reason="session taken over by another socket")
                return
            if ob.lost:
                await self.ws.close(code=1012, reason="broker connection lost: connect "
                                    "and subscribe again")
                return
            notice = ob.drop_notice()
            if notice is not None:
                await self.send(notice)
            array = ob.take_encoded(limit, max_bytes)
            if array is not None:
                text = b'{"type":"notifications","notifications":' + array + b"}"
                async with self._send_lock:
                    await self.ws.send_text(text.decode())

    def _start_writer(self) -> None:
        self._writer = asyncio.ensure_future(self.write_loop())

    async def attach(self, data: dict[str, Any]) -> dict[str, Any]:
        """The ``session`` op: this socket's subscriptions become those of a broker
        session (its first op of the kind; resumed after the last acknowledged row)."""
        if self.outbox.session is not None or self.outbox.subscriptions:
            raise WireError("session must come before any subscribe on this socket, "
                            "once", field="op")
        sid, ack, clean = data.get("id"), data.get("ack", 0), data.get("clean", False)
        if type(ack) is not int or ack < 0:
            raise WireError("session ack: the last session number processed (0 or more)",
                            field="ack")
        if not isinstance(clean, bool):
            raise WireError("session clean: true or false", field="clean")
        ob, reply = await self.gw.open_session(self.token, check_subscription_id(sid),
                                               ack=ack, clean=clean)
        old, self.outbox = self.outbox, ob
        if self._writer is not None:
            self._writer.cancel()
            with contextlib.suppress(BaseException):
                await self._writer
        await self.gw.close_outbox(old)
        self._start_writer()
        self._ended = asyncio.ensure_future(self._close_when_lost(ob))
        return reply

    async def _close_when_lost(self, ob: Outbox) -> None:
        """Close the socket when its session's broker connection is lost, so that the
        client attaches again and resumes (not when the gateway closed it itself)."""
        await ob.client.ended.wait()
        if ob.key in self.gw.outboxes:
            with contextlib.suppress(RuntimeError, WebSocketDisconnect):
                await self.ws.close(code=1012, reason="broker connection lost: attach "
                                    "the session again to resume")

    async def watch_loop(self, interval: float) -> None:
        while True:
            await self.send({"type": "network", **await self.gw.network(self.token)})
            await asyncio.sleep(interval)

    async def handle(self, text: str) -> dict[str, Any]:
        """The reply to one client message (errors raise)."""
        data = parse_json_line(text, source="message", kind=WireError)
        if not isinstance(data, dict):
            raise WireError("a message must be a JSON object", field="op")
        op = data.get("op")
        gw = self.gw
        if op == "subscribe":
            profile = data.get("profile")
            if not isinstance(profile, str):
                raise WireError("subscribe needs a profile string", field="profile")
            sid = data.get("id")
            got = await gw.subscribe(self.outbox, profile, sid if sid is not None else None)
            return {"type": "subscribed", **got}
        if op == "unsubscribe":
            sid = data.get("id")
            await gw.unsubscribe(self.outbox, str(sid))
            return {"type": "unsubscribed", "id": sid}
        if op == "publish":
            items = data.get("events", [data["event"]] if "event" in data else None)
            if not isinstance(items, list) or not all(isinstance(e, dict) for e in items):
                raise EventError("publish needs an event object or an events array",
                                 field="events")
            if len(items) > gw.limits.max_batch:
                raise EventError(f"at most {gw.limits.max_batch} events per message",
                                 field="events")
            evs = plain_events(items, gw.schema)  # checked per type and attribute
            for i, (e, ev) in enumerate(zip(items, evs, strict=True), 1):
                if ev is None:  # not plainly valid: the exact check, or its error
                    try:
                        evs[i - 1] = event_from_dict(e, gw.schema)
                    except SiftbusError as exc:
                        raise exc.located(source="events", line=i) from None
            return {"type": "published",
                    "count": await gw.publish(self.outbox.client,
                                              [e for e in evs if e is not None])}
        if op == "watch":
            interval = data.get("interval", 1.0)
            if not isinstance(interval, int | float) or isinstance(interval, bool) or \
                    not (interval == 0 or MIN_WATCH <= interval <= 3600):
                raise WireError(f"watch interval: 0 (stop) or {MIN_WATCH}..3600 seconds",
                                field="interval")
            if self._watch is not None:
                self._watch.cancel()
                self._watch = None
            if interval:
                self._watch = asyncio.ensure_future(self.watch_loop(float(interval)))
            return {"type": "watching", "interval": interval}
        if op == "ping":
            return {"type": "pong"}
        if op == "session":
            return await self.attach(data)
        if op == "ack":
            return {"type": "acked", "n": gw.ack(self.outbox, data.get("n"))}
        raise WireError(f"unknown op {op!r} (subscribe, unsubscribe, publish, watch, ping, "
                        "session, ack)", field="op")

    async def run(self) -> None:
        self._start_writer()
        try:
            while True:
                msg = await self.ws.receive()
                if msg["type"] == "websocket.disconnect":
                    raise WebSocketDisconnect(msg.get("code", 1000), msg.get("reason"))
                binary = msg.get("text") is None
                text: str = msg.get("text") or ""
                try:
                    if binary:
                        raise WireError("a binary message: send each JSON message as a "
                                        "text message", field="op")
                    reply = await self.handle(text)
                except SiftbusError as exc:
                    reply = {"type": "error", **error_body(
                        getattr(exc, "kind", "") or type(exc).__name__, exc.message,
                        line=exc.line, column=exc.column, field=exc.field)}
                ref = _ref(text)
                if ref is not None:
                    reply["ref"] = ref
                await self.send(reply)
        except (WebSocketDisconnect, RuntimeError):
            pass  # the client went (RuntimeError: a send after the close)
        finally:
            for task in (self._writer, self._watch, self._ended):
                if task is not None:
                    task.cancel()
                    with contextlib.suppress(BaseException):
                        await task
            await self.gw.close_outbox(self.outbox)


def _ref(text: str) -> Any:
    """The ``ref`` of a message, if it is a JSON object with one (echoed in replies)."""
    try:
        data = parse_json_line(text, kind=WireError)
    except SiftbusError:
        return None
    ref = data.get("ref") if isinstance(data, dict) else None
    return ref if isinstance(ref, str | int) and not isinstance(ref, bool) else None


def query_values(raw: bytes, name: str) -> list[str]:
    """The values of query parameter ``name`` in strict UTF-8 (the framework's reading
    puts U+FFFD for a byte that is not UTF-8: here it is refused, naming the parameter)."""
    out = []
    for pair in raw.split(b"&"):
        key, _, value = pair.partition(b"=")
        if unquote_to_bytes(key.replace(b"+", b" ")) != name.encode():
            continue
        data = unquote_to_bytes(value.replace(b"+", b" "))
        try:
            out.append(data.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise ProfileError(f"query parameter {name!r} is not UTF-8: byte "
                               f"0x{data[exc.start]:02x} at position {exc.start + 1}",
                               field=name) from None
    return out


def router(gw: Gateway) -> APIRouter:
    """The streaming routes of gateway ``gw``."""
    api = APIRouter(prefix="/api")

    @api.websocket("/ws")
    async def websocket(ws: WebSocket) -> None:
        token = websocket_token(gw, ws)
        try:
            client = await gw.session(token)
        except (ConnectionLostError, EnvironmentProblem) as exc:  # not the caller's fault
            log.info("WebSocket refused: %s", exc)
            await ws.send_denial_response(JSONResponse(error_body(
                type(exc).__name__, exc.message), status_code=503))
            return
        except SiftbusError as exc:  # refused before the handshake completes: HTTP 403
            log.info("WebSocket refused: %s", exc)
            await ws.close(code=1008, reason=exc.message[:120])
            return
        await ws.accept()
        gw.counters.connections["websocket"] += 1
        await WebSocketSession(gw, ws, token, gw.open_outbox("w", client)).run()

    @api.get("/sse", summary="Notifications as Server-Sent Events",
             response_class=StreamingResponse,
             responses={200: {"content": {"text/event-stream": {}}}})
    async def sse(request: Request, creds: Bearer,
                  profile: Annotated[list[str], Query(min_length=1)]) -> StreamingResponse:
        """Subscribe the ``profile`` parameters (repeat it) while the stream is open."""
        token = request_token(gw, request, creds)
        gw.authenticate(token)
        lines = query_values(request.scope.get("query_string", b""), "profile")
        ob = gw.open_outbox("e", await gw.session(token))
        try:
            subs = [await gw.subscribe(ob, p) for p in lines]
        except BaseException:
            await gw.close_outbox(ob)
            raise
        gw.counters.connections["sse"] += 1
        return StreamingResponse(_sse_stream(gw, ob, subs), media_type="text/event-stream",
                                 headers={"cache-control": "no-cache"})

    return api


async def _sse_stream(gw: Gateway, ob: Outbox, subs: list[dict[str, str]]
                      ) -> AsyncIterator[bytes]:
    try:
        yield sse_frame({"type": "subscribed", "subscriptions": subs})
        while True:
            waited = await ob.wait(KEEPALIVE)
            if ob.lost:  # EventSource reconnects after `retry` ms: give the broker time
                yield b"retry: %d\n" % SSE_RETRY_MS + sse_frame({"type": "error", **error_body(
                    "ConnectionLostError", f"the connection to broker {gw.broker} was "
                    "lost: the subscriptions ended; connect again")})
                return
            if not waited:
                yield b": keep-alive\n\n"
                continue
            notice = ob.drop_notice()
            if notice is not None:
                yield sse_frame(notice)
            yield b"".join(sse_frame(msg) for msg in ob.take(gw.limits.ws_batch))
    finally:
        # cleanup in its own task: this generator may be finalised while cancelled
        gw.spawn(gw.close_outbox(ob))


__all__ = ["KEEPALIVE", "SSE_RETRY_MS", "WebSocketSession", "query_values", "router"]
