"""The gateway's ASGI application: REST, streams, metrics, the dashboard, OpenAPI.

:func:`create_app` builds the FastAPI app of one :class:`~siftbus.gateway.hub.Gateway`.
Errors are one JSON shape, ``{"error": {"type", "message", "line", "column",
"field"}}``, with the status of their class (:data:`STATUS`) -- also the framework's own
refusals (an unknown route, a body that does not fit the OpenAPI schema: 422, its
excerpt bounded), and on a secured network a request without valid credentials gets 401
before its body is looked at. A bad request never disturbs another. ``/openapi.json``
and ``/docs`` describe the API.
"""

from __future__ import annotations

from importlib import metadata, resources
from typing import Any
from urllib.parse import parse_qs

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.exceptions import HTTPException as StarletteHTTPException

from siftbus.errors import (
    AccessDenied,
    AuthenticationError,
    ConnectionLostError,
    DuplicateProfileError,
    EnvironmentProblem,
    QuotaExceeded,
    RemoteError,
    SiftbusError,
    UnknownProfileError,
)

from . import rest, streaming
from .asyncapi import asyncapi_document
from .asyncapi import schemas as stream_schemas
from .auth import request_token
from .codec import dumps_bytes
from .guards import App, Receive, RequestLimits, Scope, Send, error_body
from .hub import Gateway
from .metrics import gateway_registry
from .rest import answer_publish

STATUS: tuple[tuple[type[SiftbusError], int], ...] = (
    (AuthenticationError, 401), (AccessDenied, 403), (UnknownProfileError, 404),
    (DuplicateProfileError, 409), (QuotaExceeded, 429), (ConnectionLostError, 503),
    (EnvironmentProblem, 503), (SiftbusError, 400))
"""HTTP status per error class (the first that applies)."""

REMOTE_STATUS = {"UnknownProfileError": 404, "ChannelNotFound": 404,
                 "DuplicateProfileError": 409, "QuotaExceeded": 429, "AccessDenied": 403,
                 "AuthenticationError": 401}
"""HTTP status of an error a broker reported, by its class name (else 400)."""


EXCERPT = 80
"""Characters of a refused input quoted back in an error (never the whole input)."""

HTTP_KINDS = {404: "NotFound", 405: "MethodNotAllowed"}


def excerpt(value: Any) -> str:
    """A bounded excerpt of a refused value (its repr, cut at :data:`EXCERPT`)."""
    text = repr(value)
    return text if len(text) <= EXCERPT else f"{text[:EXCERPT]}... ({len(text)} characters)"


def validation_error(exc: RequestValidationError) -> dict[str, Any]:
    """The gateway's error of a request that does not fit the OpenAPI schema: the first
    problem, where it is (``field``: the dotted location) and an excerpt of the input."""
    errors = exc.errors()
    first = errors[0] if errors else {}
    loc = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or None
    msg = str(first.get("msg", "the request does not fit its schema"))
    if "input" in first and first.get("type") != "missing":
        msg += f" (got {excerpt(first['input'])})"
    if len(errors) > 1:
        msg += f"; {len(errors) - 1} more problem(s)"
    return error_body("RequestValidationError", f"{loc}: {msg}" if loc else msg, field=loc)


def status_of(exc: SiftbusError) -> int:
    if isinstance(exc, RemoteError):
        return REMOTE_STATUS.get(exc.kind, 400)
    if isinstance(exc, QuotaExceeded) and exc.quota == "max_batch":
        return 413
    return next(code for cls, code in STATUS if isinstance(exc, cls))


def error_of(exc: SiftbusError) -> dict[str, Any]:
    """The JSON error of ``exc`` (the gateway's one error shape)."""
    kind = getattr(exc, "kind", "") or type(exc).__name__
    return error_body(kind, exc.message, line=exc.line, column=exc.column, field=exc.field)


class PublishRoute:
    """``POST /api/publish`` served in front of the framework's routing: the hot route,
    called for every batch a publisher sends, answered by
    :func:`~siftbus.gateway.rest.answer_publish` without routing, dependencies or
    response models (a third of a small request's cost). Every other request goes on
    to the app; the route's FastAPI declaration documents it."""

    def __init__(self, app: App, *, gateway: Gateway) -> None:
        self.app = app
        self.gw = gateway

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != "/api/publish" \
                or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        body = bytearray()
        while True:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                return  # gone, or over max_body (RequestLimits answers that)
            body += msg.get("body", b"")
            if not msg.get("more_body", False):
                break
        try:
            status, out = await answer_publish(
                self.gw, headers.get("authorization"), query.get("token", [None])[0],
                headers.get("content-type", "application/json"), bytes(body), headers)
        except SiftbusError as exc:
            status, out = status_of(exc), dumps_bytes(error_of(exc))
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(out)).encode())]})
        await send({"type": "http.response.body", "body": out})


