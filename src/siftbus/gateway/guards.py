"""ASGI middleware enforcing the gateway's request limits before any route runs.

:class:`RequestLimits` refuses a body over ``max_body`` bytes with 413 (by its
``Content-Length`` at once, or while it streams in when it has none) and a request
running longer than ``request_timeout`` seconds with 504; streaming routes (WebSocket,
SSE) are not timed. Every refusal is one JSON error, as the routes give them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


def error_body(kind: str, message: str, **extra: Any) -> dict[str, Any]:
    """The gateway's one error shape: ``{"error": {"type", "message", ...}}``."""
    return {"error": {"type": kind, "message": message, **extra}}


async def send_error(send: Send, status: int, kind: str, message: str) -> None:
    body = json.dumps(error_body(kind, message)).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class RequestLimits:
    """Body size and request time limits (see the module docstring)."""

    def __init__(self, app: App, *, max_body: int, timeout: float,
                 untimed: tuple[str, ...] = (),
                 on_status: Callable[[int], None] | None = None) -> None:
        self.app = app
        self.max_body = max_body
        self.timeout = timeout
        self.untimed = untimed
        self.on_status = on_status

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    size = int(value)
                except ValueError:
                    size = -1
                if not 0 <= size <= self.max_body:
                    self._count(413)
                    await send_error(send, 413, "QuotaExceeded",
                                     f"request body over {self.max_body} bytes")
                    return
        received = 0
        over = False
        started = False

        async def limited_receive() -> Message:
            nonlocal received, over
            msg = await receive()
            if msg["type"] == "http.request":
                received += len(msg.get("body", b""))
                if received > self.max_body:
                    over = True  # the app sees a disconnect; the answer is ours
                    return {"type": "http.disconnect"}
            return msg

        async def tracking_send(msg: Message) -> None:
            nonlocal started
            if over:
                return
            if msg["type"] == "http.response.start":
                started = True
                self._count(int(msg["status"]))
            await send(msg)

        untimed = scope.get("path", "").startswith(self.untimed)
        try:  # a timeout scope, not wait_for: no extra task per request
            async with asyncio.timeout(None if untimed else self.timeout):
                await self.app(scope, limited_receive, tracking_send)
        except TimeoutError:
            if not started:
                self._count(504)
                await send_error(send, 504, "Timeout",
                                 f"request took longer than {self.timeout:g} s")
            return
        except Exception:
            if not over:
                raise
        if over and not started:
            self._count(413)
            await send_error(send, 413, "QuotaExceeded",
                             f"request body over {self.max_body} bytes")

    def _count(self, status: int) -> None:
        if self.on_status is not None:
            self.on_status(status)


__all__ = ["RequestLimits", "error_body", "send_error"]
