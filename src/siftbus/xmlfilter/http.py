"""HTTP adapters: the publish/subscribe endpoint (FastAPI) and the HTTP POST notifier (httpx).

Endpoints (the thesis ran publish on port 8001 and subscribe on 8002; here one app serves
both, run it twice if you want two ports)::

    POST   /subscriptions        body: subscriptionList or subscription XML -> 201 {"ids": [...]}
    GET    /subscriptions        -> {"ids": [...]}
    DELETE /subscriptions/{id}   -> {"id": ...}            (404 if unknown)
    POST   /publish              body: XML message -> {"events": n, "notifications": [...]}
    GET    /stats                -> matcher and delivery counters
    GET    /metrics              -> the same as Prometheus metrics (siftbus.xmlfilter.metrics)

An empty ``callbackMethod`` defaults to ``HTTP``; an empty ``callbackAddress`` to the
``X-Callback-Address`` request header, else ``http://<client host>/``. Bad input is answered
with 400 (409 for a duplicate, 404 for an unknown id, 413 for an oversized body) and a JSON
body ``{"error", "type", "line", "column"}``; the server keeps serving.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import httpx
from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.concurrency import run_in_threadpool

from siftbus.errors import (
    DuplicateSubscriptionError,
    SiftbusError,
    UnknownSubscriptionError,
)
from siftbus.xmlfilter.engine import XmlEventFilter
from siftbus.xmlfilter.metrics import xmlfilter_registry
from siftbus.xmlfilter.output import CountingSink, Dispatcher, Notification
from siftbus.xmlfilter.subscription import Receiver

MAX_BODY = 64 * 1024 * 1024


class DeliveryError(SiftbusError, ConnectionError):
    """A receiver refused a notification or could not be reached."""

    retriable = True


class HttpPostNotifier(CountingSink):
    """Delivers a notification by POSTing its XML to the receiver's callback address.

    Headers name the event index and matched subscriptions. Non-2xx answers and transport
    errors raise :class:`DeliveryError` (counted in :meth:`stats`).
    """

    def __init__(self, *, timeout: float = 5.0, client: httpx.AsyncClient | None = None) -> None:
        super().__init__()
        self._client = client or httpx.AsyncClient(timeout=timeout)
        self._own = client is None

    async def deliver(self, receiver: Receiver, notification: Notification) -> None:
        await self._counted(self._post, receiver.address, notification)

    async def _post(self, url: str, notification: Notification) -> None:
        if not url.startswith(("http://", "https://")):
            raise DeliveryError(f"not an http(s) callback address: {url!r}")
        try:
            r = await self._client.post(url, content=notification.xml, headers={
                "Content-Type": "application/xml",
                "X-Siftbus-Event": str(notification.event),
                "X-Siftbus-Subscriptions": " ".join(notification.subscriptions),
            })
        except httpx.HTTPError as exc:
            raise DeliveryError(f"POST {url} failed: {exc}") from None
        if r.status_code // 100 != 2:
            raise DeliveryError(f"POST {url} answered {r.status_code}")

    async def aclose(self) -> None:
        if self._own:
            await self._client.aclose()


def _error(exc: SiftbusError, status: int = 400) -> JSONResponse:
    return JSONResponse(status_code=status, content={
        "error": str(exc), "type": type(exc).__name__, "line": exc.line, "column": exc.column})


def create_app(
    filt: XmlEventFilter | None = None,
    dispatcher: Dispatcher | None = None,
    *,
    max_body: int = MAX_BODY,
) -> FastAPI:
    """The publish/subscribe app around a filter; notifications go to ``dispatcher``
    (default: HTTP/HTTPS/"HTTP POST" receivers through an :class:`HttpPostNotifier`)."""
    f = filt if filt is not None else XmlEventFilter()
    if dispatcher is None:
        notifier = HttpPostNotifier()
        dispatcher = Dispatcher({"HTTP": notifier, "HTTPS": notifier, "HTTP POST": notifier})
    disp = dispatcher

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        await disp.aclose()

    app = FastAPI(title="siftbus XML filter", lifespan=lifespan)
    app.state.filter = f
    app.state.dispatcher = disp

    @app.exception_handler(SiftbusError)
    async def _siftbus_error(_request: Request, exc: SiftbusError) -> JSONResponse:
        if isinstance(exc, DuplicateSubscriptionError):
            return _error(exc, 409)
        if isinstance(exc, UnknownSubscriptionError):
            return _error(exc, 404)
        return _error(exc)

    async def body_of(request: Request) -> bytes | JSONResponse:
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > max_body:
            return _error(SiftbusError(f"body larger than {max_body} bytes"), 413)
        body = await request.body()
        if len(body) > max_body:
            return _error(SiftbusError(f"body larger than {max_body} bytes"), 413)
        return body

    @app.post("/subscriptions", status_code=201, response_model=None)
    async def subscribe(request: Request) -> Any:
        body = await body_of(request)
        if isinstance(body, JSONResponse):
            return body
        host = request.client.host if request.client else "localhost"
        sender = request.headers.get("x-callback-address") or f"http://{host}/"
        ids = await run_in_threadpool(f.subscribe_xml, body, source="request",
                                      default_method="HTTP", sender=sender)
        return {"ids": ids}

    @app.get("/subscriptions")
    async def list_subscriptions() -> dict[str, list[str]]:
        return {"ids": sorted(s.id for s in f.subscriptions())}

    @app.delete("/subscriptions/{sub_id}")
    async def unsubscribe(sub_id: str) -> dict[str, str]:
        f.unsubscribe(sub_id)
        return {"id": sub_id}

    @app.post("/publish", response_model=None)
    async def publish(request: Request, deliver: bool = True) -> Any:
        body = await body_of(request)
        if isinstance(body, JSONResponse):
            return body
        results = await run_in_threadpool(lambda: list(f.iter_results(body, name="request")))
        notes = [r.notification for r in results if r.notification is not None]
        if deliver:
            for n in notes:
                await disp.dispatch(n)
        return {"events": len(results), "notifications": [n.to_json_dict() for n in notes]}

    registry = xmlfilter_registry(f, disp)

    @app.get("/metrics", include_in_schema=False)
    async def metrics() -> Response:
        """Prometheus metrics (siftbus.xmlfilter.metrics)."""
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/stats")
    async def stats() -> dict[str, Any]:
        return {
            "subscriptions": len(f),
            "matcher": dataclasses.asdict(f.matcher.stats()),
            "undeliverable": disp.undeliverable,
            "failures": len(disp.failures),
        }

    return app