def static_dir() -> str:
    return str(resources.files("siftbus.gateway") / "static")


def swagger_ui_docs(app: FastAPI) -> None:
    """``/docs``: Swagger UI from the swagger-ui-bundle package, not a CDN (an operator's
    network may have no way out)."""
    from fastapi.openapi.docs import get_swagger_ui_html
    from swagger_ui_bundle import swagger_ui_path

    app.mount("/docs/assets", StaticFiles(directory=swagger_ui_path), name="swagger-ui")

    @app.get("/docs", include_in_schema=False)
    async def docs() -> Response:
        return get_swagger_ui_html(openapi_url="/openapi.json", title="siftbus gateway",
                                   swagger_js_url="/docs/assets/swagger-ui-bundle.js",
                                   swagger_css_url="/docs/assets/swagger-ui.css",
                                   swagger_favicon_url="/docs/assets/favicon-32x32.png")


def create_app(gw: Gateway) -> FastAPI:
    """The FastAPI app of gateway ``gw`` (see the module docstring)."""
    # the installed distribution's version: importing the package's face from inside a
    # layer would make every layer depend on every other
    app = FastAPI(title="siftbus gateway", version=metadata.version("siftbus"),
                  description="Publish, subscribe and inspect a siftbus broker network "
                  "over HTTP, WebSocket and Server-Sent Events.\n\n"
                  + streaming.WEBSOCKET_PROTOCOL, docs_url=None)
    swagger_ui_docs(app)

    @app.exception_handler(SiftbusError)
    async def siftbus_error(request: Request, exc: SiftbusError) -> JSONResponse:
        return JSONResponse(error_of(exc), status_code=status_of(exc))

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        try:  # credentials first: an unauthenticated caller learns nothing of the schema
            gw.authenticate(request_token(gw, request, None))
        except SiftbusError as denied:
            return JSONResponse(error_of(denied), status_code=status_of(denied))
        return JSONResponse(validation_error(exc), status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = HTTP_KINDS.get(exc.status_code, "HTTPError")
        return JSONResponse(error_body(kind, str(exc.detail)[:EXCERPT * 2]),
                            status_code=exc.status_code, headers=exc.headers)

    app.state.gateway = gw
    app.include_router(rest.router(gw))
    app.include_router(streaming.router(gw))
    registry = gateway_registry(gw)

    @app.get("/metrics", include_in_schema=False)
    async def metrics(request: Request) -> Response:
        """The gateway's Prometheus metrics (text exposition format); on a secured
        network only with a valid token, like every data route."""
        gw.authenticate(request_token(gw, request, None))
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
    app.mount("/static", StaticFiles(directory=static_dir()), name="static")

    @app.get("/asyncapi.json", include_in_schema=False)
    async def asyncapi(request: Request) -> JSONResponse:
        """The AsyncAPI 3.0 document of the WebSocket and SSE streams."""
        return JSONResponse(asyncapi_document(app.version,
                                              request.headers.get("host", "localhost")))

    def openapi() -> dict[str, Any]:  # the stream messages' models among its schemas
        if app.openapi_schema is None:
            doc = get_openapi(title=app.title, version=app.version,
                              description=app.description, routes=app.routes)
            doc.setdefault("components", {}).setdefault("schemas", {}).update(
                stream_schemas())
            app.openapi_schema = doc
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

    @app.get("/", include_in_schema=False)
    async def index() -> RedirectResponse:
        return RedirectResponse("/dashboard")

    @app.get("/dashboard", include_in_schema=False)
    async def dashboard() -> FileResponse:
        return FileResponse(f"{static_dir()}/index.html", media_type="text/html")

    def count(status: int) -> None:
        key = f"{status // 100}xx"
        gw.counters.requests[key] = gw.counters.requests.get(key, 0) + 1

    app.add_middleware(PublishRoute, gateway=gw)  # inside the limits: they apply
    app.add_middleware(RequestLimits, max_body=gw.limits.max_body,
                       timeout=gw.limits.request_timeout,
                       untimed=("/api/sse", "/api/ws"), on_status=count)
    return app


__all__ = ["EXCERPT", "REMOTE_STATUS", "STATUS", "PublishRoute", "create_app", "error_of",
           "excerpt", "status_of", "validation_error"]
