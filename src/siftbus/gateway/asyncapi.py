"""``/asyncapi.json``: an AsyncAPI 3.0 document of the gateway's streams, generated from
the pydantic models of :mod:`.messages` (the ones the OpenAPI document lists too).

Two channels: ``ws`` (``/api/ws``, the WebSocket protocol: the client's ops, the replies,
notifications, errors) and ``sse`` (``/api/sse``, Server-Sent Events). Every message's
payload is the JSON Schema pydantic writes for its model, under ``components.schemas``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from .messages import MODELS, RECEIVED, SENT, SSE

REPLIES = {"subscribe": ["subscribed"], "unsubscribe": ["unsubscribed"],
           "publish": ["published"], "watch": ["watching"], "ping": ["pong"],
           "session": ["session"], "ack": ["acked"]}
"""The reply of each op (besides ``error``, which any op may get)."""


def schemas() -> dict[str, Any]:
    """The JSON Schemas of the stream messages, keyed by model name (``$ref``s point at
    ``#/components/schemas/{name}``)."""
    _, top = models_json_schema([(m, "serialization") for m in MODELS],
                                ref_template="#/components/schemas/{model}")
    out: dict[str, Any] = top["$defs"]
    return out


def _message(model: type[BaseModel]) -> dict[str, Any]:
    doc = (model.__doc__ or "").strip()
    msg: dict[str, Any] = {"name": model.__name__, "contentType": "application/json",
                           "payload": {"$ref": f"#/components/schemas/{model.__name__}"}}
    if doc and not doc.startswith("Usage docs"):
        msg["summary"] = doc.splitlines()[0]
    return msg


def _ref(channel: str, model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": f"#/channels/{channel}/messages/{model.__name__}"}


def asyncapi_document(version: str, host: str = "localhost:8080") -> dict[str, Any]:
    """The AsyncAPI 3.0 document of a gateway serving at ``host``."""
    ws_models = [*SENT.values(), *RECEIVED.values()]
    channels = {
        "ws": {"address": "/api/ws", "title": "WebSocket",
               "description": "One socket, many subscriptions. ?format=cloudevents: "
                              "notifications as structured CloudEvents; ?token=: the "
                              "caller's token.",
               "servers": [{"$ref": "#/servers/websocket"}],
               "messages": {m.__name__: {"$ref": f"#/components/messages/{m.__name__}"}
                            for m in ws_models}},
        "sse": {"address": "/api/sse", "title": "Server-Sent Events",
                "description": "GET /api/sse?profile=...&profile=...[&format=cloudevents]: "
                               "the profiles are subscribed while the stream is open; the "
                               "SSE event name is the message's type.",
                "servers": [{"$ref": "#/servers/http"}],
                "messages": {m.__name__: {"$ref": f"#/components/messages/{m.__name__}"}
                             for m in SSE.values()}},
    }
    operations: dict[str, Any] = {}
    for op, model in SENT.items():
        operations[f"send-{op}"] = {
            "action": "send", "channel": {"$ref": "#/channels/ws"},
            "summary": f"The {op} op.", "messages": [_ref("ws", model)],
            "reply": {"channel": {"$ref": "#/channels/ws"},
                      "messages": [_ref("ws", RECEIVED[r]) for r in REPLIES[op]]
                      + [_ref("ws", RECEIVED["error"])]}}
    for kind in ("notifications", "dropped", "network", "error"):
        operations[f"receive-{kind}"] = {
            "action": "receive", "channel": {"$ref": "#/channels/ws"},
            "messages": [_ref("ws", RECEIVED[kind])]}
    operations["receive-sse"] = {
        "action": "receive", "channel": {"$ref": "#/channels/sse"},
        "messages": [_ref("sse", m) for m in SSE.values()]}
    return {
        "asyncapi": "3.0.0",
        "info": {"title": "siftbus gateway streams", "version": version,
                 "description": "Content-based notifications of a siftbus broker network "
                                "over WebSocket and Server-Sent Events (docs/gateway.md)."},
        "defaultContentType": "application/json",
        "servers": {"websocket": {"host": host, "protocol": "ws"},
                    "http": {"host": host, "protocol": "http"}},
        "channels": channels,
        "operations": operations,
        "components": {"schemas": schemas(),
                       "messages": {m.__name__: _message(m) for m in MODELS}},
    }


__all__ = ["REPLIES", "asyncapi_document", "schemas"]
