"""HTTP adapters: the publish/subscribe endpoint (FastAPI) and the HTTP POST notifier (httpx).

Endpoints (the thesis ran publish on port 8001 and subscribe on 8002; here one app serves
both, run it twice if you want two ports)::

    POST   /subscriptions        body: subscriptionList or subscription XML -> 201 {"ids": [...]}
    GET    /subscriptions        -> {"ids": [...active], "paused": [...]}
    DELETE /subscriptions/{id}   -> {"id": ...}            (404 if unknown; Unsubscribe)
    GET    /subscriptions/{id}   -> status {"id", "state", "receiver", "timeoutInSeconds",
                                    "expiresIn"}            (GetStatus)
    POST   /subscriptions/{id}/renew[?timeout=N] -> status  (Renew: the time starts again)
    POST   /subscriptions/{id}/pause             -> status  (PauseSubscription)
    POST   /subscriptions/{id}/resume            -> status  (ResumeSubscription)
    GET    /types                -> {name: [targets and #subtypes]}
    PUT    /types/{name}         body {"targets": [...], "namespaces": {...}}
    DELETE /types/{name}
    POST   /publish              body: XML message -> {"events": n, "notifications": [...]}
    GET    /stats                -> matcher and delivery counters
    GET    /metrics              -> the same as Prometheus metrics (siftbus.xmlfilter.metrics)

An empty ``callbackMethod`` defaults to ``HTTP``; an empty ``callbackAddress`` to the
``X-Callback-Address`` request header, else ``http://<client host>/``. Bad input is answered
with 400 (409 for a duplicate, 404 for an unknown id, 413 for an oversized body, 503 for a
request stopped by ``max_request_seconds`` or by shutdown) and a JSON body
``{"error", "type", "line", "column"}``; the server keeps serving. Limits:
:class:`~siftbus.xmlfilter.limits.XmlLimits`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import threading
import time
from collections.abc import AsyncIterator, Mapping
from types import FrameType
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.concurrency import run_in_threadpool

from siftbus.errors import (
    DuplicateSubscriptionError,
    SiftbusError,
    SubscriptionError,
    UnknownSubscriptionError,
    XmlFilterError,
)
from siftbus.xmlfilter.engine import EventResult, XmlEventFilter
from siftbus.xmlfilter.limits import DEFAULT_LIMITS, XmlLimits, excerpt, quoted
from siftbus.xmlfilter.manager import SubscriptionStatus
from siftbus.xmlfilter.metrics import xmlfilter_registry
from siftbus.xmlfilter.output import CountingSink, Dispatcher, Notification
from siftbus.xmlfilter.subscription import Receiver


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
            raise DeliveryError(f"not an http(s) callback address: {quoted(url)}")
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


class BodyTooLargeError(XmlFilterError):
    """A request body passed ``max_body`` bytes (answered with 413)."""


class RequestAbortedError(SiftbusError, TimeoutError):
    """A request ran past ``max_request_seconds`` or the server is shutting down (503)."""

    retriable = True


def _status(exc: SiftbusError) -> int:
    if isinstance(exc, DuplicateSubscriptionError):
        return 409
    if isinstance(exc, UnknownSubscriptionError):
        return 404
    if isinstance(exc, BodyTooLargeError):
        return 413
    if isinstance(exc, RequestAbortedError):
        return 503
    return 400


def error_response(exc: SiftbusError) -> JSONResponse:
    """The JSON answer to a refused request: ``{"error", "type", "line", "column"}``."""
    return JSONResponse(status_code=_status(exc), content={
        "error": str(exc), "type": type(exc).__name__, "line": exc.line, "column": exc.column})


class Guard:
    """Bounds the work of one request: :meth:`check` raises :class:`RequestAbortedError`
    once the request has run ``seconds`` or the server has begun to shut down. Work done
    in a thread calls it between units (events, subscriptions), so no request can keep
    the server from stopping."""

    __slots__ = ("_deadline", "_seconds", "_stopping")

    def __init__(self, stopping: threading.Event, seconds: float) -> None:
        self._stopping = stopping
        self._seconds = seconds
        self._deadline = time.monotonic() + seconds

    def check(self) -> None:
        if self._stopping.is_set():
            raise RequestAbortedError("the server is shutting down")
        if time.monotonic() > self._deadline:
            raise RequestAbortedError(
                f"the request took longer than {self._seconds:g} s (max_request_seconds)")


async def read_body(request: Request, max_body: int) -> bytes:
    """The request body, read in the server's chunks and refused with
    :class:`BodyTooLargeError` as soon as it passes ``max_body`` bytes (a declared
    Content-Length above the limit is refused before anything is read)."""
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > max_body:
        raise BodyTooLargeError(f"body of {int(length):,} bytes is larger than {max_body:,} "
                                "bytes (max_body)")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_body:
            raise BodyTooLargeError(f"body larger than {max_body:,} bytes (max_body)")
        chunks.append(chunk)
    return b"".join(chunks)


def _status_json(st: SubscriptionStatus) -> dict[str, Any]:
    return {"id": st.id, "state": st.state,
            "receiver": {"method": st.receiver.method, "address": st.receiver.address},
            "timeoutInSeconds": st.timeout_seconds,
            "expiresIn": None if st.expires_in is None else round(st.expires_in, 3)}


def _json_object(body: bytes) -> dict[str, Any]:
    """A JSON object from a request body, or one clear error (also for bad UTF-8 and for
    nesting deep enough to exhaust the recursion of Python's JSON reader)."""
    try:
        value = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise SubscriptionError(f"not a JSON object: {excerpt(str(exc))}") from None
    if not isinstance(value, dict):
        raise SubscriptionError("not a JSON object")
    return value


def create_app(
    filt: XmlEventFilter | None = None,
    dispatcher: Dispatcher | None = None,
    *,
    max_body: int | None = None,
    limits: XmlLimits = DEFAULT_LIMITS,
) -> FastAPI:
    """The publish/subscribe app around a filter; notifications go to ``dispatcher``
    (default: HTTP/HTTPS/"HTTP POST" receivers through an :class:`HttpPostNotifier`).

    ``limits`` bound every request (``max_body`` overrides ``limits.max_body``);
    ``app.state.stopping`` is the event that stops requests in flight (set it when the
    server begins to shut down; :func:`run_server` does).
    """
    f = filt if filt is not None else XmlEventFilter()
    if dispatcher is None:
        notifier = HttpPostNotifier()
        dispatcher = Dispatcher({"HTTP": notifier, "HTTPS": notifier, "HTTP POST": notifier})
    disp = dispatcher
    body_limit = limits.max_body if max_body is None else max_body
    stopping = threading.Event()

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        stopping.set()
        await disp.aclose()

    app = FastAPI(title="siftbus XML filter", lifespan=lifespan)
    app.state.filter = f
    app.state.dispatcher = disp
    app.state.stopping = stopping
    app.state.limits = limits

    @app.exception_handler(SiftbusError)
    async def _siftbus_error(_request: Request, exc: SiftbusError) -> JSONResponse:
        return error_response(exc)

    def guard() -> Guard:
        return Guard(stopping, limits.max_request_seconds)

    @app.post("/subscriptions", status_code=201, response_model=None)
    async def subscribe(request: Request) -> Any:
        body = await read_body(request, body_limit)
        host = request.client.host if request.client else "localhost"
        sender = request.headers.get("x-callback-address") or f"http://{host}/"
        ids = await run_in_threadpool(f.subscribe_xml, body, source="request",
                                      default_method="HTTP", sender=sender,
                                      check=guard().check)
        return {"ids": ids}

    @app.get("/subscriptions")
    async def list_subscriptions() -> dict[str, list[str]]:
        f.expire()
        return {"ids": sorted(s.id for s in f.subscriptions()),
                "paused": sorted(s.id for s in f.paused())}

    @app.delete("/subscriptions/{sub_id}")
    async def unsubscribe(sub_id: str) -> dict[str, str]:
        f.unsubscribe(sub_id)
        return {"id": sub_id}

    # -- the subscription manager (WS-Notification: GetStatus, Renew, Pause, Resume) ----
    @app.get("/subscriptions/{sub_id}")
    async def status(sub_id: str) -> dict[str, Any]:
        f.expire()
        return _status_json(f.status(sub_id))

    @app.post("/subscriptions/{sub_id}/renew")
    async def renew(sub_id: str, timeout: int | None = None) -> dict[str, Any]:
        f.expire()
        return _status_json(f.renew(sub_id, timeout))

    @app.post("/subscriptions/{sub_id}/pause")
    async def pause(sub_id: str) -> dict[str, Any]:
        f.expire()
        f.pause(sub_id)
        return _status_json(f.status(sub_id))

    @app.post("/subscriptions/{sub_id}/resume")
    async def resume(sub_id: str) -> dict[str, Any]:
        f.expire()
        f.resume(sub_id)
        return _status_json(f.status(sub_id))

    # -- the event-type hierarchy ------------------------------------------------------
    @app.get("/types")
    async def list_types() -> dict[str, list[str]]:
        return {e.name: e.texts() for e in f.matcher.types.entries()}

    @app.put("/types/{name}")
    async def define_type(name: str, request: Request) -> dict[str, Any]:
        body = _json_object(await read_body(request, min(body_limit, 1 << 20)))
        targets = body.get("targets")
        namespaces = body.get("namespaces", {})
        if (not isinstance(targets, list) or not all(isinstance(t, str) for t in targets)
                or not isinstance(namespaces, dict)
                or not all(isinstance(k, str) and isinstance(v, str)
                           for k, v in namespaces.items())):
            raise SubscriptionError('a type is {"targets": ["//X", "#Sub", ...], '
                                    '"namespaces": {"prefix": "uri"}}', field="type")
        await run_in_threadpool(f.define_type, name, targets, namespaces)
        return {"name": name, "targets": targets}

    @app.delete("/types/{name}")
    async def undefine_type(name: str) -> dict[str, str]:
        await run_in_threadpool(f.undefine_type, name)
        return {"name": name}

    @app.post("/publish", response_model=None)
    async def publish(request: Request, deliver: bool = True) -> Any:
        body = await read_body(request, body_limit)
        g = guard()

        def run() -> list[EventResult]:
            out = []
            for r in f.iter_results(body, name="request"):
                out.append(r)
                g.check()
            return out

        results = await run_in_threadpool(run)
        notes = [n for r in results for n in r.notifications]
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


class _Server(uvicorn.Server):
    """uvicorn's server, which on SIGINT/SIGTERM first stops the requests in flight."""

    def __init__(self, config: uvicorn.Config, stopping: threading.Event) -> None:
        super().__init__(config)
        self._stopping = stopping

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._stopping.set()
        super().handle_exit(sig, frame)


def run_server(app: Any, host: str, port: int, *, inner: FastAPI | None = None,
               tls: Mapping[str, Any] | None = None, log_level: str = "info",
               graceful_seconds: int = 5) -> None:
    """Serve ``app`` until SIGINT/SIGTERM. A signal stops the requests in flight (their
    work checks a :class:`Guard`), and connections still open after ``graceful_seconds``
    are closed, so the process ends promptly whatever a request was doing. ``inner`` is
    the app of :func:`create_app` when ``app`` wraps it (the security hook); ``tls`` the
    uvicorn TLS arguments."""
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level,
                            timeout_graceful_shutdown=graceful_seconds, **(tls or {}))
    _Server(config, (inner or app).state.stopping).run()
